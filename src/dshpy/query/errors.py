"""What a session query refuses, with dsh's ``SESSION_QUERY_*`` codes.

Every error carries ``code`` (dsh's ``SessionQueryError.code`` where dsh has one), so a
JSON-RPC method or an agent tool can answer with a stable code and the message::

    QueryError              SESSION_QUERY_*: the family
    ├── InvalidQueryError   the request is malformed; nothing was read (also a ValueError)
    ├── StaleCursorError    the cursor's result set changed under it (rows deleted, index rebuilt)
    └── QueryNotFoundError  the session or event asked for does not exist (also a LookupError)

Storage errors (a damaged log, an unreachable database) pass through unchanged: they
are :class:`~dshpy.errors.StoreError`\\ s, and the caller handles them as it handles
every store's.
"""

from __future__ import annotations

from typing import Final

from dshpy.errors import DshError

__all__ = [
    "EVENT_NOT_FOUND",
    "INVALID_CURSOR",
    "INVALID_FILTER",
    "INVALID_LIMIT",
    "INVALID_LINEAGE",
    "INVALID_QUERY",
    "INVALID_SORT",
    "INVALID_SURFACE",
    "INVALID_WINDOW",
    "SESSION_NOT_FOUND",
    "STALE_CURSOR",
    "InvalidQueryError",
    "QueryError",
    "QueryNotFoundError",
    "StaleCursorError",
]

INVALID_FILTER: Final = "SESSION_QUERY_INVALID_FILTER"
INVALID_CURSOR: Final = "SESSION_QUERY_INVALID_CURSOR"
STALE_CURSOR: Final = "SESSION_QUERY_STALE_CURSOR"
INVALID_QUERY: Final = "SESSION_QUERY_INVALID_QUERY"
INVALID_LIMIT: Final = "SESSION_QUERY_INVALID_LIMIT"
INVALID_WINDOW: Final = "SESSION_QUERY_INVALID_WINDOW"
INVALID_SORT: Final = "SESSION_QUERY_INVALID_SORT"
"""Ours: dsh has no sort option."""
INVALID_SURFACE: Final = "SESSION_QUERY_INVALID_SURFACE"
INVALID_LINEAGE: Final = "SESSION_QUERY_INVALID_LINEAGE"
SESSION_NOT_FOUND: Final = "SESSION_QUERY_SESSION_NOT_FOUND"
EVENT_NOT_FOUND: Final = "SESSION_QUERY_EVENT_NOT_FOUND"


class QueryError(DshError):
    """A session query was refused; ``code`` is a ``SESSION_QUERY_*`` code.

    Also raised as itself for a stored log the query cannot make sense of:
    ``SESSION_QUERY_INVALID_SURFACE`` (a surface replacement naming no visible event)
    and ``SESSION_QUERY_INVALID_LINEAGE`` (sessions whose parents form a cycle).
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class InvalidQueryError(QueryError, ValueError):
    """The request is malformed (a filter, cursor, limit, window, sort or query text); nothing was read."""


class StaleCursorError(QueryError):
    """The cursor was made for this request, but rows it paged were taken away since (a session deleted, the
    index rebuilt): start again from the first page."""

    def __init__(self, message: str) -> None:
        super().__init__(STALE_CURSOR, message)


class QueryNotFoundError(QueryError, LookupError):
    """No such session (``SESSION_QUERY_SESSION_NOT_FOUND``) or event (``SESSION_QUERY_EVENT_NOT_FOUND``)."""
