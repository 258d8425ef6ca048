"""The persisted projection cache on every backend: round trips, stale rows, never ahead of the log, the guard.

Each test runs on memory, SQLite, JSONL (zstd and plain) and PostgreSQL (with
``DSH_TEST_POSTGRES_DSN``; a schema per test). Cache rows are manipulated through the
backend primitive ``_save_projection_rows`` to build the stale cases.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import dshpy
from dshpy import LifecycleError, SessionArchivedError, StoreError
from dshpy.projections import (
    BUILTINS,
    LIFECYCLE,
    SESSION_STATE_TYPE,
    STATS,
    TITLE,
    USAGE,
    CachedState,
    ProjectionDefinition,
    ProjectionRegistry,
    ProjectionState,
    attach,
    default_registry,
    runner_of,
    set_lifecycle,
    state_of,
)
from dshpy.storage import projection_cache
from dshpy.storage.base import StoredRecord
from dshpy.storage.jsonl import PROJECTION_CACHE_FILENAME, JsonlStore
from dshpy.storage.projection_cache import ProjectionRow, rows_of, session_identity
from dshpy.storage.resume_cache import RESUME_KEY
from dshpy.storage.sqlite import SqliteStore
from dshpy.testing.builders import TurnScript, attempt_data

BACKENDS = ["memory", "sqlite", "jsonl-zstd", "jsonl-plain", "postgres"]


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    kind = request.param
    if kind == "memory":
        return "memory:"
    if kind == "sqlite":
        return f"sqlite:///{tmp_path / 'sessions.db'}"
    if kind == "jsonl-zstd":
        return f"jsonl:///{tmp_path / 'root'}"
    if kind == "jsonl-plain":
        return f"jsonl:///{tmp_path / 'root'}?compression=none"
    url: str = request.getfixturevalue("postgres_url")
    return url


@pytest.fixture
def store(store_url: str) -> Iterator[dshpy.BaseStore]:
    opened = dshpy.open_store(store_url)
    yield opened
    opened.close()


def build(store: dshpy.BaseStore, session_id: str = "s", turns: int = 3) -> int:
    """A closed session of ``turns`` turns (a failed attempt in the first, a title); returns its length."""
    session = store.create(session_id=session_id, cwd="/w")
    script = TurnScript(session)
    for index in range(turns):
        script.turn(f"prompt number {index}", steps=2, close=index != 0)
        if index == 0:
            session.append("step/start", {"turn": 1, "step": 3})  # a failed try: billed all the same
            session.append("assistant/attempt", attempt_data(1, 3))
            session.append("step/end", {"turn": 1, "step": 3})
            session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
            session.append("session/title", {"title": "Cached title", "messageSeqs": [], "source": {"kind": "user"}})
    session.close()
    return len(session)


def _fresh(store: dshpy.BaseStore, session_id: str, keys: Any) -> Any:
    """The reference: the built-ins folded from the stored log, no cache."""
    events = list(store.read(session_id))
    session = dshpy.Session(store.stat(session_id).header, events)
    return attach(session, ProjectionRegistry(BUILTINS)).snapshot(keys)


def stored_rows(store: dshpy.BaseStore, session_id: str) -> dict[str, ProjectionRow]:
    return {row.key: row for row in store._load_projection_rows(session_id)}


def rewrite(store: dshpy.BaseStore, session_id: str, **changes: Any) -> None:
    """Replace every stored row of the session by a changed copy (through the backend primitive)."""
    store._save_projection_rows(
        session_id, [row._replace(**changes) for row in store._load_projection_rows(session_id)]
    )


def _delete_rows(store: dshpy.BaseStore, session_id: str) -> None:
    if isinstance(store, JsonlStore):
        (store._locate(session_id).session_dir / PROJECTION_CACHE_FILENAME).unlink(missing_ok=True)
    elif isinstance(store, dshpy.MemoryStore):
        store._projection_rows.pop(session_id, None)
    elif isinstance(store, SqliteStore):
        with store._write() as db:
            db.execute("DELETE FROM projection_cache WHERE session_id = ?", (session_id,))
    else:
        from dshpy.storage.postgres_connect import quote_identifier

        with store._connection("test") as conn:
            conn.execute(
                f"DELETE FROM {quote_identifier(store.schema)}.projection_cache WHERE session_id = %s", (session_id,)
            )


def wrong_rows(store: dshpy.BaseStore, session_id: str) -> None:
    """Make every row's state a believable lie (the same version, seq and identity)."""
    rows = store._load_projection_rows(session_id)
    lies = []
    for row in rows:
        if row.key == "stats":
            lies.append(row._replace(state={**row.state, "turns": 999}))
        elif row.key == "title":
            lies.append(row._replace(state={**row.state, "title": "a lie"}))
        else:
            lies.append(row)
    store._save_projection_rows(session_id, lies)


