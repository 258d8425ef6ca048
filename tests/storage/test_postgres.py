"""PostgreSQL specifics: migrations, concurrent first use, LISTEN/NOTIFY follow, connection loss, zero-copy forks.

Every test works in its own schema (the ``postgres_url`` fixture) and skips, saying
why, when ``DSH_TEST_POSTGRES_DSN`` is unset.
"""

from __future__ import annotations

import multiprocessing
import threading
import time
from urllib.parse import parse_qs, urlsplit

import psycopg
import pytest
from psycopg import sql

import dshpy
from dshpy.storage.postgres import PostgresStore
from dshpy.storage.postgres_schema import MIGRATIONS
from dshpy.testing.builders import TurnScript


def schema_of(url: str) -> str:
    return parse_qs(urlsplit(url).query)["schema"][0]


def raw(postgres_dsn: str) -> psycopg.Connection:
    return psycopg.connect(postgres_dsn, autocommit=True)


def make_session(store, turns=2):
    session = store.create(cwd="/w")
    for _ in range(turns):
        TurnScript(session).turn(steps=2)
    session.flush()
    return session


def wire(events):
    return [event.to_wire() for event in events]


# -- migrations -----------------------------------------------------------------------------


def test_first_use_creates_the_schema_and_records_each_migration(postgres_url, postgres_dsn):
    store = dshpy.open_store(postgres_url)
    assert isinstance(store, PostgresStore)
    assert store.applied_migrations == tuple(m.version for m in MIGRATIONS)
    assert store.schema_version == store.latest_schema_version == len(MIGRATIONS)
    again = dshpy.open_store(postgres_url)
    assert again.applied_migrations == ()
    assert again.migrate() == ()
    with raw(postgres_dsn) as conn:
        schema = schema_of(postgres_url)
        rows = conn.execute(
            sql.SQL("SELECT version, description FROM {}.schema_version ORDER BY version").format(
                sql.Identifier(schema)
            )
        ).fetchall()
        assert rows == [(m.version, m.description) for m in MIGRATIONS]
        tables = {
            row[0]
            for row in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (schema,)
            )
        }
        assert tables == {"schema_version", "sessions", "events", "projection_cache", "search_docs", "search_state"}
    store.close()
    again.close()


def test_newer_schema_is_refused_with_upgrade_advice(postgres_url, postgres_dsn):
    dshpy.open_store(postgres_url).close()
    schema = sql.Identifier(schema_of(postgres_url))
    with raw(postgres_dsn) as conn:
        conn.execute(
            sql.SQL("INSERT INTO {}.schema_version (version, description) VALUES (%s, 'from the future')").format(
                schema
            ),
            (len(MIGRATIONS) + 1,),
        )
    with pytest.raises(dshpy.FormatVersionError, match="upgrade dshpy"):
        dshpy.open_store(postgres_url)


def test_altered_schema_is_refused_and_left_alone(postgres_url, postgres_dsn):
    store = dshpy.open_store(postgres_url)
    session = make_session(store)
    store.close()
    schema = sql.Identifier(schema_of(postgres_url))
    with raw(postgres_dsn) as conn:
        conn.execute(sql.SQL("ALTER TABLE {}.events ADD COLUMN extra text").format(schema))
    with pytest.raises(dshpy.CorruptSessionError, match="expected dshpy schema"):
        dshpy.open_store(postgres_url)
    with raw(postgres_dsn) as conn:  # nothing was lost or changed
        count = conn.execute(
            sql.SQL("SELECT count(*) FROM {}.events WHERE session_id = %s").format(schema), (session.id,)
        ).fetchone()[0]
        assert count == len(session.events)
        conn.execute(sql.SQL("ALTER TABLE {}.events DROP COLUMN extra").format(schema))
        conn.execute(sql.SQL("CREATE TABLE {}.notes (id int)").format(schema))
    with pytest.raises(dshpy.CorruptSessionError, match="expected dshpy schema"):
        dshpy.open_store(postgres_url)


def test_a_schema_of_someone_else_is_refused_untouched(postgres_url, postgres_dsn):
    schema = sql.Identifier(schema_of(postgres_url))
    with raw(postgres_dsn) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(schema))
        conn.execute(sql.SQL("CREATE TABLE {}.users (id int PRIMARY KEY)").format(schema))
    with pytest.raises(dshpy.CorruptSessionError, match=r"not a dshpy store \(users\)"):
        dshpy.open_store(postgres_url)
    with raw(postgres_dsn) as conn:
        tables = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (schema_of(postgres_url),)
        ).fetchall()
        assert tables == [("users",)]


