"""SQLite damage detection: a seeded sweep of single-byte flips over a small real database file.

Every flip must either read back exactly what was stored, or raise a dshpy
:class:`~dshpy.StoreError` subclass: never a raw ``sqlite3`` error, never altered events,
never a session with fewer events (or a store with fewer sessions) without an error.
"""

from __future__ import annotations

import random
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest

import dshpy
from dshpy.core.events import encode_event
from dshpy.core.json import thaw
from dshpy.log.fork import plan_fork
from dshpy.storage.projection_cache import session_identity
from dshpy.storage.sqlite import APPLICATION_ID, SCHEMA_MIGRATIONS, SqliteStore
from dshpy.testing.builders import TurnScript

FLIPS = 400
SEED = 11


def _build(path: Path) -> None:
    store = SqliteStore(path)
    sessions = []
    for turns in (1, 3, 2):
        session = store.create(cwd="/w")
        for _ in range(turns):
            TurnScript(session).turn(steps=2, tools_per_step=1)
        session.flush()
        session.close()
        sessions.append(session)
    child = store.fork(sessions[1].id, boundary=len(sessions[1].events) - 1)
    TurnScript(child).turn(steps=1)
    child.flush()
    child.close()
    store.close()
    assert not path.with_name(path.name + "-wal").exists()  # everything is in the one file we damage


def _snapshot(store: SqliteStore) -> dict[str, Any]:
    """Everything a reader can see, as comparable values (each read path on its own)."""
    seen: dict[str, Any] = {}
    infos = store.list()
    seen["list"] = sorted((info.id, info.event_count, info.header.to_record()["createdAt"]) for info in infos)
    for info in sorted(infos, key=lambda i: i.id):
        sid = info.id
        seen[f"stat {sid}"] = store.stat(sid).event_count
        seen[f"read {sid}"] = [encode_event(e, seq_ranges=False) for e in store.read(sid)]
        seen[f"inspect {sid}"] = [encode_event(e, seq_ranges=False) for e in store.inspect(sid).events]
        seen[f"header {sid}"] = store.inspect(sid).header.to_record()
        seen[f"projections {sid}"] = thaw(store.projections(sid)["values"])
    listed = store.list_projections()
    seen["list_projections"] = sorted((p.info.id, p.info.event_count, thaw(p.values), p.error) for p in listed)
    return seen


def _outcome(path: Path, expected: dict[str, Any]) -> str:
    """``exact``, the dshpy error class that was raised, ``raw <class>``, or ``silent <what differed>``."""
    try:
        store = SqliteStore(path)
    except dshpy.StoreError as error:
        return type(error).__name__
    except Exception as error:  # the point is to see which escape
        return f"raw {type(error).__name__}"
    try:
        try:
            seen = _snapshot(store)
        except dshpy.StoreError as error:
            return type(error).__name__
        except Exception as error:
            return f"raw {type(error).__name__}: {error}"
        for key, value in expected.items():
            if seen.get(key) != value:
                return f"silent {key.split()[0]}"
        if set(seen) != set(expected):
            return "silent extra"
        return "exact"
    finally:
        store.close()


def test_every_single_byte_flip_reads_back_exactly_or_raises_a_store_error(tmp_path):
    original = tmp_path / "original.db"
    _build(original)
    with SqliteStore(original) as store:
        expected = _snapshot(store)
    data = original.read_bytes()
    rng = random.Random(SEED)
    # every page gets flips (the sweep covers the whole small file), then random positions
    positions = [rng.randrange(page, min(page + 4096, len(data))) for page in range(0, len(data), 4096)]
    positions += [rng.randrange(len(data)) for _ in range(FLIPS - len(positions))]
    outcomes: Counter[str] = Counter()
    failures: list[str] = []
    damaged = tmp_path / "damaged.db"
    for position in positions:
        flipped = bytearray(data)
        flipped[position] ^= rng.randrange(1, 256)
        for suffix in ("-wal", "-shm"):
            damaged.with_name(damaged.name + suffix).unlink(missing_ok=True)
        damaged.write_bytes(flipped)
        outcome = _outcome(damaged, expected)
        outcomes[outcome.split(":")[0]] += 1
        if outcome.startswith(("raw", "silent")):
            failures.append(f"byte {position} (page {position // 4096}): {outcome}")
    print(f"\n{len(positions)} flips over {len(data)} bytes: {dict(outcomes.most_common())}")
    assert not failures, "\n".join(failures[:40])


