"""The session list of the UI: pages of sessions with their forks nested, and search hits.

Where the store cuts listing pages itself (SQLite, PostgreSQL: ``paged_listing``), a
page reads only its own sessions (one statement), their forks (one per nesting
level) and their summaries, so the first page of a 10k-session store costs what the
first page of a 10-session store does, and a new session shows at the next reload.

Elsewhere (JSONL, memory) paging needs the plain listing, which parses every stored
header (about a second for 10k sessions on a small machine) while a page shows
fifty: the listing is kept and reused for a few seconds, then refreshed in the
background (see :meth:`SessionListing._listing`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from dshpy.core.json import thaw
from dshpy.errors import CorruptSessionError, FormatVersionError, SessionNotFound
from dshpy.query import SessionFilter, SessionQuery, SessionSummary
from dshpy.query.listing import SUMMARY_PROJECTIONS, info_page, page_of, summary_of
from dshpy.storage.contract import SessionStore
from dshpy.storage.listing_page import PageRequest
from dshpy.storage.projection_cache import SessionProjections
from dshpy.storage.records import SessionInfo

from .params import page_size

__all__ = ["LISTING_FRESH", "LISTING_STALE", "LIST_PAGE", "ROW_PROJECTIONS", "SessionListing", "outcome_of"]

LIST_PAGE = 50
LISTING_FRESH = 10.0
"""Seconds a session listing is reused as it is."""
LISTING_STALE = 60.0
"""Seconds an older listing is still served while a fresh one is made in the background."""
_MAX_CHILDREN = 100  # forks nested under one row of the list
_MAX_DEPTH = 4
_BATCH = 500  # sessions asked for by id in one page request
ROW_PROJECTIONS = (*SUMMARY_PROJECTIONS, "turn_boundary")
"""What a row of the list shows: the query's summary, tokens and cost (usage), and the last turn's outcome."""


def outcome_of(values: Mapping[str, Any]) -> str | None:
    """How the last turn ended (``turn/end``'s reason kind), ``"running"`` while one is open, else ``None``.

    From the ``turn_boundary`` and ``stats`` projection values: no event is read.
    """
    boundary = values.get("turn_boundary")
    if isinstance(boundary, Mapping) and boundary.get("openTurnStartSeq") is not None:
        return "running"
    stats = values.get("stats")
    outcome = stats.get("lastOutcome") if isinstance(stats, Mapping) else None
    return outcome if isinstance(outcome, str) else None


class SessionListing:
    """Pages of ``store``'s sessions as listing rows; thread-safe."""

    def __init__(self, store: SessionStore, query: SessionQuery, cost: Callable[[Any], dict[str, Any] | None]) -> None:
        self.store = store
        self.query = query
        self._cost_of = cost
        self._lock = threading.Lock()
        self._listed: tuple[dict[str, SessionInfo] | None, float] = (None, 0.0)
        self._relisting = False
        self._listing_lock = threading.Lock()

    @property
    def paged(self) -> bool:
        """Whether the store cuts listing pages itself (then no whole listing is ever made or kept)."""
        return "paged_listing" in self.store.capabilities

    def infos(self, *, including: str | None = None) -> dict[str, SessionInfo]:
        """Every session's info by id; listed again when ``including`` (or one of its forks) is not in it yet."""
        infos = self._listing()
        if including is not None and (
            including not in infos or any(fork not in infos for fork in infos[including].forks)
        ):
            infos = self._relist()
        return infos

    def lineage_infos(self, session_id: str) -> list[SessionInfo]:
        """What :func:`~dshpy.query.lineage.trace_lineage` needs of ``session_id``: its ancestors, itself, its forks.

        A paging store is asked for just those (one ``stat`` per ancestor, one request
        per generation of forks); elsewhere they come from the kept listing.
        """
        if not self.paged:
            return list(self.infos(including=session_id).values())
        target = self.store.stat(session_id)
        found = {target.id: target}
        parent = target.parent_session
        while parent is not None and parent not in found:  # a cycle stops here; trace_lineage names it
            try:
                info = self.store.stat(parent)
            except SessionNotFound:  # deleted: the trace says the parent is unresolved
                break
            found[info.id] = info
            parent = info.parent_session
        self._add_by_id(found, target.forks, depth=None)
        return list(found.values())

    def _add_by_id(
        self, found: dict[str, SessionInfo], ids: Iterable[str], *, depth: int | None, forks: int | None = None
    ) -> None:
        """Add the infos of ``ids`` and of their forks, generation by generation (``depth`` more at most, and
        the first ``forks`` forks of each session: as many as :meth:`_nest` shows)."""
        wanted = [session_id for session_id in dict.fromkeys(ids) if session_id not in found]
        level = 0
        while wanted and (depth is None or level <= depth):
            listed: list[SessionInfo] = []
            for start in range(0, len(wanted), _BATCH):
                batch = tuple(wanted[start : start + _BATCH])
                listed.extend(self.store.list_page(PageRequest(ids=batch, limit=len(batch))))
            for info in listed:
                found[info.id] = info
            wanted = [fork for info in listed for fork in dict.fromkeys(info.forks[:forks]) if fork not in found]
            level += 1

    def sessions(self, params: Mapping[str, str]) -> dict[str, Any]:
        """A page of sessions (roots with their forks nested, unless a filter is set), or search hits for ``q``."""
        filters: dict[str, Any] = {}
        if params.get("title"):
            filters["title"] = params["title"]
        if params.get("cwd"):
            filters["cwd"] = [params["cwd"]]
        if params.get("state"):
            filters["state"] = [params["state"]]
        limit = page_size(params.get("limit"), LIST_PAGE)
        cursor = params.get("cursor") or None
        text = params.get("q", "").strip()
        if text:
            return self._search(text, filters, limit, cursor)
        checked = SessionFilter.parse(filters)
        if checked.needs_projections:  # title and state live in projections: the query service reads them all
            page = self.query.list(filters, limit=limit, cursor=cursor)
            rows = [self._row(summary.info) for summary in page.sessions]
            return {"sessions": rows, "nextCursor": page.next_cursor, "nested": False}
        nested = checked.empty
        if nested:
            checked = SessionFilter.parse({"parent": [None]})
        if self.paged:
            cut = info_page(self.store, checked, sort="created", descending=True, limit=limit, cursor=cursor)
            if cut is not None:  # None: a damaged session on the page; the whole listing names it
                page_infos, next_cursor = cut
                rows = [self._row(info) for info in page_infos]
                if nested:
                    known = {info.id: info for info in page_infos}
                    first = (fork for info in page_infos for fork in info.forks[:_MAX_CHILDREN])
                    self._add_by_id(known, first, depth=_MAX_DEPTH, forks=_MAX_CHILDREN)
                    self._nest(rows, known)
                return {"sessions": rows, "nextCursor": next_cursor, "nested": nested}
        infos = self._listing()
        summaries = [SessionSummary(info) for info in infos.values()]
        kept = [summary for summary in summaries if checked.matches(summary, None)]
        page = page_of(kept, checked, sort="created", descending=True, limit=limit, cursor=cursor)
        rows = [self._row(summary.info) for summary in page.sessions]
        if nested:
            self._nest(rows, infos)
        return {"sessions": rows, "nextCursor": page.next_cursor, "nested": nested}

    def warm(self) -> None:
        """Make the session listing in the background (the server calls it when it starts), unless pages need none."""
        if not self.paged:
            self._relist_later()

    def _listing(self) -> dict[str, SessionInfo]:
        """Every session's info by id, listed again at most every few seconds.

        Listing parses every stored header (about a second for 10k sessions), while a
        page shows fifty: a listing younger than :data:`LISTING_FRESH` seconds is reused,
        an older one (up to :data:`LISTING_STALE`) is served while a new one is made in
        the background, so a new session shows up at the next reload.
        """
        now = time.monotonic()
        with self._lock:
            listed, made = self._listed
        age = now - made
        if listed is not None and age < LISTING_STALE:
            if age >= LISTING_FRESH:
                self._relist_later()
            return listed
        return self._relist()

    def _relist(self) -> dict[str, SessionInfo]:
        started = time.monotonic()
        with self._listing_lock:  # one listing at a time: a request arriving meanwhile takes the one being made
            with self._lock:
                listed, made = self._listed
            if listed is not None and made >= started:
                return listed
            listed = {info.id: info for info in self.store.list()}
            with self._lock:
                self._listed = (listed, time.monotonic())
            return listed

    def _relist_later(self) -> None:
        with self._lock:
            if self._relisting:
                return
            self._relisting = True

        def relist() -> None:
            try:
                self._relist()
            except Exception:  # the next request lists in the foreground and reports it
                with self._lock:
                    self._listed = (None, 0.0)
            finally:
                with self._lock:
                    self._relisting = False

        threading.Thread(target=relist, name="dshpy-ui-list", daemon=True).start()

    def _search(self, text: str, filters: dict[str, Any], limit: int, cursor: str | None) -> dict[str, Any]:
        hits = self.query.search(text, filters=filters, limit=min(limit, 100), cursor=cursor)
        listed: list[dict[str, Any]] = []
        for session_id in dict.fromkeys(hit.session_id for hit in hits.hits):
            try:
                row = self._row(self.store.stat(session_id))
            except SessionNotFound:  # deleted since it was indexed
                continue
            row["hits"] = [h.to_dict() for h in hits.hits if h.session_id == session_id]
            listed.append(row)
        return {"sessions": listed, "nextCursor": hits.next_cursor, "nested": False, "search": text}

    def _nest(self, rows: list[dict[str, Any]], infos: Mapping[str, SessionInfo], depth: int = 0) -> None:
        """Attach each row's forks (and theirs, a few levels deep) as ``children``, oldest first."""
        for row in rows:
            forks = [infos[fork] for fork in row.get("forks") or () if fork in infos][:_MAX_CHILDREN]
            children = [self._row(info) for info in sorted(forks, key=lambda i: (i.created_at, i.id))]
            row["children"] = children
            if children and depth < _MAX_DEPTH:
                self._nest(children, infos, depth + 1)

    def _row(self, info: SessionInfo) -> dict[str, Any]:
        """A listing row: the session's info and summary (title, state, turns), tokens, cost, last outcome."""
        try:
            snapshot = self.store.projections(info.id, ROW_PROJECTIONS, info=info)
        except (CorruptSessionError, FormatVersionError, SessionNotFound) as error:  # still listed, with why
            return SessionSummary(info, error=" ".join(str(error).split())).to_dict()
        values = dict(snapshot["values"])
        row = summary_of(SessionProjections(info, snapshot["as_of_seq"], values)).to_dict()
        usage = thaw(values["usage"]) if "usage" in values else None
        row["tokens"] = usage.get("total") if isinstance(usage, dict) else None
        row["cost"] = self._cost_of(usage)
        row["lastOutcome"] = outcome_of(values)
        return row