# -- round trip --------------------------------------------------------------------------------


def test_rows_are_written_at_close_and_seed_the_next_open(store):
    length = build(store)
    rows = stored_rows(store, "s")
    assert set(rows) == {d.key for d in default_registry()} | {RESUME_KEY}  # the projections and the resume point
    header = store.stat("s").header
    assert {(row.seq, row.identity) for row in rows.values()} == {(length - 1, session_identity(header))}

    session = store.open("s")
    runner = runner_of(session)
    assert runner is not None  # attached by open: the guard is live
    assert {key: seeding.outcome for key, seeding in runner.seeding.items()} == dict.fromkeys(
        set(rows) - {RESUME_KEY}, "cached"
    )
    assert {seeding.from_seq for seeding in runner.seeding.values()} == {length}  # nothing folded
    assert runner.snapshot() == _fresh(store, "s", None)
    assert state_of(session, STATS).turns == 3
    assert state_of(session, TITLE).title == "Cached title"
    session.close()


def test_rows_are_written_at_turn_ends_after_the_flush(store, monkeypatch):
    monkeypatch.setattr(projection_cache, "CHECKPOINT_SECONDS", 0.0)  # every turn end is due
    session = store.create(session_id="live")
    script = TurnScript(session)
    script.turn("one", steps=1)
    assert stored_rows(store, "live") == {}  # nothing flushed yet: no rows
    session.flush()
    first = {row.seq for row in stored_rows(store, "live").values()}
    assert first == {len(session) - 1}
    script.turn("two", steps=1, close=False)
    session.flush()  # no turn/end in this batch: rows stay at the last turn end
    assert {row.seq for row in stored_rows(store, "live").values()} == first
    session.append("turn/end", {"turn": 2, "reason": {"kind": "completed"}})
    session.flush()
    assert {row.seq for row in stored_rows(store, "live").values()} == {len(session) - 1}
    session.close()


def test_a_live_session_checkpoints_at_the_first_turn_end_that_many_events_after_its_rows(store, monkeypatch):
    monkeypatch.setattr(projection_cache, "CHECKPOINT_SECONDS", 3600.0)
    monkeypatch.setattr(projection_cache, "CHECKPOINT_EVENTS", 20)
    session = store.create(session_id="live")
    script = TurnScript(session)
    script.turn("one", steps=1)
    session.flush()
    assert len(session) < 20
    assert stored_rows(store, "live") == {}  # a turn end, but too few events since the (absent) rows
    while len(session) < 20:
        turn = session.next_turn
        script.turn("more", steps=1, close=False)
        session.flush()  # no turn/end in the batch
        assert stored_rows(store, "live") == {}
        session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
        session.flush()
    first = {row.seq for row in stored_rows(store, "live").values()}
    assert first == {len(session) - 1}
    script.turn("next", steps=1)
    session.flush()
    assert {row.seq for row in stored_rows(store, "live").values()} == first  # fewer than 20 since those rows
    session.close()  # closing always writes
    assert {row.seq for row in stored_rows(store, "live").values()} == {len(session) - 1}
    assert store.projections("live") == _fresh(store, "live", None)


def test_a_reopened_session_counts_from_the_log_end_it_opened_at(store, monkeypatch):
    monkeypatch.setattr(projection_cache, "CHECKPOINT_SECONDS", 3600.0)
    monkeypatch.setattr(projection_cache, "CHECKPOINT_EVENTS", 20)
    length = build(store, turns=1)
    session = store.open("s")
    TurnScript(session).turn("short", steps=1)
    session.flush()
    assert {row.seq for row in stored_rows(store, "s").values()} == {length - 1}  # the rows close() wrote
    monkeypatch.setattr(projection_cache, "CHECKPOINT_SECONDS", 0.0)
    TurnScript(session).turn("late", steps=1)
    session.flush()  # due by time now
    assert {row.seq for row in stored_rows(store, "s").values()} == {len(session) - 1}
    session.close()


