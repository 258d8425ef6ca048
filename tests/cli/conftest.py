"""Fixtures for the command-line tests: a SQLite store in tmp_path, sessions built like real agents', a runner."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_support import make_runner, run_cli
from click.testing import CliRunner, Result

import dshpy

Invoke = Callable[..., Result]


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "sessions.db"


@pytest.fixture
def store_url(db_path: Path) -> str:
    return f"sqlite:///{db_path}"


@pytest.fixture
def store(store_url: str) -> Iterator[dshpy.BaseStore]:
    opened = dshpy.open_store(store_url)
    yield opened
    opened.close()


@pytest.fixture(autouse=True)
def _no_ambient_store(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Never touch the developer's ~/.dshpy: the default store lives in tmp_path."""
    monkeypatch.delenv("DSHPY_STORE", raising=False)
    monkeypatch.setenv("DSHPY_HOME", str(tmp_path / "home"))


@pytest.fixture
def runner() -> CliRunner:
    return make_runner()


@pytest.fixture
def dshpy_cli(runner: CliRunner, store_url: str) -> Invoke:
    """``dshpy_cli("sessions", "list", code=0)``: runs with ``--store`` pointing at the test store."""

    def invoke(*args: str, code: int = 0, stdin: str | None = None, obj: Any = None) -> Result:
        return run_cli(runner, ["--store", store_url, *args], code=code, stdin=stdin, obj=obj)

    return invoke
