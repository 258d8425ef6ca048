"""Every public definition of the server and the SDK says what a caller needs to know.

These are the packages other programs drive (over JSON-RPC, or by importing the
client), so their public modules, classes, functions and methods must carry a
docstring; this test keeps new ones from arriving without. "Public" is what does
not start with ``_``, and a method counts when its class does.
"""

import ast
import importlib
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGES = ("dshpy.server", "dshpy.sdk")


Definition = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


def _public(body: list[ast.stmt], prefix: str) -> Iterator[tuple[str, Definition]]:
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and not node.name.startswith("_"):
            yield prefix + node.name, node
            if isinstance(node, ast.ClassDef):
                yield from _public(node.body, f"{prefix}{node.name}.")


def _undocumented(package: str) -> list[str]:
    root = Path(importlib.import_module(package).__path__[0])
    missing: list[str] = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        name = path.relative_to(root.parent).as_posix()
        if ast.get_docstring(tree) is None:
            missing.append(f"{name} (module)")
        missing += [f"{name}: {qual}" for qual, node in _public(tree.body, "") if ast.get_docstring(node) is None]
    return missing


@pytest.mark.parametrize("package", PACKAGES)
def test_public_definitions_have_docstrings(package: str) -> None:
    assert _undocumented(package) == []
