"""Single-writer leases on SQLite and PostgreSQL, with real processes (issue #11, item 4).

Process A (``python -m dshpy.testing.lease_workers hold``) opens a session and keeps a
turn in progress. While it lives, this process's ``open()`` is refused naming A's pid
and host, ``dshpy sessions repair`` refuses without appending, and ``inspect``/``read``
still work. Once A is killed with SIGKILL the lease is free and ``open()`` repairs the
turn it left; once A closes cleanly, ``open()`` has nothing to repair. Then the issue's
scenario in small: two writer processes taking turns on one session never close each
other's live turns and lose no answer.
"""

from __future__ import annotations

import gc
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson
import pytest

import dshpy
from dshpy.testing.builders import TurnScript
from dshpy.testing.lease_workers import answer_text

WORKERS = [sys.executable, "-m", "dshpy.testing.lease_workers"]
TURNS_EACH = 20


@pytest.fixture(params=["sqlite", "postgres"])
def url(request, tmp_path):
    if request.param == "postgres":
        return request.getfixturevalue("postgres_url")  # skips, saying why, without DSH_TEST_POSTGRES_DSN
    return f"sqlite:///{tmp_path}/lease.db"


def _env() -> dict[str, str]:
    src = str(Path(dshpy.__file__).resolve().parents[1])
    return {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}


@contextmanager
def _holder(url: str, session_id: str) -> Iterator[subprocess.Popen[str]]:
    """Process A, holding the session with a turn in progress until told to finish (or killed)."""
    with subprocess.Popen(
        [*WORKERS, "hold", url, session_id],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=_env(),
    ) as holder:
        try:
            assert holder.stdout is not None
            line = holder.stdout.readline()
            assert line.strip() == "ready", f"holder did not start: {line!r}"
            yield holder
        finally:
            if holder.poll() is None:
                holder.kill()
            holder.wait()


def _new_session(url: str) -> str:
    store = dshpy.open_store(url)
    session = store.create(cwd="/w")
    TurnScript(session).turn("before")
    session.close()
    store.close()
    return session.id


def _repair_cli(url: str, session_id: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dshpy", "sessions", "repair", session_id, "--store", url],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=60,
        check=False,
    )


def _open_once_released(store, session_id: str):
    """``open()`` right after the holder died. SQLite's lock is gone with the process; a PostgreSQL server
    needs a moment to notice the closed socket and end the holder's backend, so busy is retried briefly."""
    deadline = time.monotonic() + 10
    while True:
        try:
            return store.open(session_id)
        except dshpy.SessionBusyError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def _wire(events) -> list[dict]:
    return [event.to_wire() for event in events]


def test_a_live_writer_in_another_process_is_never_repaired_until_it_is_killed(url):
    session_id = _new_session(url)
    store = dshpy.open_store(url)
    with _holder(url, session_id) as holder:
        live = list(store.read(session_id))
        assert live[-1].type == "user/message"  # A's turn is in progress
        with pytest.raises(dshpy.SessionBusyError) as busy:
            store.open(session_id)
        assert busy.value.holder == f"pid {holder.pid} on host {socket.gethostname()}"
        assert f"pid {holder.pid}, host {socket.gethostname()}" in str(busy.value)
        assert isinstance(busy.value, dshpy.ConflictError)
        refused = _repair_cli(url, session_id)
        assert refused.returncode != 0
        assert f"pid {holder.pid}" in refused.stderr + refused.stdout
        assert _wire(store.read(session_id)) == _wire(live)  # nothing was appended
        view = store.inspect(session_id)  # readers never need the lease
        assert view.events[-1].data["reason"] == {"kind": "interrupted"}
        assert _wire(store.read(session_id)) == _wire(live)

        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
        session = _open_once_released(store, session_id)  # A is gone: the lease is free, the crash is repaired
        repaired = list(store.read(session_id))
        assert _wire(repaired[: len(live)]) == _wire(live)
        assert [e.type for e in repaired[len(live) :]] == ["step/end", "turn/end"]
        assert repaired[-1].data["reason"] == {"kind": "interrupted"}
        assert session.open_turn is None
        session.close()
    store.close()


def test_after_a_clean_close_in_another_process_open_repairs_nothing(url):
    session_id = _new_session(url)
    with _holder(url, session_id) as holder:
        assert holder.stdin is not None and holder.stdout is not None
        holder.stdin.write("finish\n")
        holder.stdin.flush()
        assert holder.stdout.readline().strip() == "closed"
        assert holder.wait(timeout=30) == 0
    store = dshpy.open_store(url)
    before = list(store.read(session_id))
    assert before[-1].type == "turn/end" and before[-1].data["reason"] == {"kind": "completed"}
    session = store.open(session_id)
    assert _wire(store.read(session_id)) == _wire(before)  # no repair: nothing appended
    session.close()
    repaired = _repair_cli(url, session_id)
    assert repaired.returncode == 0, repaired.stderr
    assert "nothing to repair" in repaired.stdout
    store.close()


