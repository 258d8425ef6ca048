"""Row checksums on PostgreSQL: verifying rows as they are read, and computing them for rows stored before.

PostgreSQL refuses malformed values, not wrong ones: a mistaken manual ``UPDATE``, a
buggy tool or a partially restored backup leaves rows that read back as different,
perfectly valid events. So every row carries the CRC-32 of :mod:`dshpy.storage.checksum`
over its stored text (UTF-8, the only server encoding a store accepts), the same
functions and inputs as SQLite's rows, and each session row records its ``next_seq``,
so rows lost from the end of a log are an error rather than a shorter session. The
CRCs are computed by the client, never in SQL: one definition, in Python, for every
backend.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import orjson
import psycopg

from dshpy.core.events import SessionEvent
from dshpy.core.json import loads
from dshpy.errors import CorruptSessionError
from dshpy.storage.base import parse_stored_event
from dshpy.storage.checksum import cache_row_crc, event_row_crc, session_row_crc
from dshpy.storage.projection_cache import ProjectionRow

__all__ = [
    "BACKFILL_BATCH",
    "backfill_checksums",
    "check_session_row",
    "lost_rows",
    "verified_cache_rows",
    "verified_event",
]

BACKFILL_BATCH = 2000
"""Rows read, checksummed and updated per round trip while a migration fills in the checksums."""


def verified_event(session_id: str, seq: int, body: str, crc: int) -> SessionEvent:
    """The event an ``events`` row holds, once its checksum proves the row is as written."""
    if event_row_crc(session_id, seq, body.encode()) != crc:
        raise CorruptSessionError(f'session "{session_id}" event {seq} is damaged (checksum mismatch)')
    return parse_stored_event(session_id, seq, body)


def check_session_row(
    session_id: str,
    header: str,
    created_at: int,
    cwd: str | None,
    parent_session: str | None,
    base_id: str | None,
    base_count: int,
    crc: int,
) -> None:
    """Raise :class:`CorruptSessionError` unless a ``sessions`` row's columns are the ones written."""
    if session_row_crc(session_id, header, created_at, cwd, parent_session, base_id, base_count) != crc:
        raise CorruptSessionError(f'stored header of session "{session_id}" is damaged (checksum mismatch)')


def lost_rows(session_id: str, stored: int, recorded: int) -> str:
    """The message for a log whose rows disagree with the next seq its session row recorded."""
    return (
        f'session "{session_id}" is damaged: its log holds events up to seq {stored - 1} but recorded '
        f"{recorded} events (rows were lost, or the session row is damaged)"
    )


def verified_cache_rows(raw: Iterable[Sequence[Any]]) -> dict[str, dict[str, ProjectionRow]]:
    """``(session_id, key, state_version, seq, state, identity, crc)`` rows, by session and key.

    A row whose checksum or state does not hold up is left out: a cache row is a
    shortcut, so a damaged one is folded again from the log, never an error.
    """
    found: dict[str, dict[str, ProjectionRow]] = {}
    parse = loads
    for session_id, key, version, seq, state, identity, crc in raw:
        if cache_row_crc(session_id.encode(), key.encode(), version, seq, state.encode(), identity.encode()) != crc:
            continue
        try:
            parsed = parse(state)
        except orjson.JSONDecodeError:
            continue
        group = found.get(session_id)
        if group is None:
            group = found[session_id] = {}
        group[key] = ProjectionRow(key, version, seq, parsed, identity)
    return found


def backfill_checksums(conn: psycopg.Connection[Any], schema: str) -> None:
    """Compute every stored row's checksum, and each session's next seq, in batches.

    Runs inside the migration's transaction (under the schema's advisory lock), so a
    store is either wholly checksummed or not migrated at all. Rows are walked in
    primary-key order, ``BACKFILL_BATCH`` at a time, and updated from arrays: one
    round trip per batch whatever the row count. ``schema`` is already quoted.
    """
    _backfill(
        conn,
        f"SELECT s.id, s.header, s.created_at, s.cwd, s.parent_session, s.base_id, s.base_count, "
        f"COALESCE((SELECT max(e.seq) + 1 FROM {schema}.events e WHERE e.session_id = s.id), s.base_count) "
        f"FROM {schema}.sessions s",
        ("s.id",),
        lambda row: [row[0], session_row_crc(*row[:7]), row[7]],
        f"UPDATE {schema}.sessions t SET crc = u.crc, next_seq = u.next_seq "
        "FROM unnest(%s::text[], %s::bigint[], %s::bigint[]) AS u(id, crc, next_seq) WHERE t.id = u.id",
    )
    _backfill(
        conn,
        f"SELECT session_id, seq, body FROM {schema}.events",
        ("session_id", "seq"),
        lambda row: [row[0], row[1], event_row_crc(row[0], row[1], row[2].encode())],
        f"UPDATE {schema}.events t SET crc = u.crc "
        "FROM unnest(%s::text[], %s::bigint[], %s::bigint[]) AS u(session_id, seq, crc) "
        "WHERE t.session_id = u.session_id AND t.seq = u.seq",
    )
    _backfill(
        conn,
        f"SELECT session_id, key, state_version, seq, state, identity FROM {schema}.projection_cache",
        ("session_id", "key"),
        lambda row: [
            row[0],
            row[1],
            cache_row_crc(row[0].encode(), row[1].encode(), row[2], row[3], row[4].encode(), row[5].encode()),
        ],
        f"UPDATE {schema}.projection_cache t SET crc = u.crc "
        "FROM unnest(%s::text[], %s::text[], %s::bigint[]) AS u(session_id, key, crc) "
        "WHERE t.session_id = u.session_id AND t.key = u.key",
    )


def _backfill(
    conn: psycopg.Connection[Any],
    select: str,
    key: tuple[str, ...],
    compute: Callable[[tuple[Any, ...]], list[Any]],
    update: str,
) -> None:
    """Walk ``select``'s rows (it has no ``WHERE`` of its own) in ``key`` order, keyset-paginated on the primary
    key, and send each batch's ``compute``d columns to ``update`` as arrays."""
    order = ", ".join(key)
    after = f" WHERE ({order}) > ({', '.join('%s' for _ in key)})"
    last: tuple[Any, ...] | None = None
    while True:
        if last is None:
            rows = conn.execute(f"{select} ORDER BY {order} LIMIT %s", (BACKFILL_BATCH,)).fetchall()
        else:
            rows = conn.execute(f"{select}{after} ORDER BY {order} LIMIT %s", (*last, BACKFILL_BATCH)).fetchall()
        if not rows:
            return
        columns = list(zip(*(compute(row) for row in rows), strict=True))
        conn.execute(update, [list(column) for column in columns])
        last = tuple(rows[-1][: len(key)])
