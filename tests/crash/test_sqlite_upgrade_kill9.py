"""Crash safety of the schema v6 upgrade: a real process upgrading a v5 session database is killed with SIGKILL.

The upgrade copies every event row into the new compressed table inside one
transaction; the process dies before the first row, midway and after the last one.
Each time the file must still be a v5 database, and the next open must upgrade it and
read exactly what dshpy read before (``tests/fixtures/sqlite_v5``).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
from pathlib import Path

import pytest

from dshpy.core.events import encode_event
from dshpy.storage import sqlite as sqlite_module
from dshpy.storage.sqlite import SqliteStore

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "sqlite_v5"
EXPECTED = json.loads((FIXTURE / "v5.expected.json").read_text())


def _rows() -> int:
    raw = sqlite3.connect(f"file:{FIXTURE / 'v5.db'}?mode=ro&immutable=1", uri=True)
    try:
        return int(raw.execute("SELECT count(*) FROM events").fetchone()[0])
    finally:
        raw.close()


ROWS = _rows()


def _upgrade_killed_at(path: Path, row: int) -> int:
    """Fork a process that opens (so upgrades) the database and kills itself as it compresses row ``row``."""
    pid = os.fork()
    if pid == 0:  # child
        try:
            original, calls = sqlite_module.packed_body, [0]

            def packed_then_killed(body: bytes) -> bytes:
                calls[0] += 1
                if calls[0] == row:
                    os.kill(os.getpid(), signal.SIGKILL)
                return original(body)

            sqlite_module.packed_body = packed_then_killed  # type: ignore[assignment]
            SqliteStore(path)
        finally:
            os._exit(0)
    return pid


@pytest.mark.parametrize("row", [1, ROWS // 2, ROWS])
def test_an_upgrade_killed_midway_leaves_a_v5_file_that_upgrades_later(tmp_path: Path, row: int) -> None:
    path = tmp_path / "v5.db"
    shutil.copyfile(FIXTURE / "v5.db", path)
    _pid, status = os.waitpid(_upgrade_killed_at(path, row), 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    raw = sqlite3.connect(path)
    assert raw.execute("PRAGMA user_version").fetchone()[0] == 5
    raw.close()
    store = SqliteStore(path)
    assert store.schema_version == 6
    for session_id, events in EXPECTED["sessions"].items():
        assert [encode_event(e, seq_ranges=False).decode() for e in store.read(session_id)] == events
    store.close()