def test_two_writer_processes_taking_turns_never_interrupt_each_other(url):
    store = dshpy.open_store(url)
    session = store.create(cwd="/w")
    session.close()
    store.close()
    writers = [
        subprocess.Popen(  # both run at once; communicate() below reaps each and closes its pipe
            [*WORKERS, "turns", url, session.id, str(writer), str(TURNS_EACH)],
            stdout=subprocess.PIPE,
            text=True,
            env=_env(),
        )
        for writer in (1, 2)
    ]
    reports = []
    for writer in writers:
        out, _ = writer.communicate(timeout=120)
        assert writer.returncode == 0
        reports.append(orjson.loads(out.strip().splitlines()[-1]))
    store = dshpy.open_store(url)
    events = list(store.read(session.id))
    store.close()
    dshpy.validate(events)
    ends = [e.data["reason"]["kind"] for e in events if e.type == "turn/end"]
    assert ends.count("interrupted") == 0
    assert ends == ["completed"] * (2 * TURNS_EACH)
    assert [answer for report in reports for answer in report["lost"]] == []
    answers = {
        block["text"]
        for e in events
        if e.type == "assistant/message"
        for block in e.data["message"]["content"]
        if block["type"] == "text"
    }
    assert answers == {answer_text(w, k) for w in (1, 2) for k in range(TURNS_EACH)}


# -- SQLite: the lease files -------------------------------------------------------------------


def test_sqlite_leases_are_files_only_while_held_never_for_readers(tmp_path):
    url = f"sqlite:///{tmp_path}/lease.db"
    leases = tmp_path / "lease.db-leases"
    session_id = _new_session(url)
    assert list(leases.iterdir()) == []  # closed: released and removed
    reader = dshpy.open_store(url)
    reader.inspect(session_id)
    list(reader.read(session_id))
    reader.stat(session_id)
    reader.list()
    reader.projections(session_id)
    assert list(leases.iterdir()) == []
    store = dshpy.open_store(url)
    upper = store.create(session_id="Case")
    lower = store.create(session_id="case")  # ids differ by case only: two leases, even on a case-blind disk
    live = store.open(session_id)
    assert sorted(p.name for p in leases.iterdir()) == sorted(["^case.lock", "case.lock", f"{session_id}.lock"])
    record = orjson.loads((leases / f"{session_id}.lock").read_bytes())
    assert (record["pid"], record["host"]) == (os.getpid(), socket.gethostname())
    with pytest.raises(dshpy.SessionBusyError):
        store.delete(session_id)  # not from under its live writer
    live.close()
    upper.close()
    lower.close()
    store.delete(session_id)
    store.delete("Case")
    assert sorted(p.name for p in leases.iterdir()) == []
    assert not reader.exists(session_id)
    reader.close()
    store.close()


def test_sqlite_a_removed_lease_file_stops_its_writer(tmp_path):
    store = dshpy.open_store(f"sqlite:///{tmp_path}/lease.db")
    session = store.create()
    (tmp_path / "lease.db-leases" / f"{session.id}.lock").unlink()  # by hand: now another open could succeed
    other = store.open(session.id)
    session.append("turn/start", {"turn": 1})
    with pytest.raises(dshpy.StoreError, match="removed or replaced"):
        session.flush()
    assert list(store.read(session.id)) == []
    other.close()
    store.close()


def test_sqlite_a_forked_child_dropping_an_inherited_handle_leaves_the_lease_held(tmp_path):
    store = dshpy.open_store(f"sqlite:///{tmp_path}/lease.db")
    session = store.create()
    lease_file = tmp_path / "lease.db-leases" / f"{session.id}.lock"
    child = os.fork()
    if child == 0:  # pragma: no cover - the child's outcome is checked by the parent
        try:
            del session  # the child's copy of the handle goes away, as in any forked worker that drops it
            gc.collect()
        finally:
            os._exit(0)
    os.waitpid(child, 0)
    assert lease_file.exists()
    with pytest.raises(dshpy.SessionBusyError):
        store.open(session.id)
    session.close()
    assert not lease_file.exists()
    store.close()


# -- PostgreSQL: the advisory lock's connection ----------------------------------------------


def _lease_backend(dsn: str) -> int:
    """Terminate this process's lease connection on the server and wait until its backend is gone."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s",
            (f"dshpy-lease pid={os.getpid()} host={socket.gethostname()}"[:63],),
        ).fetchone()
        assert row is not None, "no lease connection found"
        conn.execute("SELECT pg_terminate_backend(%s)", (row[0],))
        deadline = time.monotonic() + 10
        while conn.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (row[0],)).fetchone():
            assert time.monotonic() < deadline, "the terminated backend did not go away"
            time.sleep(0.01)
        return int(row[0])


def test_postgres_a_lost_lease_connection_is_taken_again_or_refused(postgres_url, postgres_dsn):
    store = dshpy.open_store(postgres_url)
    session = store.create()
    TurnScript(session).turn()
    session.flush()
    _lease_backend(postgres_dsn)  # the server drops the lock with its backend (a restart, an admin)
    TurnScript(session).turn("after the lease connection died")
    session.flush()  # nobody took it meanwhile: taken again on a new connection
    assert _wire(store.read(session.id)) == _wire(session.events)

    session.append("turn/start", {"turn": session.next_turn})
    session.flush()
    _lease_backend(postgres_dsn)
    other = dshpy.open_store(postgres_url)
    thief = other.open(session.id)  # the lease was free: this open may repair, and does
    assert thief.events[-1].data["reason"] == {"kind": "interrupted"}
    session.append("step/start", {"turn": session.next_turn - 1, "step": 1})
    with pytest.raises(dshpy.SessionBusyError, match=f"pid {os.getpid()}"):
        session.flush()  # the first handle cannot take it back while the other holds it
    thief.close()
    with pytest.raises(dshpy.ConflictError):
        session.flush()  # free again, but the log moved on: the conditional append refuses to interleave
    assert _wire(store.read(session.id)) == _wire(thief.events)
    other.close()
    store.close()
