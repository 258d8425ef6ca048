"""Listing sessions: summaries from the projection cache, filtered, sorted, paged by keyset cursors.

A filter on projections (state, title, model, turns) reads every session's cached
rows in one ``list_projections`` call (on SQLite and PostgreSQL one statement), so
it folds no log whose cache is current. Any other listing but a lineage one is a page
the store cuts itself (:meth:`~dshpy.SessionStore.list_page`: on SQLite and PostgreSQL
one statement that builds only the page's sessions, elsewhere a cut of the plain
listing), and only the sessions of the page read their projections. Pages are cut by *keyset*: a cursor
holds the sort value and id of the last session it returned, and the next page starts
after it, so sessions created meanwhile (newer than any page's start, when sorted by
creation) never shift or repeat what the following pages return.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any, Literal

from dshpy.core.json import JsonValue
from dshpy.errors import CorruptSessionError, FormatVersionError, SessionNotFound
from dshpy.query.cursors import decode_cursor, encode_cursor, fingerprint
from dshpy.query.errors import INVALID_CURSOR, INVALID_SORT, InvalidQueryError
from dshpy.query.filters import SessionFilter
from dshpy.query.lineage import descendant_ids
from dshpy.query.results import SessionPage, SessionSummary
from dshpy.storage.contract import SessionStore
from dshpy.storage.projection_cache import SessionProjections
from dshpy.storage.records import SessionInfo

__all__ = [
    "SORTS",
    "SUMMARY_PROJECTIONS",
    "Sort",
    "filtered_summaries",
    "info_page",
    "page_of",
    "summary_of",
    "with_projections",
]

SUMMARY_PROJECTIONS = ("title", "lifecycle", "stats", "usage")
"""The projections a summary reads."""

Sort = Literal["created", "updated"]
SORTS: tuple[str, ...] = ("created", "updated")


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _field(values: dict[str, JsonValue], key: str, name: str) -> Any:
    state = values.get(key)
    return state.get(name) if isinstance(state, dict) else None


def _models(usage: Any) -> tuple[str, ...]:
    models: dict[str, None] = {}
    if isinstance(usage, dict):
        for entry in usage.get("byModel") or ():
            if isinstance(entry, dict) and isinstance(entry.get("model"), str):
                models.setdefault(entry["model"], None)
        route = usage.get("route")
        if isinstance(route, dict) and isinstance(route.get("model"), str):
            models.setdefault(route["model"], None)
    return tuple(models)


def summary_of(listed: SessionProjections) -> SessionSummary:
    """A summary from one session of ``list_projections`` (its values, or why they could not be read)."""
    if listed.error is not None:
        return SessionSummary(listed.info, error=listed.error)
    values = listed.values
    turns = _field(values, "stats", "turns")
    return SessionSummary(
        listed.info,
        title=_text(_field(values, "title", "title")),
        state=_text(_field(values, "lifecycle", "state")),
        turns=turns if isinstance(turns, int) else None,
        models=_models(values.get("usage")),
    )


def with_projections(store: SessionStore, summary: SessionSummary) -> SessionSummary:
    """``summary`` with its projection values read (a session's own cache rows, plus its stored tail)."""
    try:
        snapshot = store.projections(summary.id, SUMMARY_PROJECTIONS)
    except (CorruptSessionError, FormatVersionError, SessionNotFound) as error:
        return SessionSummary(summary.info, error=" ".join(str(error).split()))
    return summary_of(SessionProjections(summary.info, snapshot["as_of_seq"], dict(snapshot["values"])))


def filtered_summaries(
    store: SessionStore, filters: SessionFilter, *, projections: bool = True
) -> list[SessionSummary]:
    """Every session ``filters`` lets through, in the store's listing order.

    Without ``projections`` (a search's scope), filters on the headers alone (ids,
    cwd, times, parents, lineage) are answered from the plain listing and the
    summaries carry no projection values; the other filters read them anyway.
    """
    summaries = None
    if not projections and not filters.needs_projections:
        # a damaged session fails the plain listing; the projections' listing names it instead
        with contextlib.suppress(CorruptSessionError, FormatVersionError):
            summaries = [SessionSummary(info) for info in store.list()]
    if summaries is None:
        summaries = [summary_of(listed) for listed in store.list_projections(SUMMARY_PROJECTIONS)]
    lineage = None
    if filters.lineage is not None:
        lineage = descendant_ids([s.info for s in summaries], filters.lineage)
    return [s for s in summaries if filters.matches(s, lineage)]


def _key(summary: SessionSummary, sort: str) -> int:
    return summary.info.created_at if sort == "created" else summary.info.updated_at


def _request(filters: SessionFilter, sort: Any, descending: bool) -> str:
    """The fingerprint a listing's cursors are bound to (after checking ``sort``)."""
    if sort not in SORTS:
        raise InvalidQueryError(INVALID_SORT, f"sort must be one of {', '.join(SORTS)}, not {sort!r}")
    return fingerprint({"filters": filters.to_json(), "sort": sort, "descending": descending})


def page_of(
    summaries: Sequence[SessionSummary],
    filters: SessionFilter,
    *,
    sort: Any,
    descending: bool,
    limit: int,
    cursor: Any,
) -> SessionPage:
    """One page of ``summaries`` in ``sort`` order (ties by id, ascending), after ``cursor`` if given."""
    request = _request(filters, sort, descending)
    ordered = sorted(summaries, key=lambda s: (-_key(s, sort) if descending else _key(s, sort), s.id))
    if cursor is not None:
        after = _after(decode_cursor(cursor, "list", request))
        ordered = [s for s in ordered if _past(s, sort, descending, after)]
    page = ordered[:limit]
    more = len(ordered) > limit
    next_cursor = encode_cursor("list", request, [_key(page[-1], sort), page[-1].id]) if more else None
    return SessionPage(page, next_cursor)


def info_page(
    store: SessionStore, filters: SessionFilter, *, sort: Any, descending: bool, limit: int, cursor: Any
) -> tuple[list[SessionInfo], str | None] | None:
    """The infos of one page as :func:`page_of` cuts it (cursors included), cut by the store itself.

    ``None`` when the store cannot cut this page alone: a filter on projections or on
    lineage, or a damaged session on the page (the full listing then names it, as before).
    """
    if filters.needs_projections or filters.lineage is not None:
        return None
    request = _request(filters, sort, descending)
    after = None if cursor is None else _after(decode_cursor(cursor, "list", request))
    wanted = filters.page_request(sort=sort, descending=descending, after=after, limit=limit + 1)
    try:
        infos = store.list_page(wanted)
    except (CorruptSessionError, FormatVersionError):
        return None
    page = infos[:limit]
    more = len(infos) > limit
    next_cursor = encode_cursor("list", request, [wanted.key(page[-1]), page[-1].id]) if more else None
    return page, next_cursor


def _after(position: Any) -> tuple[int, str]:
    if (
        not isinstance(position, list)
        or len(position) != 2
        or not isinstance(position[0], int)
        or not isinstance(position[1], str)
    ):
        raise InvalidQueryError(INVALID_CURSOR, "the cursor is damaged (its position is not a session's)")
    return position[0], position[1]


def _past(summary: SessionSummary, sort: str, descending: bool, after: tuple[int, str]) -> bool:
    """Whether ``summary`` comes after the cursor's last session in this order."""
    key = _key(summary, sort)
    if key == after[0]:
        return summary.id > after[1]
    return key < after[0] if descending else key > after[0]
