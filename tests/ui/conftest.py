"""The UI server fixture: the showcase session, its fork and a hostile one, in a real SQLite file."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from ui_support import HOSTILE, Running, start_ui, stop_ui

import dshpy
from dshpy.testing.builders import TurnScript
from dshpy.testing.showcase import build_showcase


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    path: Path = tmp_path_factory.mktemp("ui") / "sessions.db"
    store = dshpy.open_store(f"sqlite:///{path}")
    showcase = build_showcase(store)
    hostile = store.create(cwd="/tmp/<hostile>")
    TurnScript(hostile).turn(HOSTILE)
    hostile.flush()
    hostile_id = hostile.id
    hostile.close()
    server, loop, thread = start_ui(store)
    try:
        yield Running(server, store, showcase, hostile_id)
    finally:
        stop_ui(server, loop, thread)
        store.close()
