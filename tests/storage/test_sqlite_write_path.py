"""The SQLite live write path: one transaction per flush, conditional on the stored next seq, all or nothing."""

from __future__ import annotations

import sqlite3

import pytest

import dshpy
from dshpy.core.events import encode_event
from dshpy.log.event_text import event_text
from dshpy.storage.sqlite import SqliteStore
from dshpy.testing.builders import TurnScript


@pytest.fixture
def db_path(tmp_path):
    return tmp_path / "sessions.db"


def test_a_flush_is_one_immediate_transaction_that_rereads_the_next_seq(db_path):
    store = SqliteStore(db_path)
    session = store.create(cwd="/w")
    TurnScript(session).turn(steps=2)
    pending = session.pending_count
    assert pending > 1
    statements: list[str] = []
    store._db.set_trace_callback(statements.append)
    session.flush()
    store._db.set_trace_callback(None)
    # a projection cache save may follow; "-- " lines are FTS5's own statements inside ours
    writes = [s for s in statements if not s.startswith(("PRAGMA", "-- "))]
    assert writes[0] == "BEGIN IMMEDIATE"
    assert writes[1].startswith("SELECT") and "max(seq)" in writes[1]
    inserts = writes[2 : 2 + pending]
    assert all(s.startswith("INSERT INTO events") for s in inserts)
    # the batch's full-text rows go in the same transaction (search is never behind or ahead of the log)
    # (one row per event with text, keyed by the session's number: nothing else is written for them)
    texts = sum(1 for e in session.events[-pending:] if event_text(e))
    assert texts > 0
    assert "search_keys" in writes[1]  # the session's number is read with its next seq
    indexed = writes[2 + pending : 2 + pending + texts]
    assert all(s.startswith("INSERT INTO search_text (rowid, text)") for s in indexed)
    after = 2 + pending + texts
    # the session row records the new length in the same transaction (rows lost later are detectable)
    assert writes[after].startswith("UPDATE sessions SET next_seq")
    assert writes[after + 1] == "COMMIT"
    assert not store._db.in_transaction
    session.close()
    store.close()


def test_stored_rows_are_the_encoded_events(db_path):
    store = SqliteStore(db_path)
    session = store.create(cwd="/w")
    script = TurnScript(session)
    for _ in range(3):
        script.turn(steps=2, tools_per_step=2)
        session.flush()
    rows = store._db.execute(
        "SELECT session_id, seq, type, time, body FROM events WHERE session_id = ? ORDER BY seq", (session.id,)
    ).fetchall()
    # a body is stored compressed (schema v6) when that makes it smaller: it gives back exactly the encoded event
    decoded = [(sid, seq, kind, time, store._bodies.decode(body)) for sid, seq, kind, time, body in rows]
    assert decoded == [(session.id, e.seq, e.type, e.time, encode_event(e, seq_ranges=False)) for e in session.events]
    assert sum(len(row[4]) for row in rows) < sum(len(row[4]) for row in decoded)
    session.close()
    store.close()


def test_a_writer_on_another_connection_that_appended_first_wins(db_path):
    ours, theirs = SqliteStore(db_path), SqliteStore(db_path)
    session = ours.create(cwd="/w")
    TurnScript(session).turn()
    session.flush()
    # A writer that ignores the lease (an older dshpy) still cannot interleave: the append itself is conditional.
    other = dshpy.Session(session.header, list(theirs.read(session.id)))
    TurnScript(other).turn("from the other writer")
    flushed = len(session.events)
    theirs._append(session.id, flushed, list(other.events[flushed:]))
    TurnScript(session).turn("stale")
    with pytest.raises(dshpy.ConflictError, match="another writer appended first") as caught:
        session.flush()
    assert caught.value.actual_seq == len(other.events)
    assert session.pending_count > 0  # nothing was written, nothing was dropped
    assert not ours._db.in_transaction
    stored = [encode_event(e, seq_ranges=False) for e in ours.read(session.id)]
    assert stored == [encode_event(e, seq_ranges=False) for e in other.events]
    ours.close()
    theirs.close()


def test_a_batch_that_fails_midway_leaves_no_row_and_no_open_transaction(db_path):
    store = SqliteStore(db_path)
    session = store.create(cwd="/w")
    TurnScript(session).turn()
    session.flush()
    start = len(session.events)
    TurnScript(session).turn(steps=2)
    assert session.pending_count >= 3
    # The check passes, then the third insert of the batch fails (a temporary trigger on this connection only).
    store._db.execute(
        f"CREATE TEMP TRIGGER fail_midway BEFORE INSERT ON events WHEN NEW.seq = {start + 2} "
        "BEGIN SELECT RAISE(ABORT, 'planted failure'); END"
    )
    with pytest.raises(dshpy.ConflictError, match="planted failure"):
        session.flush()
    assert not store._db.in_transaction
    assert session.pending_count >= 3  # still pending
    assert len(list(store.read(session.id))) == start  # none of the batch was stored
    store._db.execute("DROP TRIGGER fail_midway")
    session.flush()  # the connection is usable again and the batch lands whole
    assert [e.seq for e in store.read(session.id)] == list(range(len(session.events)))
    session.close()
    store.close()


def test_a_held_write_lock_is_a_store_error_and_the_writer_recovers(db_path):
    store = SqliteStore(db_path, busy_timeout_ms=50)
    session = store.create(cwd="/w")
    TurnScript(session).turn()
    blocker = sqlite3.connect(db_path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    with pytest.raises(dshpy.StoreError, match="cannot start a write transaction"):
        session.flush()
    blocker.execute("ROLLBACK")
    blocker.close()
    assert not store._db.in_transaction
    session.flush()
    assert len(list(store.read(session.id))) == len(session.events)
    session.close()
    store.close()


def test_a_deleted_session_is_named(db_path):
    store = SqliteStore(db_path)
    session = store.create(cwd="/w")
    TurnScript(session).turn()
    session.flush()
    TurnScript(session).turn()
    events = list(session.events)
    flushed = len(events) - session.pending_count
    store._remove(session.id)  # bypassing the lease the live session holds (delete() would refuse)
    with pytest.raises(dshpy.SessionNotFound, match=session.id):
        store._append(session.id, flushed, events[flushed:])
    assert not store._db.in_transaction
    store.close()


def test_an_empty_fork_continues_at_its_inherited_count(db_path):
    store = SqliteStore(db_path)
    parent = store.create(cwd="/w")
    TurnScript(parent).turn()
    parent.flush()
    child = store.fork(parent.id)
    inherited = len(child.events)
    own = store._db.execute("SELECT count(*) FROM events WHERE session_id = ?", (child.id,)).fetchone()[0]
    TurnScript(child).turn("child")
    child.flush()
    assert [e.seq for e in store.read(child.id)] == list(range(len(child.events)))
    assert len(child.events) > inherited
    stored_own = store._db.execute("SELECT count(*) FROM events WHERE session_id = ?", (child.id,)).fetchone()[0]
    assert stored_own == own + len(child.events) - inherited
    child.close()
    parent.close()
    store.close()
