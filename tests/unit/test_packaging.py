"""The package ships its type information (PEP 561), as its ``Typing :: Typed`` classifier promises.

Without ``py.typed`` a type checker treats an installed dshpy as untyped and every
import becomes ``Any``, so the classifier would be a false promise. The wheel test
builds a real wheel with the project's own build backend, because a marker that
exists in the source tree but is left out of the wheel helps nobody.
"""

import email.parser
import importlib.resources
import zipfile
from pathlib import Path

from hatchling.builders.wheel import WheelBuilder

ROOT = Path(__file__).resolve().parents[2]


def test_py_typed_marker_is_in_the_package() -> None:
    assert importlib.resources.files("dshpy").joinpath("py.typed").is_file()


def test_wheel_ships_py_typed_and_claims_typed(tmp_path: Path) -> None:
    wheel = next(iter(WheelBuilder(str(ROOT)).build(directory=str(tmp_path), versions=["standard"])))
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        metadata_name = next(name for name in names if name.endswith(".dist-info/METADATA"))
        metadata = email.parser.Parser().parsestr(archive.read(metadata_name).decode())
    assert "dshpy/py.typed" in names
    assert "Typing :: Typed" in metadata.get_all("Classifier", [])
