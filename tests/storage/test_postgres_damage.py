"""PostgreSQL damage detection: rows altered behind dshpy's back are errors naming the session and seq, never served.

A bad manual ``UPDATE``, a buggy tool or a partially restored backup changes a row's
value into another perfectly valid one, which PostgreSQL has no reason to refuse. Each
row carries a CRC-32 of what it stores and each session row its next seq, so every
read path either returns exactly what was written or raises a dshpy
:class:`~dshpy.StoreError`; a damaged projection-cache row is only folded again.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import psycopg
import pytest
from psycopg import sql

import dshpy
from dshpy.core.events import encode_event
from dshpy.core.json import dumps, thaw
from dshpy.log.fork import plan_fork
from dshpy.storage import postgres_checksums
from dshpy.storage.postgres import PostgresStore
from dshpy.storage.postgres_connect import quote_identifier
from dshpy.storage.postgres_schema import BOOTSTRAP, MIGRATIONS
from dshpy.storage.projection_cache import session_identity
from dshpy.testing.builders import TurnScript

FLIPS = 300
SEED = 11


def _schema(url: str) -> str:
    return url.rsplit("schema=", 1)[1]


def _raw(dsn: str) -> psycopg.Connection[Any]:
    return psycopg.connect(dsn, autocommit=True)


def _execute(dsn: str, url: str, query: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Run ``query`` with ``{s}`` standing for the test's schema, outside dshpy (as a manual fix-up would)."""
    with _raw(dsn) as conn:
        cursor = conn.execute(sql.SQL(query).format(s=sql.Identifier(_schema(url))), params)
        return cursor.fetchall() if cursor.description else []


def _session(store: dshpy.SessionStore, turns: int = 1) -> dshpy.Session:
    session = store.create(cwd="/w")
    for _ in range(turns):
        TurnScript(session).turn(steps=2, tools_per_step=1)
    session.flush()
    session.close()
    return session


def _wire(events: Any) -> list[bytes]:
    return [encode_event(e, seq_ranges=False) for e in events]


def test_an_altered_event_body_is_detected_on_every_read_path(postgres_url, postgres_dsn):
    store = dshpy.open_store(postgres_url)
    session = _session(store)
    [(seq,)] = _execute(
        postgres_dsn,
        postgres_url,
        "SELECT seq FROM {s}.events WHERE session_id = %s AND type = 'user/message'",
        (session.id,),
    )
    # one byte of the stored text changed: still valid JSON, still a valid event
    _execute(
        postgres_dsn,
        postgres_url,
        'UPDATE {s}.events SET body = replace(body, \'"text":"hello\', \'"text":"hellp\') '
        "WHERE session_id = %s AND seq = %s",
        (session.id, seq),
    )
    damaged = f'session "{session.id}" event {seq} is damaged'
    with pytest.raises(dshpy.CorruptSessionError, match=damaged):
        list(store.read(session.id))
    with pytest.raises(dshpy.CorruptSessionError, match=damaged):
        list(store.read_types(session.id, ["user/message"]))
    # open() and inspect() resume from the point close() wrote and read only the tail: the damage shows when
    # the damaged event is read, and at once when there is no resume point
    with pytest.raises(dshpy.CorruptSessionError, match=damaged):
        list(store.inspect(session.id).events)
    with store.open(session.id) as opened, pytest.raises(dshpy.CorruptSessionError, match=damaged):
        list(opened.events)
    with store.fork(session.id) as child, pytest.raises(dshpy.CorruptSessionError, match=damaged):
        list(child.events)  # the child starts from the parent's resume point: it too reads the prefix on demand
    _execute(postgres_dsn, postgres_url, "DELETE FROM {s}.projection_cache WHERE session_id = %s", (session.id,))
    with pytest.raises(dshpy.CorruptSessionError, match=damaged):
        store.inspect(session.id)
    with pytest.raises(dshpy.CorruptSessionError, match=damaged):
        store.open(session.id)
    store.close()


