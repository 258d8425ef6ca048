"""Session query: list, inspect, read, trace and full-text search over any store (layer L4).

Start with :class:`SessionQuery`::

    from dshpy.query import SessionQuery

    query = SessionQuery(store)
    page = query.list({"cwd": "/srv/app", "state": "completed"}, limit=20)
    hits = query.search("connection refused", filters={"cwd": "/srv/app"})
    for hit in hits.hits:
        print(hit.session_id, hit.seq, hit.snippet.marked())
    window = query.read_event(hits.hits[0].session_id, hits.hits[0].seq, before=3, after=3)

The pieces a caller may want on their own: the text an event contributes to search
(:func:`event_text`), filters (:class:`SessionFilter`), the result values, and the
errors (:class:`QueryError` and its family, with dsh's ``SESSION_QUERY_*`` codes).

Semantic and hybrid search (``search(..., mode="semantic"|"hybrid")``, the
``dshpy[semantic]`` extra) take an :class:`Embedder` (``dshpy.query.embedder_static``,
``dshpy.query.embedder_http``) and keep vectors in a :class:`VectorStore`; numpy is
imported only when they run.
"""

from dshpy.log.event_text import event_text
from dshpy.query.embedding import Embedder, SemanticUnavailableError
from dshpy.query.errors import InvalidQueryError, QueryError, QueryNotFoundError, StaleCursorError
from dshpy.query.expressions import MAX_QUERY_BYTES, parse_query
from dshpy.query.filters import SESSION_FILTER_KEYS, SessionFilter
from dshpy.query.results import (
    EventTrace,
    EventWindow,
    LineageNode,
    LineageTrace,
    LogEntry,
    LogPage,
    SearchHit,
    SearchPage,
    SessionPage,
    SessionSummary,
    SessionView,
    Surface,
)
from dshpy.query.search import SEARCH_DEFAULT_LIMIT, SEARCH_MAX_LIMIT
from dshpy.query.semantic_modes import SEARCH_MODES
from dshpy.query.service import LIST_DEFAULT_LIMIT, LIST_MAX_LIMIT, READ_WINDOW_MAX, SessionQuery
from dshpy.query.snippets import SNIPPET_CHARS, Snippet
from dshpy.query.vector_store import VectorStore
from dshpy.storage.search_records import SearchIndexStatus

__all__ = [
    "LIST_DEFAULT_LIMIT",
    "LIST_MAX_LIMIT",
    "MAX_QUERY_BYTES",
    "READ_WINDOW_MAX",
    "SEARCH_DEFAULT_LIMIT",
    "SEARCH_MAX_LIMIT",
    "SEARCH_MODES",
    "SESSION_FILTER_KEYS",
    "SNIPPET_CHARS",
    "Embedder",
    "EventTrace",
    "EventWindow",
    "InvalidQueryError",
    "LineageNode",
    "LineageTrace",
    "LogEntry",
    "LogPage",
    "QueryError",
    "QueryNotFoundError",
    "SearchHit",
    "SearchIndexStatus",
    "SearchPage",
    "SemanticUnavailableError",
    "SessionFilter",
    "SessionPage",
    "SessionQuery",
    "SessionSummary",
    "SessionView",
    "Snippet",
    "StaleCursorError",
    "Surface",
    "VectorStore",
    "event_text",
    "parse_query",
]
