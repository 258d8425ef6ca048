"""The SQL of a listing page (:class:`~dshpy.storage.listing_page.PageRequest`) for SQLite and PostgreSQL.

A page is chosen over the ``sessions`` table's own columns (``id``, ``cwd``,
``created_at``, ``parent_session``: the header's values, written with it in one
checksummed row), so the statement parses no header and reads no event except, when
sorting by last activity, the last one of each session (one primary-key seek). Only
the ids of the page leave the choice; the caller builds their infos as a listing does.
The order is :meth:`PageRequest.cut`'s: the key, then the id ascending in both
directions (byte order: what Python's ``str`` order is for the UTF-8 the columns hold).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dshpy.storage.listing_page import PageRequest

__all__ = ["POSTGRES", "SQLITE", "Dialect", "page_ids_sql"]


@dataclass(frozen=True, slots=True)
class Dialect:
    """How one database spells the few things that differ."""

    mark: str
    """A parameter placeholder."""
    greatest: str
    """The two-argument maximum function."""
    collate: str
    """Appended to ``id`` where it is compared or ordered (PostgreSQL: byte order, not the locale's)."""
    any_of: bool
    """``col = ANY(array)`` with one list parameter, instead of ``col IN (?, ?, …)``."""


SQLITE = Dialect(mark="?", greatest="max", collate="", any_of=False)
POSTGRES = Dialect(mark="%s", greatest="GREATEST", collate=' COLLATE "C"', any_of=True)


def _one_of(dialect: Dialect, column: str, values: tuple[Any, ...], params: list[Any]) -> str:
    """``column`` equals one of ``values`` (``None`` among them: or is NULL); nothing matches an empty tuple."""
    present = [value for value in values if value is not None]
    parts = []
    if present:
        if dialect.any_of:
            parts.append(f"{column} = ANY({dialect.mark})")
            params.append(present)
        else:
            parts.append(f"{column} IN ({', '.join(dialect.mark for _ in present)})")
            params.extend(present)
    if len(present) < len(values):
        parts.append(f"{column} IS NULL")
    return "(" + " OR ".join(parts) + ")" if parts else "(1 = 0)"


def page_ids_sql(request: PageRequest, dialect: Dialect, sessions: str, events: str) -> tuple[str, list[Any]]:
    """A statement selecting ``(id, sort key)`` of the page's sessions in page order, and its parameters.

    ``sessions`` and ``events`` are the (quoted, schema-qualified) table names.
    """
    mark = dialect.mark
    sid = f"s.id{dialect.collate}"
    if request.sort == "created":
        key = "s.created_at"
    else:  # as SessionInfo.updated_at: the last own event's time, never before the creation
        last = f"(SELECT e.time FROM {events} e WHERE e.session_id = s.id ORDER BY e.seq DESC LIMIT 1)"
        key = f"{dialect.greatest}(s.created_at, COALESCE({last}, s.created_at))"
    where: list[str] = []
    params: list[Any] = []
    if request.ids is not None:
        where.append(_one_of(dialect, "s.id", request.ids, params))
    if request.exclude_ids is not None and request.exclude_ids:
        where.append("NOT " + _one_of(dialect, "s.id", request.exclude_ids, params))
    if request.cwd is not None:
        where.append(_one_of(dialect, "s.cwd", request.cwd, params))
    if request.created_from is not None:
        where.append(f"s.created_at >= {mark}")
        params.append(request.created_from)
    if request.created_to is not None:
        where.append(f"s.created_at <= {mark}")
        params.append(request.created_to)
    if request.parent is not None:
        where.append(_one_of(dialect, "s.parent_session", request.parent, params))
    if request.after is not None:
        beyond = "<" if request.descending else ">"
        where.append(f"({key} {beyond} {mark} OR ({key} = {mark} AND {sid} > {mark}))")
        params.extend((request.after[0], request.after[0], request.after[1]))
    direction = "DESC" if request.descending else "ASC"
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    statement = (
        f"SELECT s.id, {key} AS page_key FROM {sessions} s{clause} "
        f"ORDER BY page_key {direction}, {sid} ASC LIMIT {mark}"
    )
    params.append(request.limit)
    return statement, params