def test_an_altered_header_is_detected(postgres_url, postgres_dsn):
    store = dshpy.open_store(postgres_url)
    session = _session(store)
    _execute(
        postgres_dsn,
        postgres_url,
        "UPDATE {s}.sessions SET header = replace(header, '/w', '/x') WHERE id = %s",
        (session.id,),
    )
    damaged = f'stored header of session "{session.id}" is damaged'
    for action in (
        lambda: store.inspect(session.id),
        lambda: store.open(session.id),
        lambda: list(store.read(session.id)),
        lambda: store.stat(session.id),
        store.list,
    ):
        with pytest.raises(dshpy.CorruptSessionError, match=damaged):
            action()
    store.close()


def test_a_damaged_cache_row_is_folded_again_not_an_error(postgres_url, postgres_dsn):
    store = dshpy.open_store(postgres_url)
    session = _session(store, turns=2)
    fresh = thaw(store.projections(session.id)["values"])
    assert _execute(postgres_dsn, postgres_url, "SELECT count(*) FROM {s}.projection_cache")[0][0] > 0
    # still valid JSON of a valid state, just not what folding the log gives
    _execute(
        postgres_dsn,
        postgres_url,
        "UPDATE {s}.projection_cache SET state = replace(state, '\"turns\":2', '\"turns\":3')",
    )
    [listed] = store.list_projections()
    assert listed.error is None
    assert thaw(listed.values) == fresh
    _execute(
        postgres_dsn,
        postgres_url,
        "UPDATE {s}.projection_cache SET state = replace(state, '\"turns\":2', '\"turns\":4')",
    )
    assert thaw(store.projections(session.id)["values"]) == fresh
    store.close()


def test_a_deleted_last_event_row_is_an_error_not_a_shorter_session(postgres_url, postgres_dsn):
    store = dshpy.open_store(postgres_url)
    session = _session(store)
    count = len(session.events)
    _execute(
        postgres_dsn, postgres_url, "DELETE FROM {s}.events WHERE session_id = %s AND seq = %s", (session.id, count - 1)
    )
    lost = f'session "{session.id}" is damaged: its log holds events up to seq {count - 2} but recorded {count}'
    for action in (
        lambda: list(store.read(session.id)),
        lambda: store.inspect(session.id),
        lambda: store.open(session.id),
        lambda: store.stat(session.id),
        lambda: store.projections(session.id),
        store.list,
    ):
        with pytest.raises(dshpy.CorruptSessionError, match=lost):
            action()
    [listed] = store.list_projections()
    assert listed.error is not None and "damaged" in listed.error
    store.close()


def test_a_live_writer_whose_last_rows_were_deleted_gets_a_corruption_error(postgres_url, postgres_dsn):
    store = dshpy.open_store(postgres_url)
    session = store.create(cwd="/w")
    TurnScript(session).turn(steps=2)
    session.flush()
    count = len(session.events)
    _execute(
        postgres_dsn, postgres_url, "DELETE FROM {s}.events WHERE session_id = %s AND seq = %s", (session.id, count - 1)
    )
    TurnScript(session).turn("after the loss")
    with pytest.raises(dshpy.CorruptSessionError, match=f'session "{session.id}" is damaged'):
        session.flush()
    assert _execute(
        postgres_dsn, postgres_url, "SELECT max(seq) FROM {s}.events WHERE session_id = %s", (session.id,)
    ) == [(count - 2,)]  # nothing was written over the gap
    with pytest.raises(dshpy.CorruptSessionError):
        session.close()  # its last flush is refused the same way; the writer is released all the same
    store.close()


def test_a_type_column_that_disagrees_with_its_event_is_detected(postgres_url, postgres_dsn):
    store = dshpy.open_store(postgres_url)
    session = _session(store)
    start = next(e.seq for e in store.read(session.id) if e.type == "turn/start")
    _execute(
        postgres_dsn,
        postgres_url,
        "UPDATE {s}.events SET type = 'turn/end' WHERE session_id = %s AND seq = %s",
        (session.id, start),
    )
    with pytest.raises(dshpy.CorruptSessionError, match=f"row {start} does not hold its indexed event"):
        list(store.read_types(session.id, ["turn/start", "turn/end"]))
    store.close()