def test_postgres_alias_and_libpq_options_pass_through(postgres_url, postgres_dsn):
    url = postgres_url.replace("postgresql://", "postgres://", 1) + "&connect_timeout=5&application_name=agent-7"
    store = dshpy.open_store(url)
    assert isinstance(store, PostgresStore)
    session = store.create(session_id="via-alias")
    with raw(postgres_dsn) as admin:
        names = {row[0] for row in admin.execute("SELECT application_name FROM pg_stat_activity")}
    assert "agent-7" in names
    with dshpy.open_store(store.url) as again:  # store.url reopens the same store
        assert again.exists(session.id)
    with pytest.raises(dshpy.StoreError, match='invalid connection option "bogus"'):
        dshpy.open_store(f"{postgres_url}&bogus=1")
    with pytest.raises(dshpy.StoreError, match="pool_max"):
        dshpy.open_store(f"{postgres_url}&pool_max=0")
    store.close()


@pytest.mark.parametrize("bad", ["pg_catalog", "a-b", "1abc", 'x"; DROP TABLE y; --', "x" * 49])
def test_invalid_schema_names_are_refused_before_connecting(postgres_dsn, bad):
    with pytest.raises(dshpy.StoreError, match="invalid schema"):
        PostgresStore(postgres_dsn, schema=bad)


def test_unreachable_server_is_a_store_unavailable_error():
    with pytest.raises(dshpy.StoreUnavailableError, match="cannot connect"):
        dshpy.open_store("postgresql://nobody@127.0.0.1:1/none?connect_timeout=2")


def _open_at_once(url, barrier, results):
    barrier.wait(timeout=30)
    store = dshpy.open_store(url)
    results.put(store.applied_migrations)
    store.close()


def test_concurrent_first_use_migrates_exactly_once(postgres_url, postgres_dsn):
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(2)
    results = context.Queue()
    workers = [context.Process(target=_open_at_once, args=(postgres_url, barrier, results)) for _ in range(2)]
    for worker in workers:
        worker.start()
    applied = sorted(results.get(timeout=60) for _ in workers)
    for worker in workers:
        worker.join(timeout=30)
        assert worker.exitcode == 0
    assert applied == [(), tuple(m.version for m in MIGRATIONS)]  # one created it, the other found it ready
    with raw(postgres_dsn) as conn:
        rows = conn.execute(
            sql.SQL("SELECT version FROM {}.schema_version").format(sql.Identifier(schema_of(postgres_url)))
        ).fetchall()
    assert sorted(rows) == [(m.version,) for m in MIGRATIONS]


# -- zero-copy forks ------------------------------------------------------------------------


def test_fork_stores_only_the_childs_own_events(postgres_url, postgres_dsn):
    store = dshpy.open_store(postgres_url)
    small = make_session(store, turns=1)
    large = make_session(store, turns=60)
    schema = sql.Identifier(schema_of(postgres_url))

    def own_rows(session_id):
        with raw(postgres_dsn) as conn:
            query = sql.SQL("SELECT count(*) FROM {}.events WHERE session_id = %s").format(schema)
            return conn.execute(query, (session_id,)).fetchone()[0]

    child_small = store.fork(small.id)
    child_large = store.fork(large.id)
    assert own_rows(child_small.id) == own_rows(child_large.id) == 1  # just the end-seed marker
    assert wire(store.read(child_large.id))[:-1] == wire(large.events)
    assert store.stat(large.id).forks == (child_large.id,)
    TurnScript(child_large).turn("the child's own")
    child_large.flush()
    own = own_rows(child_large.id)
    large.close()  # a live session cannot be deleted from under its writer
    store.delete(large.id, detach_forks=True)
    assert own_rows(child_large.id) == own + len(large.events)  # the prefix was copied in on detach
    assert wire(store.read(child_large.id)) == wire(child_large.events)
    store.close()


# -- connection loss during a flush ---------------------------------------------------------


