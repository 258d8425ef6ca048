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

import psycopg

from dshpy.storage.checksum import cache_row_crc, event_row_crc, session_row_crc
from dshpy.storage.projection_cache import ProjectionRow, group_projection_rows

__all__ = [
    "BACKFILL_BATCH",
    "backfill_checksums",
    "verified_cache_rows",
]

BACKFILL_BATCH = 2000
"""Rows read, checksummed and updated per round trip while a migration fills in the checksums."""


def verified_cache_rows(raw: Iterable[Sequence[Any]]) -> dict[str, dict[str, ProjectionRow]]:
    """``(session_id, key, state_version, seq, state, identity, crc)`` rows, by session and key.

    A row whose checksum or state does not hold up is left out: a cache row is a
    shortcut, so a damaged one is folded again from the log, never an error.
    """
    return group_projection_rows(
        row[:6]
        for row in raw
        if cache_row_crc(row[0].encode(), row[1].encode(), row[2], row[3], row[4].encode(), row[5].encode()) == row[6]
    )


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