def test_a_detached_fork_keeps_valid_checksums(postgres_url):
    store = dshpy.open_store(postgres_url)
    parent = _session(store, turns=2)
    child = store.fork(parent.id)
    TurnScript(child).turn("the child's own")
    child.flush()
    child.close()
    store.delete(parent.id, detach_forks=True)
    assert _wire(store.read(child.id)) == _wire(child.events)
    assert store.stat(child.id).event_count == len(child.events)
    reopened = store.open(child.id)
    TurnScript(reopened).turn("after detaching")
    reopened.flush()
    reopened.close()
    assert _wire(store.read(child.id)) == _wire(reopened.events)
    store.close()


# -- a schema written before row checksums ----------------------------------------------------


def _old_schema(dsn: str, url: str) -> tuple[dshpy.Session, dshpy.Session]:
    """Schema v2 as dshpy wrote it before row checksums: a session, a zero-copy fork and a cache row, stored
    through v2's own ``append_events`` function."""
    schema = sql.Identifier(_schema(url))
    quoted = quote_identifier(_schema(url))  # as the migrations name it
    parent = dshpy.Session.new(cwd="/w")
    for _ in range(2):
        TurnScript(parent).turn(steps=2)
    plan = plan_fork(parent.events)
    child = dshpy.Session(
        dshpy.SessionHeader.new("child-1", cwd="/w", parent_session=parent.id, is_seeded=True),
        [*parent.events, *plan.own],
    )
    TurnScript(child).turn(steps=1)
    with _raw(dsn) as conn, conn.transaction():
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(schema))
        for statement in (BOOTSTRAP, *(s for m in MIGRATIONS[:2] for s in m.statements)):
            conn.execute(statement.format(schema=quoted))
        for m in MIGRATIONS[:2]:
            conn.execute(
                sql.SQL("INSERT INTO {}.schema_version (version, description) VALUES (%s, %s)").format(schema),
                (m.version, m.description),
            )
        for session, base_id, base_count, own in (
            (parent, None, 0, parent.events),
            (child, parent.id, len(parent.events), child.events[len(parent.events) :]),
        ):
            header = session.header
            conn.execute(
                sql.SQL("INSERT INTO {}.sessions VALUES (%s, %s, %s, %s, %s, %s, %s)").format(schema),
                (
                    header.id,
                    dumps(header.to_record()).decode(),
                    header.created_at,
                    header.cwd,
                    header.parent_session,
                    base_id,
                    base_count,
                ),
            )
            conn.execute(
                sql.SQL("SELECT {}.append_events(%s, %s, %s, %s, %s, %s, 'old')").format(schema),
                (
                    header.id,
                    base_count,
                    [e.seq for e in own],
                    [e.type for e in own],
                    [e.time for e in own],
                    [encode_event(e, seq_ranges=False).decode() for e in own],
                ),
            )
        conn.execute(
            sql.SQL("INSERT INTO {}.projection_cache VALUES (%s, 'stats', 1, 3, '{{\"turns\": 1}}', %s)").format(
                schema
            ),
            (parent.id, session_identity(parent.header)),
        )
    return parent, child


