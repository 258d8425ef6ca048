"""Every exception class dshpy defines is in the one ``DshError`` tree (see :mod:`dshpy.errors`).

Callers are promised that ``except dshpy.DshError`` catches everything dshpy raises on
purpose, so a new exception class outside the tree is a broken promise even before
anything raises it. The walk imports every module of the package (a module that fails
to import fails the test: none is skipped silently) and checks each class it defines.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import dshpy
from dshpy.errors import DshError

OUTSIDE_THE_TREE: dict[str, str] = {}
"""Deliberate exceptions, ``module.Class`` → why. Empty: dshpy has no control-flow exception of its own."""


def _dshpy_modules() -> list[str]:
    names = ["dshpy"]
    for info in pkgutil.walk_packages(dshpy.__path__, prefix="dshpy."):
        names.append(info.name)
    return names


def _exception_classes() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for name in _dshpy_modules():
        module = importlib.import_module(name)  # an import error fails the test: nothing is skipped
        for value in vars(module).values():
            if not inspect.isclass(value) or not issubclass(value, BaseException):
                continue
            if value.__module__.split(".")[0] != "dshpy":
                continue  # re-exported from a library (httpx, psycopg, click, …)
            found[f"{value.__module__}.{value.__qualname__}"] = value
            for nested in vars(value).values():  # exception classes defined inside a class body
                if inspect.isclass(nested) and issubclass(nested, BaseException):
                    found[f"{nested.__module__}.{nested.__qualname__}"] = nested
    return found


def test_the_walk_sees_the_whole_package() -> None:
    modules = _dshpy_modules()
    for expected in (
        "dshpy.storage.postgres",
        "dshpy.storage.postgres_connect",
        "dshpy.server.protocol",
        "dshpy.sdk.transport",
        "dshpy.llm.failures",
        "dshpy.cli.app",
    ):
        assert expected in modules
    classes = _exception_classes()
    assert "dshpy.errors.StoreError" in classes
    assert "dshpy.llm.config.ModelConfigError" in classes


def test_every_exception_class_is_a_dsh_error() -> None:
    outside = sorted(
        name
        for name, cls in _exception_classes().items()
        if not issubclass(cls, DshError) and name not in OUTSIDE_THE_TREE
    )
    assert outside == [], f"exception classes outside the DshError tree: {outside}"


def test_the_allow_list_names_real_classes() -> None:
    classes = _exception_classes()
    for name in OUTSIDE_THE_TREE:
        assert name in classes, f"{name} is allowed outside the tree but no longer exists"
        assert not issubclass(classes[name], DshError), f"{name} is in the tree now: drop it from the list"


def test_the_tree_drawing_names_every_public_exception() -> None:
    import dshpy.errors

    drawing = dshpy.errors.__doc__ or ""
    missing = sorted(
        cls.__name__
        for cls in _exception_classes().values()
        if not cls.__name__.startswith("_") and f" {cls.__name__} " not in drawing
    )
    assert missing == [], f"errors.py's tree drawing does not show: {missing}"


def test_one_except_catches_what_the_library_refuses_and_old_excepts_still_do() -> None:
    """``except dshpy.DshError`` catches a value JSON cannot carry and a malformed model URL;
    both are still ``ValueError`` for code written before they joined the tree."""
    import pytest

    from dshpy.llm.config import ModelConfigError, check_base_url

    with pytest.raises(DshError) as caught:
        dshpy.freeze_json({"score": float("nan")})
    assert isinstance(caught.value, ValueError)
    assert "$.score" in str(caught.value)
    with pytest.raises(DshError) as refused:
        check_base_url("ftp://api.example.com")
    assert isinstance(refused.value, ModelConfigError | ValueError)
