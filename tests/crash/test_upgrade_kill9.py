"""Crash safety of ``sessions upgrade``: a real process upgrading an old dsh log is killed with SIGKILL.

Whatever the moment, the session directory must hold the old generation untouched,
and either no v4 file or a complete one (never a partial ``session.v4``); the session
must read as the same upgraded log, and a later upgrade must finish the job. The
kills land at every publication step (the module's checkpoint hook) and at random
times while a long log (30k events in rc.8's shape) is being upgraded, in plain and
zstd roots. The upgrading process is a forked child: its own descriptors and locks.
"""

from __future__ import annotations

import hashlib
import os
import random
import signal
import time
from pathlib import Path

import pytest

from dshpy.storage.jsonl import JsonlStore
from dshpy.storage.jsonl import upgrade as upgrade_module
from dshpy.storage.jsonl.layout import generation_filename
from dshpy.testing.dsh_v0 import write_v0_log

STEPS = ("staging", "staged", "synced", "verified", "linked", "published")
KILLS = int(os.environ.get("DSHPY_UPGRADE_KILLS", "10"))
CWD = "/tmp/dshpy-v0"


@pytest.fixture(params=["none", "zstd"])
def compression(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _old_root(root: Path, compression: str, events: int) -> Path:
    return write_v0_log(root, "old", events=events, cwd=CWD, compression=compression)


def _upgrade_in_child(root: Path, compression: str, *, kill_at: str | None = None) -> int:
    """Fork a process that upgrades the session (killing itself at ``kill_at``); return its pid."""
    pid = os.fork()
    if pid == 0:  # child
        try:
            if kill_at is not None:

                def die(step: str) -> None:
                    if step == kill_at:
                        os.kill(os.getpid(), signal.SIGKILL)

                upgrade_module._checkpoint = die
            JsonlStore(root, compression=compression).upgrade("old")
        finally:
            os._exit(0)
    return pid


def _check(root: Path, compression: str, source: Path, kept: bytes, expected: bytes) -> bool:
    """The invariant after a kill; returns whether the v4 file was published."""
    assert source.read_bytes() == kept, "the old generation changed"
    target = source.with_name(generation_filename(4, compressed=compression == "zstd"))
    published = target.exists()
    if published:
        assert hashlib.sha256(target.read_bytes()).digest() == expected, "a partial or different v4 file"
    store = JsonlStore(root, compression=compression)
    assert store.stat("old").stored_version == (4 if published else 0)
    return published


def _expected(tmp_path: Path, compression: str, events: int) -> tuple[int, bytes]:
    """The upgrade done without a crash: its event count and the digest of its v4 file."""
    root = tmp_path / "reference"
    source = _old_root(root, compression, events)
    report = JsonlStore(root, compression=compression).upgrade("old")
    assert report.written and source.exists()
    return report.event_count, hashlib.sha256(report.target.read_bytes()).digest()


def _finish(root: Path, compression: str, count: int) -> None:
    store = JsonlStore(root, compression=compression)
    report = store.upgrade("old")
    assert report.event_count == count
    assert JsonlStore(root, compression=compression).stat("old").stored_version == 4


@pytest.mark.parametrize("step", STEPS)
def test_a_kill_at_every_publication_step_leaves_old_or_both(tmp_path: Path, compression: str, step: str) -> None:
    count, expected = _expected(tmp_path, compression, 2_000)
    root = tmp_path / "crash"
    source = _old_root(root, compression, 2_000)
    kept = source.read_bytes()
    pid = _upgrade_in_child(root, compression, kill_at=step)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    published = _check(root, compression, source, kept, expected)
    assert published == (step in ("linked", "published"))
    assert len(list(JsonlStore(root, compression=compression).read("old"))) == count
    _finish(root, compression, count)
    assert source.read_bytes() == kept


def test_random_kills_while_a_long_log_is_upgraded(tmp_path: Path, compression: str) -> None:
    events = 30_000
    count, expected = _expected(tmp_path, compression, events)
    root = tmp_path / "crash"
    source = _old_root(root, compression, events)
    kept = source.read_bytes()
    target = source.with_name(generation_filename(4, compressed=compression == "zstd"))
    started = time.perf_counter()
    _check(root, compression, source, kept, expected)
    duration = time.perf_counter() - started  # about what one upgrade takes here
    rng = random.Random(16)
    outcomes = {False: 0, True: 0}
    for _ in range(KILLS):
        pid = _upgrade_in_child(root, compression)
        time.sleep(rng.uniform(0.0, 2.5 * duration))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        outcomes[_check(root, compression, source, kept, expected)] += 1
        target.unlink(missing_ok=True)  # start the next upgrade from the old generation alone
    assert outcomes[False] > 0, outcomes  # some kills landed before publication
    _finish(root, compression, count)
    assert target.exists() and source.read_bytes() == kept