def test_projections_answers_from_rows_and_the_tail_only(store, monkeypatch):
    length = build(store)
    extra = [dshpy.SessionEvent("todo/write", length + i, 1, {"todos": []}) for i in range(3)]
    store.append("s", extra, expected_seq=length)  # appended behind the cache's back: a 3-event tail
    reads: list[int] = []
    original = type(store)._read_chain

    def counting(self: Any, session_id: str, from_seq: int) -> Any:
        reads.append(from_seq)
        return original(self, session_id, from_seq)

    monkeypatch.setattr(type(store), "_read_chain", counting)
    result = store.projections("s")
    assert reads == [length]  # only the tail was read
    monkeypatch.undo()
    assert result == _fresh(store, "s", None)
    assert store.projections("s", ["title"]) == {
        "as_of_seq": length + 2,
        "values": {"title": result["values"]["title"]},
    }
    with pytest.raises(dshpy.ProjectionError, match="no projection registered"):
        store.projections("s", ["nope"])


def test_list_projections_serves_current_rows_and_folds_the_rest(store):
    build(store, "a")
    build(store, "b", turns=1)
    _delete_rows(store, "b")
    listed = {item.info.id: item for item in store.list_projections(["stats", "title", "lifecycle"])}
    assert set(listed) == {"a", "b"}
    for session_id, item in listed.items():
        assert item.error is None
        assert {"as_of_seq": item.as_of_seq, "values": item.values} == _fresh(
            store, session_id, ["stats", "title", "lifecycle"]
        )
    assert set(stored_rows(store, "b")) >= {"stats", "title", "lifecycle"}  # written back
    assert [item.info.id for item in store.list_projections(["title"], limit=1)] == [store.list()[0].id]


def test_a_fork_child_starts_from_its_parents_rows(store):
    length = build(store)
    child = store.fork("s", child_id="kid")
    runner = runner_of(child)
    assert runner is not None
    assert {s.outcome for s in runner.seeding.values()} == {"cached"}
    assert {s.from_seq for s in runner.seeding.values()} == {length}  # only the end-seed marker was folded
    assert state_of(child, STATS).turns == 3
    assert state_of(child, LIFECYCLE).state == "created"  # its own life
    assert runner.snapshot() == _fresh(store, "kid", None)
    child.close()


# -- stale rows ------------------------------------------------------------------------------------


def test_a_believable_row_is_believed(store):
    build(store)
    wrong_rows(store, "s")  # same identity, version and seq: the cache is trusted (that is the point)
    assert store.projections("s", ["stats"])["values"]["stats"]["turns"] == 999


@pytest.mark.parametrize(
    ("change", "outcome"),
    [
        ({"state_version": 99}, "stale-version"),
        ({"seq": 10_000}, "beyond-log"),
        ({"identity": '["s",1,"/w",null,false]'}, "fresh"),
        ({"state": {"turns": "not a number"}}, "invalid"),
    ],
)
def test_stale_rows_are_discarded_and_refolded(store, change, outcome):
    build(store)
    reference = _fresh(store, "s", None)

    wrong_rows(store, "s")  # believable lies, then made stale: only a re-fold gives the right answer
    rewrite(store, "s", **change)
    assert store.projections("s") == reference
    assert stored_rows(store, "s")["stats"].state["turns"] == 3  # the cold reader wrote the re-fold back

    wrong_rows(store, "s")
    rewrite(store, "s", **change)
    session = store.open("s")
    runner = runner_of(session)
    assert runner is not None
    assert runner.seeding["stats"].outcome == outcome
    assert runner.seeding["stats"].from_seq == 0
    assert runner.snapshot() == reference
    session.close()

    if outcome == "invalid":
        return  # listing serves rows at the end of the log as stored, without validating them (speed)
    wrong_rows(store, "s")
    rewrite(store, "s", **change)
    [listed] = store.list_projections(["stats", "title"])
    assert {"as_of_seq": listed.as_of_seq, "values": listed.values} == _fresh(store, "s", ["stats", "title"])


def test_rows_of_an_earlier_session_under_the_same_id_are_not_used(store):
    build(store)
    leftovers = store._load_projection_rows("s")
    store.delete("s")
    assert stored_rows(store, "s") == {}  # deleting a session deletes its rows
    session = store.create(session_id="s", cwd="/w")
    TurnScript(session).turn("a new life", steps=1)
    session.flush()
    session.close()
    store._save_projection_rows("s", leftovers)  # as if they had survived (another store's, a restored backup)

    again = store.open("s")
    assert {s.outcome for s in runner_of(again).seeding.values()} == {"fresh"}
    assert state_of(again, TITLE).title == "a new life"
    again.close()
    store._save_projection_rows("s", leftovers)
    assert store.projections("s", ["stats"])["values"]["stats"]["turns"] == 1
    [listed] = store.list_projections(["stats"])
    assert listed.values["stats"]["turns"] == 1


