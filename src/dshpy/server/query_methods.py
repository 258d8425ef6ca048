"""``session.search`` and the filtered ``session.list``: the query service over JSON-RPC.

Parameters are handed to :class:`~dshpy.query.SessionQuery` nearly as they come, so
the service checks them once, with the same words and ``SESSION_QUERY_*`` codes as the
library and the command line; :func:`query_rpc_error` says which JSON-RPC code each
refusal gets. Filter keys travel in camelCase (``createdFrom``, ``excludeIds``,
``minTurns``), as everything else on the wire does.

Both calls read stored logs and the projection cache, never a live session's state, so
they run in a worker thread and see what every writer has flushed.
"""

from __future__ import annotations

import asyncio
from typing import Any

from dshpy.query import SessionQuery
from dshpy.query.errors import InvalidQueryError, QueryError, QueryNotFoundError, StaleCursorError
from dshpy.storage.contract import SessionStore

from .protocol import DOMAIN_ERROR, INVALID_PARAMS, SESSION_NOT_FOUND, Params, RpcError, invalid

__all__ = ["LIST_PAGE_PARAMS", "is_paged_list", "list_page", "query_rpc_error", "search"]

_WIRE_FILTER_KEYS = {
    "excludeIds": "exclude_ids",
    "createdFrom": "created_from",
    "createdTo": "created_to",
    "minTurns": "min_turns",
}
LIST_PAGE_PARAMS = ("filters", "sort", "descending", "limit", "cursor")
"""Any of these makes ``session.list`` a paged, filtered listing; without them it answers as it always has."""


def query_rpc_error(error: QueryError) -> RpcError:
    """The JSON-RPC error of a refused query; ``data.code`` is the ``SESSION_QUERY_*`` code.

    A malformed request or a stale cursor is the caller's to fix (-32602), an unknown
    session -32001 like every other method's, and a log the query cannot make sense of
    the generic domain error (-32000).
    """
    data = {"code": error.code}
    if isinstance(error, InvalidQueryError | StaleCursorError):
        return RpcError(INVALID_PARAMS, f"invalid params: {error}", data)
    if isinstance(error, QueryNotFoundError):
        return RpcError(SESSION_NOT_FOUND, str(error), data)
    return RpcError(DOMAIN_ERROR, str(error), data)


def _filters(p: Params) -> dict[str, Any] | None:
    value = p.raw.get("filters")
    if value is None:
        return None
    if not isinstance(value, dict):
        raise invalid("filters", "must be an object")
    return {_WIRE_FILTER_KEYS.get(str(key), str(key)): item for key, item in value.items()}


def _sort(p: Params) -> str:
    sort = p.string("sort", required=False)
    return "created" if sort is None else sort


def is_paged_list(p: Params) -> bool:
    """Whether ``session.list`` was asked for a filtered page rather than every session."""
    return any(p.raw.get(name) is not None for name in LIST_PAGE_PARAMS)


async def _answer(call: Any) -> Any:
    try:
        return await asyncio.to_thread(call)
    except QueryError as error:
        raise query_rpc_error(error) from None


async def list_page(store: SessionStore, p: Params) -> Any:
    """``session.list`` with ``filters``/``sort``/``descending``/``limit``/``cursor``: ``{sessions, nextCursor}``."""
    filters = _filters(p)
    sort = _sort(p)
    descending = p.boolean("descending", default=True)
    limit = p.raw.get("limit")
    cursor = p.raw.get("cursor")
    query = SessionQuery(store)
    return await _answer(
        lambda: query.list(filters, sort=sort, descending=descending, limit=limit, cursor=cursor).to_dict()
    )


async def search(store: SessionStore, p: Params, query: SessionQuery | None = None) -> Any:
    """``session.search``: ranked hits with snippets, ``{hits, nextCursor}``.

    ``query`` (required), ``filters``, ``sessionId``, ``types``, ``since``/``until``
    (epoch ms or ISO-8601 with a zone), ``operators``, ``limit`` (1-100), ``cursor``,
    ``mode`` (``fts`` by default, ``semantic`` or ``hybrid``). Pass the server's one
    long-lived ``query``: its embeddings are kept, so a semantic search embeds only
    what was appended since the last one.
    """
    if "query" not in p.raw:
        raise invalid("query", "is required")
    text = p.raw["query"]
    filters = _filters(p)
    session_id = p.session_id(required=False)
    operators = p.boolean("operators")
    raw = p.raw
    mode = raw.get("mode", "fts")
    service = query or SessionQuery(store)
    return await _answer(
        lambda: service.search(
            text,
            filters=filters,
            session_id=session_id,
            types=raw.get("types"),
            since=raw.get("since"),
            until=raw.get("until"),
            operators=operators,
            limit=raw.get("limit"),
            cursor=raw.get("cursor"),
            mode=mode,
        ).to_dict()
    )
