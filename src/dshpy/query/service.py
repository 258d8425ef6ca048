"""The session query service: list, inspect, read, trace and search any store without opening a session.

Every call reads; none writes a log or takes a session's lease, and none calls the
store's crash-repairing ``open()``: logs are read as stored (``read``, ``read_types``),
summaries come from the projection cache (``list_projections``, ``projections``), and
search from the store's index or its scan (``search_text``). So querying a session
another process is writing is always safe, and sees what that writer has flushed.

The CLI, the JSON-RPC methods, the SDK and the agent's memory tools are meant to be
thin wrappers over one :class:`SessionQuery` per store: each method checks its
arguments first (a :class:`~dshpy.query.errors.InvalidQueryError` reads nothing),
answers with a value whose ``to_dict()`` is its JSON form, and refuses with a
:class:`~dshpy.query.errors.QueryError` carrying dsh's ``SESSION_QUERY_*`` code.
"""

from __future__ import annotations

import builtins
import itertools
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from dshpy.core.events import SessionEvent, is_seq
from dshpy.errors import SessionNotFound
from dshpy.query.embedding import Embedder, require_numpy
from dshpy.query.errors import (
    EVENT_NOT_FOUND,
    INVALID_FILTER,
    INVALID_QUERY,
    INVALID_WINDOW,
    SESSION_NOT_FOUND,
    InvalidQueryError,
    QueryNotFoundError,
)
from dshpy.query.filters import SessionFilter, check_limit, parse_types
from dshpy.query.lineage import trace_lineage
from dshpy.query.listing import filtered_summaries, info_page, page_of, with_projections
from dshpy.query.results import (
    EventTrace,
    EventWindow,
    LineageTrace,
    LogEntry,
    LogPage,
    SearchPage,
    SessionPage,
    SessionSummary,
    SessionView,
    Surface,
)
from dshpy.query.search import SearchRequest, run_search
from dshpy.query.semantic_modes import SEARCH_MODES
from dshpy.query.surface_trace import SURFACE_TYPES, SurfaceTrace, trace_surface
from dshpy.query.vector_store import VectorStore
from dshpy.storage.contract import SessionStore
from dshpy.storage.search_records import SearchIndexStatus

if TYPE_CHECKING:
    from dshpy.query.semantic import SemanticIndex

__all__ = ["LIST_DEFAULT_LIMIT", "LIST_MAX_LIMIT", "READ_LIMIT_MAX", "READ_WINDOW_MAX", "SURFACES", "SessionQuery"]

LIST_DEFAULT_LIMIT = 50
LIST_MAX_LIMIT = 1000
READ_WINDOW_MAX = 50
"""Events :meth:`SessionQuery.read_event` shows at most on each side of its target (dsh's ``readWindowMax``)."""
READ_LIMIT_MAX = 100_000
SURFACES: tuple[Surface, ...] = ("current", "shadowed", "log-only")


def _mode(value: Any, *, hybrid: bool) -> str:
    if value is None:
        return "hybrid" if hybrid else "fts"
    if value not in SEARCH_MODES:
        raise InvalidQueryError(INVALID_QUERY, f"mode must be one of {', '.join(SEARCH_MODES)}, not {value!r}")
    return str(value)