# -- never ahead of the durable log ------------------------------------------------------------------


class FailingWriter:
    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def write(self, session_id: str, expected_seq: int, events: Any) -> None:
        raise StoreError("disk on fire")

    def close(self) -> None:
        self.inner.close()


def test_an_unflushed_tail_never_reaches_the_cache(store):
    length = build(store, turns=1)
    session = store.open("s")
    TurnScript(session).turn("never stored", steps=1)
    session._writer._inner = FailingWriter(session._writer.inner)  # the flush on close fails
    with pytest.raises(StoreError, match="disk on fire"):
        session.close()
    assert store.stat("s").event_count == length
    assert max(row.seq for row in store._load_projection_rows("s")) < length
    assert store.projections("s") == _fresh(store, "s", None)


def test_rows_always_trail_the_stored_log(store):
    session = store.create(session_id="t")
    script = TurnScript(session)
    for index in range(4):
        script.turn(f"turn {index}", steps=2, close=index % 2 == 0)
        if index % 2:
            session.append("turn/end", {"turn": index + 1, "reason": {"kind": "completed"}})
        session.flush()
        stored = store.stat("t").event_count
        assert all(row.seq < stored for row in store._load_projection_rows("t"))
    session.close()


def test_a_cache_that_cannot_be_written_costs_nothing_but_the_shortcut(store, monkeypatch, caplog):
    def broken(*_args: Any, **_kwargs: Any) -> None:
        raise OSError("read-only file system")

    monkeypatch.setattr(type(store), "_save_projection_rows", broken)
    with caplog.at_level(logging.WARNING, logger="dshpy.storage"):
        build(store)
    assert "projection cache of session s not written" in caplog.text
    monkeypatch.undo()
    assert stored_rows(store, "s") == {}
    session = store.open("s")
    assert {s.outcome for s in runner_of(session).seeding.values()} == {"fresh"}
    assert state_of(session, STATS).turns == 3
    session.close()


# -- the lifecycle guard on stored sessions -------------------------------------------------------


def test_sessions_from_the_store_have_the_lifecycle_guard(store):
    build(store, turns=1)
    session = store.open("s")
    set_lifecycle(session, "paused")
    with pytest.raises(LifecycleError, match="paused"):
        session.append("turn/start", {"turn": 2})  # refused without anyone having read a projection
    set_lifecycle(session, "completed")
    set_lifecycle(session, "archived")
    session.close()

    again = store.open("s")
    with pytest.raises(SessionArchivedError):
        again.append("todo/write", {"todos": []})
    assert again.pending_count == 0
    again.close()

    fresh = store.create(session_id="new")
    with pytest.raises(LifecycleError, match="illegal session lifecycle transition created → paused"):
        fresh.append(SESSION_STATE_TYPE, {"state": "paused"})
    fresh.close()


def test_a_warm_open_folds_only_the_events_after_the_rows(store):
    calls: list[int] = []

    class Seen(ProjectionState):
        count: int = 0

    def seen(state: Seen, event: dshpy.SessionEvent) -> Seen:
        calls.append(event.seq)
        return Seen(count=state.count + 1)

    spy: ProjectionDefinition[Seen] = ProjectionDefinition("test_spy", 1, Seen, Seen, seen)
    registry = default_registry()
    registry.register(spy)
    try:
        length = build(store, turns=4)
        extra = [dshpy.SessionEvent("todo/write", length + i, 1, {"todos": []}) for i in range(5)]
        store.append("s", extra, expected_seq=length)
        calls.clear()
        session = store.open("s")
        assert calls == list(range(length, length + 5))
        assert state_of(session, spy).count == length + 5
        session.close()
    finally:
        registry.unregister("test_spy")


# -- backend specifics -------------------------------------------------------------------------------


def test_jsonl_sidecar_is_private_atomic_and_ignored_by_listing(tmp_path):
    store = JsonlStore(tmp_path / "root", compression="none")
    build(store)
    location = store._locate("s")
    sidecar = location.session_dir / PROJECTION_CACHE_FILENAME
    assert stat.S_IMODE(sidecar.stat().st_mode) == 0o600
    assert sorted(os.listdir(location.session_dir)) == sorted(
        [location.path.name, "session.lock", PROJECTION_CACHE_FILENAME]
    )  # no temporary left behind
    assert [info.id for info in store.list()] == ["s"]
    sidecar.write_bytes(b"{torn")  # an unreadable sidecar is no cache
    assert store._load_projection_rows("s") == []
    assert store.projections("s", ["stats"])["values"]["stats"]["turns"] == 3
    store.delete("s")
    assert not location.session_dir.exists()