def test_a_schema_written_before_checksums_is_upgraded_and_then_checked(postgres_url, postgres_dsn, monkeypatch):
    parent, child = _old_schema(postgres_dsn, postgres_url)
    monkeypatch.setattr(postgres_checksums, "BACKFILL_BATCH", 2)  # every table takes several batches
    store = PostgresStore(postgres_url)
    assert store.applied_migrations == tuple(m.version for m in MIGRATIONS[2:])
    assert store.schema_version == len(MIGRATIONS)
    for session in (parent, child):  # nothing stored was lost or changed
        assert _wire(store.read(session.id)) == _wire(session.events)
        assert store.stat(session.id).event_count == len(session.events)
        assert _wire(store.inspect(session.id).events) == _wire(session.events)
    assert [row.key for row in store._load_projection_rows(parent.id)] == ["stats"]  # the cache row kept its value
    live = store.open(child.id)  # the upgraded append function writes on top
    TurnScript(live).turn("after the upgrade")
    live.flush()
    live.close()
    assert _wire(store.read(child.id)) == _wire(live.events)
    _execute(
        postgres_dsn,
        postgres_url,
        "UPDATE {s}.events SET body = replace(body, '\"turn\":1', '\"turn\":7') WHERE session_id = %s AND seq = 1",
        (parent.id,),
    )
    with pytest.raises(dshpy.CorruptSessionError, match=f'session "{parent.id}" event 1 is damaged'):
        list(store.inspect(child.id).events)  # the fork reads its prefix through the parent's checked rows
    _execute(postgres_dsn, postgres_url, "DELETE FROM {s}.events WHERE session_id = %s AND seq = 1", (parent.id,))
    count = len(parent.events)
    _execute(
        postgres_dsn, postgres_url, "DELETE FROM {s}.events WHERE session_id = %s AND seq = %s", (parent.id, count - 1)
    )
    with pytest.raises(dshpy.CorruptSessionError, match=f"recorded {count}"):
        store.stat(parent.id)
    store.close()


# -- a seeded sweep of single-byte flips ------------------------------------------------------------


_TABLES = {
    "sessions": ("id",),
    "events": ("session_id", "seq"),
    "projection_cache": ("session_id", "key"),
}


def _build(store: dshpy.SessionStore) -> None:
    parents = [_session(store, turns) for turns in (1, 3, 2)]
    child = store.fork(parents[1].id, boundary=len(parents[1].events) - 1)
    TurnScript(child).turn(steps=1)
    child.flush()
    child.close()
    store.list_projections()  # every session gets its cache rows


def _snapshot(store: dshpy.SessionStore) -> dict[str, Any]:
    """Everything a reader can see, as comparable values (each read path on its own)."""
    seen: dict[str, Any] = {}
    infos = store.list()
    seen["list"] = sorted((info.id, info.event_count, info.header.to_record()["createdAt"]) for info in infos)
    for info in sorted(infos, key=lambda i: i.id):
        sid = info.id
        seen[f"stat {sid}"] = store.stat(sid).event_count
        seen[f"read {sid}"] = _wire(store.read(sid))
        seen[f"types {sid}"] = _wire(store.read_types(sid, ["turn/start", "turn/end", "user/message"]))
        view = store.inspect(sid)
        seen[f"inspect {sid}"] = _wire(view.events)
        seen[f"header {sid}"] = view.header.to_record()
        seen[f"projections {sid}"] = thaw(store.projections(sid)["values"])
    listed = store.list_projections()
    seen["list_projections"] = sorted((p.info.id, p.info.event_count, thaw(p.values), p.error) for p in listed)
    return seen


def _outcome(store: dshpy.SessionStore, expected: dict[str, Any]) -> str:
    """``exact``, the dshpy error class that was raised, ``raw <class>``, or ``silent <what differed>``."""
    try:
        seen = _snapshot(store)
    except dshpy.StoreError as error:
        return type(error).__name__
    except Exception as error:  # the point is to see which escape
        return f"raw {type(error).__name__}: {error}"
    for key, value in expected.items():
        if seen.get(key) != value:
            return f"silent {key.split()[0]}"
    if set(seen) != set(expected):
        return "silent extra"
    return "exact"