def _window(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= READ_WINDOW_MAX:
        raise InvalidQueryError(INVALID_WINDOW, f"{name} must be an integer from 0 to {READ_WINDOW_MAX}, not {value!r}")
    return value


def _seq(name: str, value: Any, code: str) -> int:
    if not is_seq(value):
        raise InvalidQueryError(code, f"{name} must be a non-negative integer, not {value!r}")
    return int(value)


def _surfaces(value: Any) -> frozenset[str] | None:
    if value is None:
        return None
    wanted = (value,) if isinstance(value, str) else tuple(value)
    for surface in wanted:
        if surface not in SURFACES:
            raise InvalidQueryError(INVALID_FILTER, f"surface {surface!r} is not one of {', '.join(SURFACES)}")
    return frozenset(wanted)


class SessionQuery:
    """Queries over one store (any :class:`~dshpy.SessionStore`); cheap to make, safe to share between threads."""

    def __init__(
        self, store: SessionStore, *, embedder: Embedder | None = None, vectors: VectorStore | None = None
    ) -> None:
        self.store = store
        self._embedder = embedder
        self._vectors = vectors
        self._semantic: SemanticIndex | None = None
        self._semantic_lock = threading.Lock()

    @property
    def semantic(self) -> SemanticIndex:
        """The semantic index (made on first use: with the local model when no ``embedder`` was given).

        Raises :class:`~dshpy.query.embedding.SemanticUnavailableError`, naming the install
        command, when ``dshpy[semantic]`` is not installed.
        """
        with self._semantic_lock:
            if self._semantic is None:
                from dshpy.query.semantic import SemanticIndex

                embedder = self._embedder
                if embedder is None:
                    require_numpy()
                    from dshpy.query.embedder_static import StaticModelEmbedder

                    embedder = StaticModelEmbedder()
                self._semantic = SemanticIndex(self.store, embedder, self._vectors)
            return self._semantic

    @contextmanager
    def _found(self, session_id: str) -> Iterator[None]:
        """A missing session as the query's not-found error (other store errors pass through)."""
        try:
            yield
        except SessionNotFound:
            raise QueryNotFoundError(SESSION_NOT_FOUND, f'session "{session_id}" not found') from None

    def _surface(self, session_id: str) -> SurfaceTrace:
        with self._found(session_id):
            return trace_surface(session_id, self.store.read_types(session_id, SURFACE_TYPES))

    # -- sessions -----------------------------------------------------------------------

    def list(
        self,
        filters: SessionFilter | Mapping[str, Any] | None = None,
        *,
        sort: str = "created",
        descending: bool = True,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> SessionPage:
        """Sessions passing ``filters``, newest first by default (``sort`` ``"created"`` or ``"updated"``).

        Pass the page's ``next_cursor`` back (with the same filters and sort) for the
        next page; sessions added meanwhile do not disturb it.
        """
        checked = SessionFilter.parse(filters)
        size = check_limit(limit, LIST_MAX_LIMIT, default=LIST_DEFAULT_LIMIT)
        cut = info_page(self.store, checked, sort=sort, descending=bool(descending), limit=size, cursor=cursor)
        if cut is not None:
            infos, next_cursor = cut
            return SessionPage([with_projections(self.store, SessionSummary(info)) for info in infos], next_cursor)
        summaries = filtered_summaries(self.store, checked, projections=checked.needs_projections)
        page = page_of(summaries, checked, sort=sort, descending=bool(descending), limit=size, cursor=cursor)
        if checked.needs_projections:
            return page
        return SessionPage([with_projections(self.store, s) for s in page.sessions], page.next_cursor)

    def inspect(self, session_id: str) -> SessionView:
        """A session's info and every registered projection, from the cache plus the stored tail (no repair)."""
        with self._found(session_id):
            info = self.store.stat(session_id)
            snapshot = self.store.projections(session_id)
        return SessionView(info, snapshot["as_of_seq"], dict(snapshot["values"]))

    def trace_session(self, session_id: str) -> LineageTrace:
        """The session's ancestors and the forks made from it (and from them), from one listing."""
        return trace_lineage(self.store.list(), session_id)

    # -- logs ---------------------------------------------------------------------------

    def read_log(
        self,
        session_id: str,
        *,
        from_seq: int = 0,
        types: str | builtins.list[str] | tuple[str, ...] | None = None,
        surface: str | builtins.list[str] | tuple[str, ...] | None = None,
        limit: int | None = None,
    ) -> LogPage:
        """Stored events from ``from_seq`` on, each with where it stands on the surface.

        ``types`` and ``surface`` (``current``, ``shadowed``, ``log-only``) keep only
        those; ``limit`` cuts the page, and ``next_seq`` says where to go on.
        """
        start = _seq("from_seq", from_seq, INVALID_FILTER)
        kinds = parse_types(types)
        surfaces = _surfaces(surface)
        size = None if limit is None else check_limit(limit, READ_LIMIT_MAX, default=READ_LIMIT_MAX)
        trace = self._surface(session_id)
        entries: builtins.list[LogEntry] = []
        next_seq = None
        with self._found(session_id):
            events = (
                self.store.read(session_id, start) if kinds is None else self.store.read_types(session_id, kinds, start)
            )
            for event in events:
                where = trace.surface_of(event.seq)
                if surfaces is not None and where not in surfaces:
                    continue
                if size is not None and len(entries) == size:
                    next_seq = event.seq
                    break
                entries.append(LogEntry(event, where))
        return LogPage(session_id, entries, next_seq)

    def read_event(self, session_id: str, seq: int, *, before: int = 0, after: int = 0) -> EventWindow:
        """Event ``seq`` with up to ``before`` events ahead of it and ``after`` behind (each at most 50)."""
        target_seq = _seq("seq", seq, INVALID_WINDOW)
        ahead, behind = _window("before", before), _window("after", after)
        start = max(0, target_seq - ahead)
        trace = self._surface(session_id)
        with self._found(session_id):
            window = list(itertools.islice(self.store.read(session_id, start), target_seq - start + behind + 1))
        target = self._target(session_id, target_seq, [e for e in window if e.seq == target_seq])
        entries = [LogEntry(event, trace.surface_of(event.seq)) for event in window]
        return EventWindow(session_id, LogEntry(target, trace.surface_of(target_seq)), entries, start, window[-1].seq)

    def trace_event(self, session_id: str, seq: int) -> EventTrace:
        """What replaced event ``seq`` on the surface, what it replaced, what it cites and what cites it."""
        target_seq = _seq("seq", seq, INVALID_WINDOW)
        trace = self._surface(session_id)
        with self._found(session_id):
            found = list(itertools.islice(self.store.read(session_id, target_seq), 1))
        target = self._target(session_id, target_seq, found)
        chain = trace.chain(target_seq)
        return EventTrace(
            session_id,
            LogEntry(target, trace.surface_of(target_seq)),
            chain[0] if chain else None,
            chain,
            trace.replaced.get(target_seq, ()),
            tuple(target.source_event_seqs or ()),
            tuple(trace.derived.get(target_seq, ())),
        )

    @staticmethod
    def _target(session_id: str, seq: int, found: builtins.list[SessionEvent]) -> SessionEvent:
        if not found or found[0].seq != seq:
            raise QueryNotFoundError(EVENT_NOT_FOUND, f'session "{session_id}" has no event at seq {seq}')
        return found[0]

    # -- search -------------------------------------------------------------------------

    def search(
        self,
        query: str,
        *,
        filters: SessionFilter | Mapping[str, Any] | None = None,
        session_id: str | None = None,
        types: str | builtins.list[str] | tuple[str, ...] | None = None,
        since: Any = None,
        until: Any = None,
        operators: bool = False,
        limit: int | None = None,
        cursor: str | None = None,
        mode: str | None = None,
    ) -> SearchPage:
        """Events whose text matches ``query``, best first, each with a highlighted snippet.

        The query is one literal phrase unless ``operators`` (see
        :mod:`dshpy.query.expressions`). ``session_id`` searches one session (its
        inherited fork prefix included), ``filters`` the sessions :meth:`list` would
        show for them; ``types`` and ``since``/``until`` (event time) narrow the events.
        At most 100 hits a page (default 20); pass ``next_cursor`` back for more.

        ``mode``: ``"fts"`` ranks by bm25 over the words; ``"semantic"`` by the cosine of
        embeddings (``dshpy[semantic]``); ``"hybrid"`` fuses both lists by reciprocal rank.
        The default is ``"hybrid"`` when this query was given an ``embedder`` or ``vectors``,
        else ``"fts"``. Semantic modes embed what was appended since the last search first.
        """
        chosen = _mode(mode, hybrid=self._embedder is not None or self._vectors is not None)
        request = SearchRequest(
            query,
            operators=bool(operators),
            filters=SessionFilter.parse(filters),
            session_id=session_id,
            types=types,
            since=since,
            until=until,
            mode=chosen,
        )
        if request.session_id is not None and not self.store.exists(request.session_id):
            raise QueryNotFoundError(SESSION_NOT_FOUND, f'session "{request.session_id}" not found')
        if chosen == "fts":
            return run_search(self.store, request, limit=limit, cursor=cursor)
        from dshpy.query.semantic_search import run_semantic_search

        return run_semantic_search(self.semantic, request, limit=limit, cursor=cursor)

    def index_status(self) -> SearchIndexStatus:
        """What the store's search index holds (``kind`` ``"scan"``: it keeps none)."""
        return self.store.search_index_status()

    def rebuild_index(self) -> SearchIndexStatus:
        """Index every stored event again from the logs (after an upgrade changed what is indexed, or damage)."""
        return self.store.rebuild_search_index()