def test_sqlite_v1_database_gains_the_cache_table(tmp_path):
    import sqlite3

    from dshpy.storage.sqlite import APPLICATION_ID, SCHEMA_MIGRATIONS

    path = tmp_path / "old.db"
    raw = sqlite3.connect(path)
    for statement in SCHEMA_MIGRATIONS[0]:
        raw.execute(statement)
    raw.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    raw.execute("PRAGMA user_version = 1")
    raw.commit()
    raw.close()
    store = SqliteStore(path)
    assert store.schema_version == len(SCHEMA_MIGRATIONS) == 6
    build(store)
    assert set(stored_rows(store, "s")) == {d.key for d in default_registry()} | {RESUME_KEY}
    store.close()


def test_postgres_v1_schema_gains_the_cache_table(postgres_url, monkeypatch):
    from dshpy.storage import postgres_schema

    monkeypatch.setattr(postgres_schema, "MIGRATIONS", postgres_schema.MIGRATIONS[:1])
    monkeypatch.setattr(postgres_schema, "_reference_cache", {})
    old = dshpy.open_store(postgres_url)
    assert old.applied_migrations == (1,)
    old.close()
    monkeypatch.undo()
    monkeypatch.setattr(postgres_schema, "_reference_cache", {})
    store = dshpy.open_store(postgres_url)
    assert store.applied_migrations == tuple(m.version for m in postgres_schema.MIGRATIONS[1:])  # 2 and every later one
    build(store)
    assert set(stored_rows(store, "s")) == {d.key for d in default_registry()} | {RESUME_KEY}
    store.close()


def test_opening_a_100k_event_session_with_a_warm_cache_folds_only_the_tail(tmp_path):
    """The issue's case, on SQLite: 100,000 stored events, rows 20 events behind the end."""
    calls: list[int] = []

    class Seen(ProjectionState):
        count: int = 0

    def seen(state: Seen, event: dshpy.SessionEvent) -> Seen:
        calls.append(event.seq)
        return Seen(count=state.count + 1)

    spy: ProjectionDefinition[Seen] = ProjectionDefinition("test_spy_100k", 1, Seen, Seen, seen)
    detached = dshpy.Session.new(session_id="big", cwd="/w")
    script = TurnScript(detached)
    while len(detached) < 100_000:
        script.turn("go on", steps=3, tools_per_step=2)
    events = list(detached.events)
    store = SqliteStore(tmp_path / "big.db")
    store._insert(StoredRecord(detached.header, None, events[:-20]))
    registry = default_registry()
    registry.register(spy)
    try:
        head = events[:-20]
        seeds = {d.key: CachedState(d.state_version, len(head) - 1, d.dump(d.fold(head))) for d in registry}
        store._save_projection_rows("big", rows_of(detached.header, seeds))
        store.append("big", events[-20:], expected_seq=len(events) - 20)
        calls.clear()
        session = store.open("big")
        assert calls == list(range(len(events) - 20, len(events)))  # 20 applies, not 100,000
        seeded = runner_of(session)
        assert seeded is not None and {s.from_seq for s in seeded.seeding.values()} == {len(events) - 20}
        assert state_of(session, spy).count == len(events)
        expected = {d.key: d.dump(d.fold(events)) for d in (STATS, USAGE, TITLE)}
        assert seeded.snapshot(["stats", "usage", "title"])["values"] == expected
        session.close()
    finally:
        registry.unregister("test_spy_100k")
        store.close()


def test_sqlite_rows_that_do_not_parse_are_no_rows(tmp_path):
    store = SqliteStore(tmp_path / "s.db")
    build(store)
    with store._write() as db:
        db.execute("UPDATE projection_cache SET state = '{torn' WHERE key IN ('stats', 'title')")
    assert set(stored_rows(store, "s")) == {d.key for d in default_registry()} - {"stats", "title"} | {RESUME_KEY}
    [listed] = store.list_projections(["stats", "title", "lifecycle"])
    assert {"as_of_seq": listed.as_of_seq, "values": listed.values} == _fresh(
        store, "s", ["stats", "title", "lifecycle"]
    )
    assert stored_rows(store, "s")["stats"].state["turns"] == 3  # the fold was written back
    with store._write() as db:
        db.execute("UPDATE projection_cache SET state = '{torn' WHERE key IN ('stats', 'title')")
    session = store.open("s")
    assert runner_of(session).seeding["stats"].outcome == "fresh"
    assert runner_of(session).seeding["usage"].outcome == "cached"
    session.close()
    store.close()