def test_lost_rows_are_an_error_not_a_shorter_session(tmp_path):
    path = tmp_path / "s.db"
    store = SqliteStore(path)
    session = store.create(cwd="/w")
    TurnScript(session).turn(steps=2)
    session.flush()
    count = len(session.events)
    session.close()
    store._db.execute("DELETE FROM events WHERE session_id = ? AND seq >= ?", (session.id, count - 2))
    with pytest.raises(dshpy.CorruptSessionError):
        list(store.read(session.id))
    with pytest.raises(dshpy.CorruptSessionError):
        store.stat(session.id)
    with pytest.raises(dshpy.CorruptSessionError):
        store.inspect(session.id)
    store.close()


def test_an_altered_event_row_is_detected(tmp_path):
    path = tmp_path / "s.db"
    store = SqliteStore(path)
    session = store.create(cwd="/w")
    TurnScript(session).turn(steps=1)
    session.flush()
    session.close()
    seq, body = store._db.execute(
        "SELECT seq, body FROM events WHERE session_id = ? AND type = 'user/message'", (session.id,)
    ).fetchone()
    altered = bytes(body).replace(b'"text":"', b'"text":"X', 1)  # still valid JSON, still a valid event
    assert altered != bytes(body)
    store._db.execute("UPDATE events SET body = ? WHERE session_id = ? AND seq = ?", (altered, session.id, seq))
    with pytest.raises(dshpy.CorruptSessionError, match=f"event {seq} is damaged"):
        list(store.read(session.id))
    with pytest.raises(dshpy.CorruptSessionError, match=f"event {seq} is damaged"):
        list(store.read_types(session.id, ["user/message"]))
    store.close()


def test_an_altered_header_is_detected(tmp_path):
    path = tmp_path / "s.db"
    store = SqliteStore(path)
    session = store.create(cwd="/w")
    session.close()
    store._db.execute("UPDATE sessions SET header = replace(header, '/w', '/x') WHERE id = ?", (session.id,))
    with pytest.raises(dshpy.CorruptSessionError, match="header"):
        store.inspect(session.id)
    with pytest.raises(dshpy.CorruptSessionError, match="header"):
        store.list()
    store.close()


def _old_store(path: Path) -> tuple[dshpy.Session, dshpy.Session]:
    """A schema v2 database written as dshpy wrote it before row checksums: a session, a zero-copy fork, cache rows."""
    raw = sqlite3.connect(path, isolation_level=None)
    raw.execute("PRAGMA journal_mode = WAL")
    raw.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    for migration in SCHEMA_MIGRATIONS[:2]:
        for statement in migration:
            raw.execute(statement)
    raw.execute("PRAGMA user_version = 2")
    parent = dshpy.Session.new(cwd="/w")
    for _ in range(2):
        TurnScript(parent).turn(steps=2)
    plan = plan_fork(parent.events)
    child = dshpy.Session(
        dshpy.SessionHeader.new("child-1", cwd="/w", parent_session=parent.id, is_seeded=True),
        [*parent.events, *plan.own],
    )
    TurnScript(child).turn(steps=1)
    for session, base_id, base_count, own in (
        (parent, None, 0, parent.events),
        (child, parent.id, len(parent.events), child.events[len(parent.events) :]),
    ):
        header = session.header
        raw.execute(
            "INSERT INTO sessions VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                header.id,
                orjson.dumps(header.to_record()).decode(),
                header.created_at,
                header.cwd,
                header.parent_session,
                base_id,
                base_count,
            ),
        )
        raw.executemany(
            "INSERT INTO events VALUES (?, ?, ?, ?, ?)",
            [(header.id, e.seq, e.type, e.time, encode_event(e, seq_ranges=False)) for e in own],
        )
    raw.execute(
        "INSERT INTO projection_cache VALUES (?, 'stats', 1, 3, '{\"turns\": 1}', ?)",
        (parent.id, session_identity(parent.header)),
    )
    raw.close()
    return parent, child