def _backend_waiting(conn, schema, blocker_pid, timeout=10.0):
    """The pid of the backend stuck behind ``blocker_pid`` (waiting for a lock it holds)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))", (blocker_pid,)
        ).fetchall()
        if rows:
            return rows[0][0]
        time.sleep(0.01)
    raise AssertionError("the flush never blocked")


@pytest.mark.parametrize("where", ["waiting for the session lock", "inside the insert"])
def test_terminated_backend_mid_flush_writes_nothing_and_a_retry_commits_once(postgres_url, postgres_dsn, where):
    store = dshpy.open_store(postgres_url)
    session = make_session(store, turns=1)
    stored_before = wire(store.read(session.id))
    n = len(stored_before)
    TurnScript(session).turn("the batch that meets a dying connection", steps=2)
    schema = sql.Identifier(schema_of(postgres_url))
    blocker = raw(postgres_dsn)
    blocker.execute("BEGIN")
    if where == "waiting for the session lock":
        blocker.execute(sql.SQL("SELECT 1 FROM {}.sessions WHERE id = %s FOR UPDATE").format(schema), (session.id,))
    else:  # hold an uncommitted row at seq n+1: the flush locks the session, inserts n, then waits at n+1
        blocker.execute(
            sql.SQL("INSERT INTO {}.events VALUES (%s, %s, 'x', 0, '{{}}', 0)").format(schema), (session.id, n + 1)
        )
    outcome: list[BaseException | None] = []
    flusher = threading.Thread(target=lambda: outcome.append(_try(session.flush)))
    flusher.start()
    with raw(postgres_dsn) as admin:
        victim = _backend_waiting(admin, schema_of(postgres_url), blocker.info.backend_pid)
        admin.execute("SELECT pg_terminate_backend(%s)", (victim,))
    flusher.join(timeout=30)
    blocker.execute("ROLLBACK")
    blocker.close()
    (error,) = outcome
    assert isinstance(error, dshpy.StoreUnavailableError), error
    assert not isinstance(error, psycopg.Error)
    assert wire(store.read(session.id)) == stored_before  # nothing half-written
    assert session.pending_count > 0  # the batch is still pending in the live session
    assert session.flush() == len(session.events) - n  # the retry (a new pooled connection) commits it
    assert wire(store.read(session.id)) == wire(session.events)
    dshpy.validate(store.read(session.id))
    session.close()
    store.close()


def _try(action):
    try:
        action()
    except BaseException as error:
        return error
    return None


def _drop_idle_connections(postgres_dsn, schema):
    with raw(postgres_dsn) as admin:
        dropped = admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s AND state = 'idle'",
            (f"dshpy:{schema}",),
        ).fetchall()
    assert dropped and all(ok for (ok,) in dropped)
    time.sleep(0.05)  # let the terminations land
    return len(dropped)


def test_connections_the_server_dropped_while_idle_are_replaced(postgres_url, postgres_dsn, monkeypatch):
    from dshpy.storage import postgres_connect

    store = dshpy.open_store(f"{postgres_url}&pool_min=3")
    session = make_session(store, turns=1)
    store._pool.wait(timeout=10)
    assert _drop_idle_connections(postgres_dsn, schema_of(postgres_url)) >= 3  # all of them, as a restart would
    assert wire(store.read(session.id)) == wire(session.events)  # a read is retried on a checked connection
    _drop_idle_connections(postgres_dsn, schema_of(postgres_url))
    monkeypatch.setattr(postgres_connect, "IDLE_CHECK_S", 0.0)  # as if they had sat idle: pinged at checkout
    TurnScript(session).turn("after the server dropped our connections")
    session.flush()
    assert wire(store.read(session.id)) == wire(session.events)
    session.close()
    store.close()


def test_retry_after_a_lost_reply_is_a_no_op_or_a_conflict(postgres_url):
    store = dshpy.open_store(postgres_url)
    other = dshpy.open_store(postgres_url)
    session = make_session(store, turns=1)
    n = len(session.events)
    TurnScript(session).turn("committed, but the reply was lost")
    batch = list(session.events[n:])
    other._append(session.id, n, batch)  # the first attempt committed (on a connection outside the lease)...
    assert session.flush() == len(batch)  # ...so the retry of the same batch succeeds without writing
    assert wire(store.read(session.id)) == wire(session.events)
    m = len(session.events)
    TurnScript(session).turn("mine")
    theirs = dshpy.Session(session.header, list(store.read(session.id)))
    TurnScript(theirs).turn("theirs")
    other._append(session.id, m, list(theirs.events[m:]))  # a writer ignoring the lease (an older dshpy) won
    with pytest.raises(dshpy.ConflictError):
        session.flush()
    assert wire(store.read(session.id)) == wire(theirs.events)
    store.close()
    other.close()


# -- follow ---------------------------------------------------------------------------------


def _write_turns(url, session_id, turns, go):
    store = dshpy.open_store(url)
    go.wait(30)
    session = store.open(session_id)
    for index in range(turns):
        TurnScript(session).turn(f"turn {index}")
        session.flush()
        time.sleep(0.01)
    session.close()
    store.close()


@pytest.mark.parametrize("cut_listener", [False, True], ids=["steady", "listener-terminated"])
def test_follow_wakes_on_notify_from_another_process(postgres_url, postgres_dsn, cut_listener, caplog):
    store = dshpy.open_store(postgres_url)
    session = make_session(store, turns=1)
    session.close()
    store.close()
    context = multiprocessing.get_context("fork")
    go = context.Event()
    writer = context.Process(target=_write_turns, args=(postgres_url, session.id, 40, go))
    writer.start()
    store = dshpy.open_store(postgres_url)
    store.follow_resync_s = 60.0  # longer than the test: every wake-up must come from a notification
    got = []
    deadline = time.monotonic() + 30
    expected = None
    listener_cut = False

    def done():
        nonlocal expected
        if expected is None and not writer.is_alive():
            expected = store.stat(session.id).event_count
        return (expected is not None and len(got) >= expected) or time.monotonic() > deadline

    for event in store.follow(session.id, 0, poll_interval=0.05, stop=done):
        got.append(event)
        if len(got) == 3:
            go.set()
        if cut_listener and not listener_cut and len(got) >= 40:
            with raw(postgres_dsn) as admin:
                channel = f'LISTEN "dshpy:{schema_of(postgres_url)}"'
                cut = admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = %s", (channel,)
                ).fetchall()
                assert cut == [(True,)]
            listener_cut = True
    writer.join(timeout=30)
    assert writer.exitcode == 0
    stored = list(store.read(session.id))
    assert time.monotonic() < deadline, f"follow delivered {len(got)} of {len(stored)} events"
    assert [e.seq for e in got] == list(range(len(stored)))  # no gap, no duplicate
    assert wire(got) == wire(stored)
    reconnects = [r for r in caplog.records if "LISTEN connection lost" in r.getMessage()]
    assert len(reconnects) == (1 if cut_listener else 0)
    store.close()


def test_follow_stops_promptly_and_refuses_bad_arguments(postgres_url):
    store = dshpy.open_store(postgres_url)
    session = make_session(store, turns=1)
    stop = threading.Event()
    follower = store.follow(session.id, stop=stop, poll_interval=0.05)
    assert wire(next(follower) for _ in session.events) == wire(session.events)
    stop.set()
    started = time.monotonic()
    assert list(follower) == []
    assert time.monotonic() - started < 1.0
    with pytest.raises(dshpy.SessionNotFound):
        store.follow("missing")
    with pytest.raises(ValueError, match="from_seq"):
        store.follow(session.id, -1)
    with pytest.raises(ValueError, match="poll_interval"):
        store.follow(session.id, poll_interval=0)
    store.close()


def test_append_notifies_with_the_session_and_its_next_seq(postgres_url, postgres_dsn):
    store = dshpy.open_store(postgres_url)
    session = store.create()
    stale = dshpy.Session(session.header, [])  # a writer ignoring the lease (an older dshpy)
    with raw(postgres_dsn) as listener:
        listener.execute(sql.SQL("LISTEN {}").format(sql.Identifier(store.channel)))
        session.append("turn/start", {"turn": 1})
        session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        session.flush()
        stale.append("turn/start", {"turn": 1})
        stale.append("turn/end", {"turn": 1, "reason": {"kind": "aborted", "reason": {"kind": "user"}}})
        with pytest.raises(dshpy.ConflictError):  # refused by the database: it notifies nobody
            store._append(session.id, 0, list(stale.events))
        notes = [note.payload for note in listener.notifies(timeout=0.5)]
    assert notes == [f"{session.id} 2"]
    session.close()
    store.close()
