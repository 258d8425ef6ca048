"""Full-text search as the query service runs it: check the request, find the sessions in scope, page the hits.

The store does the matching and ranking (its index, or a scan: see
:class:`~dshpy.storage.backend.SearchIndex`); this module decides what to ask it:
which sessions (the session filters resolved against the listing, so a search covers
exactly the sessions :meth:`~dshpy.query.SessionQuery.list` would show), which event
types and times, which page, and it makes the snippets. Pages go by offset, and the
cursor holds the index generation it was cut from: appends only add hits, but a
deleted session or a rebuilt index may remove hits the earlier pages counted, and the
cursor is then ``SESSION_QUERY_STALE_CURSOR`` rather than silently skipping some.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from dshpy.core.ids import check_session_id
from dshpy.errors import DshError
from dshpy.query.cursors import decode_cursor, encode_cursor, fingerprint
from dshpy.query.errors import INVALID_CURSOR, INVALID_FILTER, InvalidQueryError, StaleCursorError
from dshpy.query.expressions import parse_query
from dshpy.query.filters import SessionFilter, check_limit, parse_time, parse_types
from dshpy.query.listing import filtered_summaries
from dshpy.query.results import SearchHit, SearchPage
from dshpy.query.snippets import make_snippet
from dshpy.storage.contract import SessionStore
from dshpy.storage.search_records import TextQuery

__all__ = ["SEARCH_DEFAULT_LIMIT", "SEARCH_MAX_LIMIT", "SearchRequest", "cursor_position", "run_search"]

SEARCH_DEFAULT_LIMIT = 20
SEARCH_MAX_LIMIT = 100
"""dsh's page sizes for search."""


class SearchRequest:
    """A checked search request (everything but the page): built before the store is touched."""

    def __init__(
        self,
        query: Any,
        *,
        operators: bool,
        filters: SessionFilter,
        session_id: Any,
        types: Any,
        since: Any,
        until: Any,
        mode: str = "fts",
    ) -> None:
        self.text = query
        self.mode = mode
        self.expr = parse_query(query, operators=operators)
        self.filters = filters
        if session_id is not None:
            try:
                session_id = check_session_id(session_id)
            except DshError:
                raise InvalidQueryError(INVALID_FILTER, f"session_id {session_id!r} is not a session id") from None
        self.session_id: str | None = session_id
        self.types = parse_types(types)
        self.time_from = parse_time("since", since)
        self.time_to = parse_time("until", until)
        shape: dict[str, Any] = {} if mode == "fts" else {"mode": mode}
        self.fingerprint = fingerprint(
            {
                **shape,
                "query": query,
                "operators": operators,
                "filters": filters.to_json(),
                "session": session_id,
                "types": self.types,
                "since": self.time_from,
                "until": self.time_to,
            }
        )

    def scope(self, store: SessionStore) -> dict[str, Any]:
        """Which sessions to search, as :class:`~dshpy.storage.search_records.TextQuery` fields.

        Filters on ids and headers (cwd, parent, creation time) go to the store, which
        applies them in the search itself; a lineage or a filter on projections (state,
        title, model, turns) is resolved against the listing first, into ids.
        """
        filters = self.scoped_filters()
        if filters.lineage is not None or filters.needs_projections:
            return {"sessions": self.session_ids(store, filters)}
        return {
            "sessions": filters.ids,
            "exclude_sessions": filters.exclude_ids or (),
            "cwd": filters.cwd,
            "parents": filters.parent,
            "created_from": filters.created_from,
            "created_to": filters.created_to,
        }

    def scoped_filters(self) -> SessionFilter:
        """The session filters with ``session_id`` folded into their ids."""
        filters = self.filters
        if self.session_id is not None:
            only = self.session_id
            filters = dataclasses.replace(
                filters, ids=(only,) if filters.ids is None else tuple(i for i in filters.ids if i == only)
            )
        return filters

    def session_ids(self, store: SessionStore, filters: SessionFilter | None = None) -> tuple[str, ...]:
        """Every session in scope, by id (what semantic search ranks over)."""
        chosen = self.scoped_filters() if filters is None else filters
        return tuple(s.id for s in filtered_summaries(store, chosen, projections=False))


def cursor_position(cursor: Any, request: str) -> tuple[int, int | None]:
    if cursor is None:
        return 0, None
    position = decode_cursor(cursor, "search", request)
    if (
        not isinstance(position, list)
        or len(position) != 2
        or not all(isinstance(value, int) and not isinstance(value, bool) for value in position)
        or position[0] < 0
    ):
        raise InvalidQueryError(INVALID_CURSOR, "the cursor is damaged (its position is not a page's)")
    return position[0], position[1]


def run_search(store: SessionStore, request: SearchRequest, *, limit: Any, cursor: Any) -> SearchPage:
    """One page of hits for ``request``, best first, each with its snippet."""
    size = check_limit(limit, SEARCH_MAX_LIMIT, default=SEARCH_DEFAULT_LIMIT)
    offset, generation = cursor_position(cursor, request.fingerprint)
    scope = request.scope(store)
    if scope["sessions"] == ():
        return SearchPage([], None)
    found = store.search_text(
        TextQuery(
            request.expr,
            types=request.types,
            time_from=request.time_from,
            time_to=request.time_to,
            limit=size + 1,
            offset=offset,
            **scope,
        )
    )
    if generation is not None and found.generation != generation:
        raise StaleCursorError(
            "the search results changed since this cursor was made (a session was deleted or the index rebuilt): "
            "search again from the first page"
        )
    hits = [
        SearchHit(hit.session_id, hit.seq, hit.type, hit.time, hit.score, make_snippet(hit.text, request.expr))
        for hit in found.hits[:size]
    ]
    more = len(found.hits) > size
    next_cursor = encode_cursor("search", request.fingerprint, [offset + size, found.generation]) if more else None
    return SearchPage(hits, next_cursor)