def test_a_store_written_before_checksums_is_upgraded_and_then_checked(tmp_path):
    path = tmp_path / "old.db"
    parent, child = _old_store(path)
    store = SqliteStore(path)
    assert store.schema_version == len(SCHEMA_MIGRATIONS) == 6
    for session in (parent, child):  # nothing stored was lost or changed
        assert [encode_event(e, seq_ranges=False) for e in store.read(session.id)] == [
            encode_event(e, seq_ranges=False) for e in session.events
        ]
        assert store.stat(session.id).event_count == len(session.events)
    assert [row.key for row in store._load_projection_rows(parent.id)] == ["stats"]  # the cache row kept its value
    store._db.execute(
        "UPDATE events SET body = CAST(replace(CAST(body AS TEXT), '\"turn\":1', '\"turn\":7') AS BLOB) "
        "WHERE session_id = ? AND seq = 1",
        (parent.id,),
    )
    with pytest.raises(dshpy.CorruptSessionError, match="event 1 is damaged"):
        store.inspect(child.id)  # the fork reads its prefix through the parent's checked rows
    store.close()


def test_a_damaged_cache_row_is_folded_again_not_an_error(tmp_path):
    store = SqliteStore(tmp_path / "s.db")
    session = store.create(cwd="/w")
    for _ in range(2):
        TurnScript(session).turn(steps=1)
    session.flush()
    session.close()
    fresh = thaw(store.projections(session.id)["values"])
    # one cache row's text is no longer UTF-8, another's digits changed: both are rows to drop, not errors
    store._db.execute("UPDATE projection_cache SET state = CAST(X'7B22FF' AS TEXT) WHERE key = 'title'")
    store._db.execute(
        "UPDATE projection_cache SET state = replace(state, '\"turns\":2', '\"turns\":3') WHERE key = 'stats'"
    )
    [listed] = store.list_projections()
    assert listed.error is None
    assert thaw(listed.values) == fresh
    assert thaw(store.projections(session.id)["values"]) == fresh
    store.close()


def test_a_session_row_lost_from_the_table_fails_the_listing(tmp_path):
    path = tmp_path / "s.db"
    store = SqliteStore(path)
    for _ in range(3):
        store.create(cwd="/w").close()
    (root,) = store._db.execute("SELECT rootpage FROM sqlite_schema WHERE name = 'sessions'").fetchone()
    page_size = store._db.execute("PRAGMA page_size").fetchone()[0]
    store.close()
    data = bytearray(path.read_bytes())
    header = (root - 1) * page_size + (100 if root == 1 else 0)
    assert data[header] == 0x0D  # a table leaf page: the three rows are on it
    cells = int.from_bytes(data[header + 3 : header + 5], "big")
    assert cells == 3
    data[header + 3 : header + 5] = (cells - 1).to_bytes(2, "big")  # the page now "holds" two rows
    path.write_bytes(bytes(data))
    store = SqliteStore(path)
    with pytest.raises(dshpy.CorruptSessionError, match="lists 2 sessions but its index holds 3"):
        store.list()
    with pytest.raises(dshpy.CorruptSessionError, match="lists 2 sessions"):
        store.list_projections()
    store.close()


def test_a_type_column_that_disagrees_with_its_event_is_detected(tmp_path):
    store = SqliteStore(tmp_path / "s.db")
    session = store.create(cwd="/w")
    TurnScript(session).turn(steps=1)
    session.flush()
    session.close()
    start = next(e.seq for e in store.read(session.id) if e.type == "turn/start")
    store._db.execute("UPDATE events SET type = 'turn/end' WHERE session_id = ? AND seq = ?", (session.id, start))
    with pytest.raises(dshpy.CorruptSessionError, match=f"row {start} does not hold its indexed event"):
        list(store.read_types(session.id, ["turn/start", "turn/end"]))
    store.close()


def test_a_type_column_damaged_into_an_unknown_type_cannot_hide_its_event(tmp_path):
    """One flipped byte turns ``turn/start`` into ``turn/stars``: a filtered read must not just skip the row."""
    store = SqliteStore(tmp_path / "s.db")
    session = store.create(cwd="/w")
    TurnScript(session).turn(steps=1)
    session.flush()
    session.close()
    start = next(e.seq for e in store.read(session.id) if e.type == "turn/start")
    store._db.execute("UPDATE events SET type = 'turn/stars' WHERE session_id = ? AND seq = ?", (session.id, start))
    with pytest.raises(dshpy.CorruptSessionError, match=f"row {start} does not hold its indexed event"):
        list(store.read_types(session.id, ["turn/start"]))
    store.close()
