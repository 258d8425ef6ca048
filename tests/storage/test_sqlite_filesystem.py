"""SQLite on a read-only filesystem and on a full disk: real tmpfs mounts (root only; skipped, saying why, otherwise).

A read-only mount is what a backup, a container image layer or a remounted disk looks
like; ``chmod`` would not do, since root ignores file modes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import dshpy
from dshpy.core.events import encode_event
from dshpy.storage.sqlite import SqliteStore
from dshpy.testing.builders import TurnScript, user_message


def _mount(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["mount", *args], capture_output=True, check=False)


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A fresh tmpfs at ``tmp_path/mnt``, and its size option; the test sets the size with :func:`_sized`."""
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    done = _mount("-t", "tmpfs", "-o", "size=8m,mode=0700", "tmpfs", str(mountpoint))
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mountpoint, "8m"
    finally:
        subprocess.run(["umount", "-l", str(mountpoint)], check=False)


def _remount(mountpoint: Path, options: str) -> None:
    done = _mount("-o", f"remount,{options}", str(mountpoint))
    if done.returncode != 0:
        pytest.skip(f"cannot remount the tmpfs {options}: {done.stderr.decode().strip()}")


def _cli(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    env.pop("DSHPY_STORE", None)
    return subprocess.run(
        [sys.executable, "-m", "dshpy", "--store", url, *args], capture_output=True, text=True, env=env, check=False
    )


def _wire(events: list[dshpy.SessionEvent]) -> list[bytes]:
    return [encode_event(e, seq_ranges=False) for e in events]


def test_a_read_only_filesystem_still_reads_and_refuses_writes_clearly(tmpfs):
    mountpoint, _size = tmpfs
    path = mountpoint / "sessions.db"
    store = SqliteStore(path)
    session = store.create(session_id="demo", cwd="/w")
    for _ in range(2):
        TurnScript(session).turn(steps=2)
    session.flush()
    session.close()
    expected = _wire(list(store.read("demo")))
    store.close()
    _remount(mountpoint, "ro")

    store = SqliteStore(path)
    assert store.read_only
    assert _wire(list(store.read("demo"))) == expected
    assert _wire(list(store.inspect("demo").events)) == expected
    assert [info.id for info in store.list()] == ["demo"]
    assert store.stat("demo").event_count == len(expected)
    assert store.projections("demo")["values"]["stats"]["turns"] == 2
    with pytest.raises(dshpy.ReadOnlyStoreError, match="read-only"):
        store.create(cwd="/w")
    with pytest.raises(dshpy.ReadOnlyStoreError, match="read-only"):
        store.open("demo")  # a live handle is for writing: refused up front (its writer lease cannot be taken)
    with pytest.raises(dshpy.ReadOnlyStoreError, match="read-only"):
        store.delete("demo")
    store.close()

    url = f"sqlite:///{path}"
    for command in (["sessions", "list"], ["sessions", "show", "demo"], ["sessions", "log", "demo"]):
        done = _cli(url, *command)
        assert done.returncode == 0, (command, done.stderr)
        assert "demo" in done.stdout or "turn/start" in done.stdout
        assert done.stderr == ""
    done = _cli(url, "sessions", "delete", "demo", "--yes")
    assert done.returncode == 1, done.stderr
    assert "read-only" in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_a_full_disk_is_a_store_full_error_and_the_failed_batch_leaves_nothing(tmpfs):
    mountpoint, _size = tmpfs
    _remount(mountpoint, "size=1m")
    path = mountpoint / "sessions.db"
    store = SqliteStore(path)
    session = store.create(session_id="big", cwd="/w")
    TurnScript(session).turn(steps=1)
    session.flush()
    text = "x" * 60_000

    def fill() -> None:
        for index in range(100):
            session.append("turn/start", {"turn": index + 2})
            session.append("user/message", user_message(f"{index} {text}"), surface_op="append")
            session.append("turn/end", {"turn": index + 2, "reason": {"kind": "completed"}})
            session.flush()

    with pytest.raises(dshpy.StoreFullError, match="disk is full"):
        fill()
    durable = store.stat("big").event_count
    stored = _wire(list(store.read("big")))
    assert len(stored) == durable
    assert _wire(session.events[:durable]) == stored  # what was acknowledged is there, nothing of the failed batch
    store.close()
    reopened = SqliteStore(path)
    assert _wire(list(reopened.read("big"))) == stored
    reopened.close()


_CRASHING_WRITER = """
import os, sys
import dshpy
from dshpy.core.events import encode_event
from dshpy.testing.builders import TurnScript
store = dshpy.open_store(sys.argv[1])
session = store.open("demo")
TurnScript(session).turn(steps=1)
session.flush()
for event in session.events:
    sys.stdout.buffer.write(encode_event(event, seq_ranges=False) + b"\\n")
sys.stdout.flush()
os._exit(0)  # as if killed: the WAL keeps the committed batch, nothing checkpoints it
"""


def test_a_read_only_filesystem_with_a_wal_left_behind_shows_its_commits(tmpfs):
    mountpoint, _size = tmpfs
    path = mountpoint / "sessions.db"
    url = f"sqlite:///{path}"
    store = SqliteStore(path)
    session = store.create(session_id="demo", cwd="/w")
    TurnScript(session).turn(steps=1)
    session.flush()
    session.close()
    store.close()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-c", _CRASHING_WRITER, url], check=True, env=env, capture_output=True)
    expected = done.stdout.splitlines()
    assert len(expected) > len(session.events)
    assert path.with_name("sessions.db-wal").stat().st_size > 0  # the last batch is only in the WAL
    _remount(mountpoint, "ro")
    store = SqliteStore(path)
    assert store.read_only
    assert _wire(list(store.read("demo"))) == expected
    assert store.stat("demo").event_count == len(expected)
    store.close()
