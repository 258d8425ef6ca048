"""Crash safety: a real writer process is killed with SIGKILL at random points while it appends and flushes.

After every kill the session must reopen, every event acknowledged by a returned ``flush()``
must still be there unchanged, and a turn the kill left open must come back closed as
``interrupted``. The writer is a forked child of the test process (a real process with its
own file descriptors and locks), which keeps 200 kills per backend fast. Each kill comes a
random moment after the writer reopened the session or after one of its first three
acknowledged flushes: on a loaded machine (a starved writer, slow fsyncs) a clock started
at the reopen alone could run out before the first flush, and no kill would land in a turn.
"""

from __future__ import annotations

import os
import random
import select
import signal
import time

import pytest

import dshpy
from dshpy.testing.builders import TurnScript

KILLS = int(os.environ.get("DSHPY_CRASH_KILLS", "200"))
ROTATE_EVERY = 25


def backend_urls(tmp_path):
    return {
        "sqlite": f"sqlite:///{tmp_path}/crash.db",
        "jsonl": f"jsonl:///{tmp_path}/crash-plain?compression=none",
        "jsonl+zstd": f"jsonl:///{tmp_path}/crash-zstd?compression=zstd",
    }


@pytest.fixture(params=["sqlite", "jsonl", "jsonl+zstd", "postgres"])
def url(request, tmp_path):
    if request.param == "postgres":
        return request.getfixturevalue("postgres_url")  # skips, saying why, without DSH_TEST_POSTGRES_DSN
    return backend_urls(tmp_path)[request.param]


def kill_delay(url: str, rng: random.Random) -> float:
    """When to kill the writer. A PostgreSQL writer first connects and checks the schema (~20 ms),
    so its window starts later and is wider, to land the kills inside its appends."""
    if url.startswith("postgresql:"):
        return rng.uniform(0.02, 0.12)
    return rng.uniform(0.0, 0.04)


def _writer(url: str, session_id: str, ack_fd: int, seed: int) -> None:
    """The child: reopen (repairing the last crash), then append turns, flushing at random points."""
    rng = random.Random(seed)
    store = dshpy.open_store(url)
    session = store.open(session_id)
    os.write(ack_fd, b"ready\n")  # the kill clock starts now, however late a loaded machine ran us
    countdown = [rng.randint(1, 6)]

    def maybe_flush(live, _event):
        countdown[0] -= 1
        if countdown[0] <= 0:
            countdown[0] = rng.randint(1, 6)
            live.flush()
            os.write(ack_fd, f"{len(live.events)}\n".encode())

    session.subscribe(maybe_flush)
    script = TurnScript(session)
    while True:
        script.turn(steps=rng.randint(1, 3), tools_per_step=rng.randint(1, 2))


def _writer_backends(url: str, writer_pid: int) -> set[int]:
    """PostgreSQL's server processes that may be serving the writer (empty for the other stores).

    Only this test's store can own them: its pool connections are named after the test's own schema
    (``dshpy:<schema>``) and the writer's lease connection after the writer's pid. Other tests, other
    pytest workers and other programs on the same database are never waited for.
    """
    if not url.startswith("postgresql:"):
        return set()
    import psycopg

    schema = url.rsplit("schema=", 1)[1].split("&", 1)[0]
    with psycopg.connect(url.split("?", 1)[0], autocommit=True) as db:
        rows = db.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
            " AND (application_name = %s OR application_name LIKE %s)",
            (f"dshpy:{schema}", f"dshpy-lease pid={writer_pid} %"),
        ).fetchall()
    return {row[0] for row in rows}


def _wait_for_orphans(url: str, writer_pid: int, before: set[int]) -> None:
    """Wait until the killed writer's PostgreSQL backends are gone.

    SIGKILL ends the client, not the server process serving it: a statement the writer had
    sent still runs to its commit. Reading before that would compare against a log that is
    still growing (the events were never acknowledged, so keeping them is correct).
    """
    deadline = time.monotonic() + 30
    while _writer_backends(url, writer_pid) - before and time.monotonic() < deadline:
        time.sleep(0.02)


def _read_until(read_fd: int, buffer: bytes, lines: int) -> bytes:
    """Read the writer's reports until ``lines`` whole lines have come (or it died, or 30 s passed)."""
    deadline = time.monotonic() + 30
    while buffer.count(b"\n") < lines and time.monotonic() < deadline:
        if select.select([read_fd], [], [], 0.5)[0]:
            chunk = os.read(read_fd, 65536)
            if not chunk:
                break
            buffer += chunk
    return buffer


def _run_and_kill(url: str, session_id: str, seed: int, acks: int, delay: float) -> int:
    """Fork a writer, kill it ``delay`` seconds after its ``acks``-th acknowledged flush (0: after it
    reopened the session), and return the highest acknowledged event count."""
    before = _writer_backends(url, -1)  # the test's own store connections, closed but maybe not gone yet
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.close(read_fd)
        try:
            _writer(url, session_id, write_fd, seed)
        finally:
            os._exit(0)
    os.close(write_fd)
    buffer = _read_until(read_fd, b"", 1 + acks)  # "ready", then one line per acknowledged flush
    time.sleep(delay)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    _wait_for_orphans(url, pid, before)
    acked = 0
    while select.select([read_fd], [], [], 0)[0]:
        chunk = os.read(read_fd, 65536)
        if not chunk:
            break
        buffer += chunk
    os.close(read_fd)
    for line in buffer.split():
        if line != b"ready":
            acked = max(acked, int(line))
    return acked


def test_kill9_never_loses_acknowledged_events(url):
    rng = random.Random(1234)
    kills = 0
    opened_with_open_turn = 0
    while kills < KILLS:
        store = dshpy.open_store(url)
        session = store.create()
        session.close()
        store.close()
        known: list[dict] = []
        for _ in range(ROTATE_EVERY):
            if kills >= KILLS:
                break
            seed, acks = rng.randrange(1 << 30), rng.randint(0, 3)
            acked = _run_and_kill(url, session.id, seed, acks, kill_delay(url, rng))
            kills += 1
            store = dshpy.open_store(url)
            stored = list(store.read(session.id))
            raw = [e.to_wire() for e in stored]
            assert len(raw) >= acked, f"kill {kills}: {acked} events acknowledged, only {len(raw)} stored"
            assert raw[: len(known)] == known, f"kill {kills}: previously stored events changed"
            turn_open = dshpy.Session(store.stat(session.id).header, stored).open_turn is not None
            reopened = store.open(session.id)
            assert reopened.open_turn is None
            events = [e.to_wire() for e in reopened.events]
            assert events[: len(raw)] == raw
            if turn_open:
                opened_with_open_turn += 1
                assert events[-1]["type"] == "turn/end"
                assert events[-1]["data"]["reason"] == {"kind": "interrupted"}
            else:
                assert len(events) == len(raw)
            dshpy.validate(reopened.events)
            reopened.close()
            known = events
            store.close()
    assert kills == KILLS
    # the kills really landed inside turns (the clock starts when the writer has reopened the session)
    assert opened_with_open_turn > KILLS // 8