def _cells(conn: psycopg.Connection[Any], schema: str) -> list[tuple[str, str, str, tuple[Any, ...], str]]:
    """Every stored value as text: ``(table, column, its type, primary key, text)``."""
    cells = []
    for table, key in _TABLES.items():
        columns = conn.execute(
            "SELECT column_name, data_type FROM information_schema.columns WHERE table_schema = %s "
            "AND table_name = %s ORDER BY ordinal_position",
            (schema, table),
        ).fetchall()
        selected = sql.SQL(", ").join(sql.SQL("{}::text").format(sql.Identifier(c)) for c in key)
        for column, _kind in columns:
            selected += sql.SQL(", {}::text").format(sql.Identifier(column))
        query = sql.SQL("SELECT {} FROM {}.{}").format(selected, sql.Identifier(schema), sql.Identifier(table))
        for row in conn.execute(query):
            pk = tuple(row[: len(key)])
            for (column, kind), text in zip(columns, row[len(key) :], strict=True):
                if text:
                    cells.append((table, column, kind, pk, text))
    return cells


def _flipped(text: str, rng: random.Random) -> str:
    """``text`` with one character's byte changed (still valid UTF-8 without NUL, as PostgreSQL text must be)."""
    at = rng.randrange(len(text))
    code = ord(text[at])
    new = code ^ (1 << rng.randrange(7)) if code < 0x80 else ord("x")
    if new in (0, code):
        new = ord("y") if code != ord("y") else ord("z")
    return text[:at] + chr(new) + text[at + 1 :]


def test_seeded_single_byte_flips_read_back_exactly_or_raise_a_store_error(postgres_url, postgres_dsn):
    store = PostgresStore(postgres_url, pool_max=2)
    _build(store)
    expected = _snapshot(store)
    name = _schema(postgres_url)
    schema = sql.Identifier(name)
    rng = random.Random(SEED)
    outcomes: Counter[str] = Counter()
    failures: list[str] = []
    with _raw(postgres_dsn) as conn:
        cells = _cells(conn, name)
        cache = sql.SQL("{}.projection_cache").format(schema)
        cached = conn.execute(sql.SQL("SELECT * FROM {}").format(cache)).fetchall()
        put_back = sql.SQL("INSERT INTO {} VALUES ({})").format(
            cache, sql.SQL(", ").join(sql.Placeholder() * len(cached[0]))
        )
        weights = [len(text) + 16 for *_, text in cells]  # by size, as bytes on disk are, but every cell gets some
        for _ in range(FLIPS):
            table, column, kind, pk, text = rng.choices(cells, weights)[0]
            flipped = _flipped(text, rng)
            key = _TABLES[table]
            set_to = sql.SQL("UPDATE {}.{} SET {} = CAST(%s AS {}) WHERE {} RETURNING {}").format(
                schema,
                sql.Identifier(table),
                sql.Identifier(column),
                sql.SQL(kind),
                sql.SQL(" AND ").join(sql.SQL("{}::text = %s").format(sql.Identifier(k)) for k in key),
                sql.SQL(", ").join(sql.SQL("{}::text").format(sql.Identifier(k)) for k in key),
            )
            try:
                [moved] = conn.execute(set_to, (flipped, *pk)).fetchall()
            except psycopg.Error as error:  # the database itself refused the value (type, key, constraint)
                outcomes[f"refused {type(error).__name__}"] += 1
                continue
            outcome = _outcome(store, expected)
            outcomes[outcome.split(":")[0]] += 1
            if outcome.startswith(("raw", "silent")):
                at = next(i for i, (a, b) in enumerate(zip(text, flipped, strict=True)) if a != b)
                shown = f"{text[max(0, at - 20) : at + 20]!r} -> {flipped[max(0, at - 20) : at + 20]!r}"
                failures.append(f"{table}.{column} {pk} char {at}: {shown}: {outcome}")
            if table != "projection_cache":
                conn.execute(set_to, (text, *moved))
            with conn.transaction(), conn.cursor() as cursor:  # readers may have rewritten cache rows
                cursor.execute(sql.SQL("DELETE FROM {}").format(cache))
                cursor.executemany(put_back, cached)
    assert _snapshot(store) == expected  # the sweep put everything back
    store.close()
    print(f"\n{FLIPS} flips over {len(cells)} stored values: {dict(outcomes.most_common())}")
    assert not failures, "\n".join(failures[:40])
    assert sum(n for outcome, n in outcomes.items() if not outcome.startswith("refused")) >= FLIPS // 2
