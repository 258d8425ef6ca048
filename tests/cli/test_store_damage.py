"""A damaged SQLite store on the command line: one clear line and exit 2, never a traceback (a real subprocess)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import dshpy
from dshpy.testing.builders import TurnScript


def _cli(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    env.pop("DSHPY_STORE", None)
    return subprocess.run(
        [sys.executable, "-m", "dshpy", "--store", url, *args], capture_output=True, text=True, env=env, check=False
    )


def _store(path: Path) -> None:
    store = dshpy.open_store(f"sqlite:///{path}")
    session = store.create(session_id="demo", cwd="/w")
    TurnScript(session).turn(steps=1)
    session.flush()
    session.close()
    store.close()


def test_a_damaged_schema_is_one_line_and_exit_2(db_path):
    _store(db_path)
    data = bytearray(db_path.read_bytes())
    name = bytes(data[:4096]).find(b"projection_cache")  # the schema row's name column comes first
    assert name > 0
    data[name] ^= 0x80  # one flipped bit: the table's name is no longer UTF-8
    db_path.write_bytes(bytes(data))
    for command in (["sessions", "list"], ["sessions", "show", "demo"]):
        done = _cli(f"sqlite:///{db_path}", *command)
        assert done.returncode == 2, done.stderr
        assert "Traceback" not in done.stderr
        [line] = done.stderr.strip().splitlines()
        assert "not a usable SQLite database" in line


def test_a_session_that_lost_rows_is_reported_not_listed_short(db_path):
    _store(db_path)
    import sqlite3

    raw = sqlite3.connect(db_path)
    count = raw.execute("SELECT count(*) FROM events").fetchone()[0]
    raw.execute("DELETE FROM events WHERE seq >= ?", (count - 2,))
    raw.execute("DELETE FROM projection_cache")
    raw.commit()
    raw.close()
    done = _cli(f"sqlite:///{db_path}", "sessions", "list")
    assert done.returncode == 0, done.stderr
    assert "could not be read" in done.stderr
    done = _cli(f"sqlite:///{db_path}", "sessions", "show", "demo")
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert "rows were lost" in line
