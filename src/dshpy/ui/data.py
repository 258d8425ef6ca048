"""What the UI's JSON endpoints answer, computed from one store through :mod:`dshpy.query`.

Every answer is plain JSON (camelCase keys, as the JSON-RPC methods use). Folding a
log's surface is the one costly step (it reads every surface event), so the fold and
the transcript built from it are cached per session and log length: a 100k-event
session is folded once, then every page of its timeline or transcript is a range read.
"""

from __future__ import annotations

import copy
import itertools
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from dshpy.core.events import SessionEvent, SurfaceReplace
from dshpy.core.json import thaw
from dshpy.errors import CorruptSessionError, FormatVersionError, SessionNotFound
from dshpy.projections.builtins._stream import last_usage
from dshpy.query import SessionFilter, SessionQuery, SessionSummary
from dshpy.query.errors import InvalidQueryError, QueryError
from dshpy.query.lineage import trace_lineage
from dshpy.query.listing import page_of, summary_of
from dshpy.query.surface_trace import SURFACE_TYPES, SurfaceTrace, trace_surface
from dshpy.storage.contract import SessionStore
from dshpy.storage.projection_cache import SessionProjections
from dshpy.storage.records import SessionInfo

from .transcript import TRANSCRIPT_TYPES, transcript_items

__all__ = ["LIST_PAGE", "TIMELINE_PAGE", "TRANSCRIPT_PAGE", "CostEstimate", "UiData"]

LIST_PAGE = 50
TIMELINE_PAGE = 200
TRANSCRIPT_PAGE = 150
MAX_PAGE = 1000
_CACHED_SESSIONS = 8
_TAIL_WINDOW = 3000  # events a transcript's last page is first folded from (see UiData._tail)
_MAX_TREE = 200  # fork-tree nodes given a boundary (each costs one indexed read)
_MAX_CHILDREN = 100  # forks nested under one row of the list
_MAX_DEPTH = 4
LISTING_FRESH = 10.0
"""Seconds a session listing is reused as it is (see :meth:`UiData._listing`)."""
LISTING_STALE = 60.0
"""Seconds an older listing is still served while a fresh one is made in the background."""
_TAIL = 64  # events read from a log's end to find its last turn's outcome
_USAGE_KEYS = ("inputTokens", "cacheReadTokens", "cacheWriteTokens", "outputTokens", "reasoningTokens")
_USAGE_TYPES = ("turn/start", "turn/end", "step/start", "step/end", "assistant/message", "assistant/attempt")


def _page_size(value: str | None, default: int) -> int:
    if value is None or value == "":
        return default
    if not value.isdigit() or not 1 <= int(value) <= MAX_PAGE:
        raise InvalidQueryError(
            "SESSION_QUERY_INVALID_FILTER", f"limit must be an integer 1..{MAX_PAGE}, not {value!r}"
        )
    return int(value)


def _seq_param(name: str, value: str | None) -> int:
    if value is None or value == "":
        return 0
    if not value.isdigit():
        raise InvalidQueryError("SESSION_QUERY_INVALID_FILTER", f"{name} must be a non-negative integer, not {value!r}")
    return int(value)


class _Folded:
    """One session's surface fold and transcript, valid while its log has ``length`` events."""

    def __init__(self, length: int, trace: SurfaceTrace, items: list[dict[str, Any]]) -> None:
        self.length = length
        self.trace = trace
        self.items = items


CostEstimate = Callable[[Mapping[str, Any]], "dict[str, Any] | None"]
"""Prices a ``usage`` projection value (``dshpy ui`` passes the configured price table's estimate)."""


class UiData:
    """The UI's queries over ``store``; thread-safe (the server runs them in worker threads)."""

    def __init__(self, store: SessionStore, *, cost: CostEstimate | None = None) -> None:
        self.store = store
        self._cost_of = cost
        self.query = SessionQuery(store)
        self._folds: OrderedDict[str, _Folded] = OrderedDict()
        self._folding: set[str] = set()
        self._tails: OrderedDict[tuple[str, int, int], dict[str, Any]] = OrderedDict()
        self._fold_locks: dict[str, threading.Lock] = {}
        self._listed: tuple[dict[str, SessionInfo] | None, float] = (None, 0.0)
        self._relisting = False
        self._listing_lock = threading.Lock()
        self._lock = threading.Lock()

    def _cost(self, usage: Any) -> dict[str, Any] | None:
        if self._cost_of is None or not isinstance(usage, dict):
            return None
        return self._cost_of(usage)

    # -- the session list ------------------------------------------------------------------

    def sessions(self, params: Mapping[str, str]) -> dict[str, Any]:
        """A page of sessions (roots with their forks nested, unless a filter is set), or search hits for ``q``."""
        filters: dict[str, Any] = {}
        if params.get("title"):
            filters["title"] = params["title"]
        if params.get("cwd"):
            filters["cwd"] = [params["cwd"]]
        if params.get("state"):
            filters["state"] = [params["state"]]
        limit = _page_size(params.get("limit"), LIST_PAGE)
        cursor = params.get("cursor") or None
        text = params.get("q", "").strip()
        if text:
            return self._search(text, filters, limit, cursor)
        checked = SessionFilter.parse(filters)
        if checked.needs_projections:  # title and state live in projections: the query service reads them all
            page = self.query.list(filters, limit=limit, cursor=cursor)
            rows = [self._row(summary.info) for summary in page.sessions]
            return {"sessions": rows, "nextCursor": page.next_cursor, "nested": False}
        infos = self._listing()
        nested = checked.empty
        if nested:
            checked = SessionFilter.parse({"parent": [None]})
        summaries = [SessionSummary(info) for info in infos.values()]
        kept = [summary for summary in summaries if checked.matches(summary, None)]
        page = page_of(kept, checked, sort="created", descending=True, limit=limit, cursor=cursor)
        rows = [self._row(summary.info) for summary in page.sessions]
        if nested:
            self._nest(rows, infos)
        return {"sessions": rows, "nextCursor": page.next_cursor, "nested": nested}

    def warm(self) -> None:
        """Make the session listing in the background (the server calls it when it starts)."""
        self._relist_later()

    def _listing(self) -> dict[str, SessionInfo]:
        """Every session's info by id, re-listed at most every few seconds.

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
            snapshot = self.store.projections(info.id)
        except (CorruptSessionError, FormatVersionError, SessionNotFound) as error:  # still listed, with why
            return SessionSummary(info, error=" ".join(str(error).split())).to_dict()
        values = dict(snapshot["values"])
        row = summary_of(SessionProjections(info, snapshot["as_of_seq"], values)).to_dict()
        usage = thaw(values["usage"]) if "usage" in values else None
        row["tokens"] = usage.get("total") if isinstance(usage, dict) else None
        row["cost"] = self._cost(usage)
        row["lastOutcome"] = self._last_outcome(info.id, info.event_count)
        return row

    def _last_outcome(self, session_id: str, length: int) -> str | None:
        outcome = None
        for event in self.store.read(session_id, max(0, length - _TAIL)):
            if event.type == "turn/end":
                reason = thaw(event.data).get("reason")
                outcome = reason.get("kind") if isinstance(reason, dict) else None
            elif event.type == "turn/start":
                outcome = "running"
        return outcome

    # -- one session -----------------------------------------------------------------------

    def session(self, session_id: str) -> dict[str, Any]:
        """Header, projections (title, lifecycle, usage, stats), lineage and cost of one session."""
        view = self.query.inspect(session_id).to_dict()
        infos = self._listing()
        if session_id not in infos or any(fork not in infos for fork in infos[session_id].forks):
            infos = self._relist()  # newer than the listing: list again
        lineage = trace_lineage(list(infos.values()), session_id).to_dict()
        self._boundaries(lineage)
        view["lineage"] = lineage
        usage = view["projections"].get("usage")
        view["cost"] = self._cost(usage)
        view["lastOutcome"] = self._last_outcome(session_id, view["eventCount"])
        return view

    def _boundaries(self, lineage: dict[str, Any]) -> None:
        """Give each fork in ``lineage`` its ``boundary``: the last seq it inherited (its seed marker's seq - 1)."""
        nodes: list[dict[str, Any]] = [lineage["target"], *lineage["ancestors"]]
        pending = list(lineage["descendants"])
        while pending and len(nodes) < _MAX_TREE:
            node = pending.pop()
            nodes.append(node["session"])
            pending.extend(node["forks"])
        for info in nodes:
            if info.get("parentSession"):
                marker = next(iter(self.store.read_types(info["id"], ("session/end-seed",))), None)
                info["boundary"] = None if marker is None else marker.seq - 1

    def _fold(self, session_id: str) -> _Folded:
        """The session's fold as of its current length: cached, extended by what was appended since, or new."""
        with self._lock:
            guard = self._fold_locks.setdefault(session_id, threading.Lock())
        with guard:  # one fold per session at a time: a second request waits for the first, then hits the cache
            return self._fold_locked(session_id)

    def _fold_locked(self, session_id: str) -> _Folded:
        length = self.store.stat(session_id).event_count
        with self._lock:
            cached = self._folds.get(session_id)
            if cached is not None and cached.length == length:
                self._folds.move_to_end(session_id)
                return cached
        folded = self._extend(session_id, cached, length) if cached is not None and cached.length < length else None
        if folded is None:
            events = self._transcript_events(session_id, 0, length)
            trace = trace_surface(session_id, (e for e in events if e.type in SURFACE_TYPES))
            folded = _Folded(length, trace, transcript_items(events, trace))
        with self._lock:
            self._folds[session_id] = folded
            self._folds.move_to_end(session_id)
            while len(self._folds) > _CACHED_SESSIONS:
                evicted, _ = self._folds.popitem(last=False)
                self._fold_locks.pop(evicted, None)
        return folded

    def _transcript_events(self, session_id: str, start: int, length: int) -> list[SessionEvent]:
        events = self.store.read_types(session_id, TRANSCRIPT_TYPES, start)
        return list(itertools.takewhile(lambda e: e.seq < length, events))

    def _extend(self, session_id: str, cached: _Folded, length: int) -> _Folded | None:
        """Fold only the events appended since ``cached``; ``None`` when one replaces others (then refold all)."""
        events = self._transcript_events(session_id, cached.length, length)
        if any(isinstance(e.surface_op, SurfaceReplace) for e in events):
            return None
        trace = copy.deepcopy(cached.trace)  # the cached fold may be serving another request right now
        trace_surface(session_id, (e for e in events if e.type in SURFACE_TYPES), into=trace)
        return _Folded(length, trace, [*cached.items, *transcript_items(events, trace)])

    def transcript(self, session_id: str, params: Mapping[str, str]) -> dict[str, Any]:
        """``limit`` top-level transcript items: the last ones, those before position ``before``, or from ``from``.

        Items are in the model's order; ``at`` is an item's position (its seq, or for a
        checkpoint the first seq it replaced), which ``before``/``from`` page by.
        """
        limit = _page_size(params.get("limit"), TRANSCRIPT_PAGE)
        if "before" not in params and "from" not in params:
            return self._tail(session_id, limit)
        items = self._fold(session_id).items
        if "before" in params:
            before = _seq_param("before", params.get("before"))
            end = next((i for i, item in enumerate(items) if item["at"] >= before), len(items))
            start = max(0, end - limit)
        else:
            from_seq = _seq_param("from", params.get("from"))
            start = next((i for i, item in enumerate(items) if item["at"] >= from_seq), len(items))
            end = min(len(items), start + limit)
        return self._page(session_id, items[start:end], earlier=start > 0, later=end < len(items))

    @staticmethod
    def _page(session_id: str, items: list[dict[str, Any]], *, earlier: bool, later: bool) -> dict[str, Any]:
        return {"sessionId": session_id, "items": items, "hasEarlier": earlier, "hasLater": later}

    def _tail(self, session_id: str, limit: int) -> dict[str, Any]:
        """The last page, from the cached fold, else from a fold of the log's tail alone.

        Replacements only take earlier events off the surface, so a fold of the last
        events is exact for them as long as every replacement in it names events inside
        it; when one reaches further back the window grows (at worst to the whole log).
        The whole log is folded only when a page needs it (earlier pages, the timeline):
        a fold of 100k events takes seconds of CPU, which a background thread would take
        from every other request (the GIL).
        """
        length = self.store.stat(session_id).event_count
        with self._lock:
            cached = self._folds.get(session_id)
            tail = self._tails.get((session_id, length, limit))
        if cached is not None and cached.length == length:
            items = cached.items
            return self._page(session_id, items[-limit:], earlier=len(items) > limit, later=False)
        if tail is not None:
            return tail
        window = max(_TAIL_WINDOW, limit * 20)
        while window < length:
            events = self._transcript_events(session_id, length - window, length)
            try:
                trace = trace_surface(session_id, (e for e in events if e.type in SURFACE_TYPES))
            except QueryError:  # a replacement reaches before the window
                window *= 4
                continue
            items = transcript_items(events, trace)
            if len(items) >= limit:
                page = self._page(session_id, items[-limit:], earlier=True, later=False)
                with self._lock:
                    self._tails[(session_id, length, limit)] = page
                    while len(self._tails) > _CACHED_SESSIONS:
                        self._tails.popitem(last=False)
                return page
            window *= 4
        items = self._fold(session_id).items
        return self._page(session_id, items[-limit:], earlier=len(items) > limit, later=False)

    def _fold_later(self, session_id: str) -> None:
        with self._lock:
            if session_id in self._folding:
                return
            self._folding.add(session_id)

        def fold() -> None:
            try:
                self._fold(session_id)
            except Exception:  # the next request that needs the fold reports the error
                pass
            finally:
                with self._lock:
                    self._folding.discard(session_id)

        threading.Thread(target=fold, name="dshpy-ui-fold", daemon=True).start()

    def events(self, session_id: str, params: Mapping[str, str]) -> dict[str, Any]:
        """A page of the raw log from seq ``from``; ``visible=1`` keeps only what is on the model's surface now."""
        from_seq = _seq_param("from", params.get("from"))
        limit = _page_size(params.get("limit"), TIMELINE_PAGE)
        visible = params.get("visible") == "1"
        folded = self._ready_fold(session_id) if not visible else self._fold(session_id)
        if folded is None:  # a long log not folded yet: the page now, the surface labels once the fold is done
            return self._unlabelled_events(session_id, from_seq, limit)
        trace = folded.trace
        source = (
            self.store.read_types(session_id, SURFACE_TYPES, from_seq)
            if visible
            else self.store.read(session_id, from_seq)
        )
        entries: list[dict[str, Any]] = []
        next_seq = None
        for event in source:
            if event.seq >= folded.length:
                break
            where = trace.surface_of(event.seq)
            if visible and where != "current":
                continue
            if len(entries) == limit:
                next_seq = event.seq
                break
            entries.append({"event": thaw(event.to_wire()), "surface": where})
        return {"sessionId": session_id, "entries": entries, "nextSeq": next_seq, "eventCount": folded.length}

    def _ready_fold(self, session_id: str) -> _Folded | None:
        """The fold if it is cached and current, or cheap to make (a short log); else start it and say ``None``."""
        length = self.store.stat(session_id).event_count
        with self._lock:
            cached = self._folds.get(session_id)
        if cached is not None and cached.length == length:
            return cached
        if length <= _TAIL_WINDOW:
            return self._fold(session_id)
        self._fold_later(session_id)
        return None

    def _unlabelled_events(self, session_id: str, from_seq: int, limit: int) -> dict[str, Any]:
        entries: list[dict[str, Any]] = []
        next_seq = None
        for event in self.store.read(session_id, from_seq):
            if len(entries) == limit:
                next_seq = event.seq
                break
            entries.append({"event": thaw(event.to_wire()), "surface": None})
        length = self.store.stat(session_id).event_count
        return {"sessionId": session_id, "entries": entries, "nextSeq": next_seq, "eventCount": length, "pending": True}

    def usage(self, session_id: str) -> dict[str, Any]:
        """Tokens per turn (input, cached, output, reasoning; failed attempts included) and time per step."""
        view = self.query.inspect(session_id)
        turns: dict[int, dict[str, Any]] = {}
        steps: list[dict[str, Any]] = []
        open_steps: dict[tuple[int, int], SessionEvent] = {}
        for event in self.store.read_types(session_id, _USAGE_TYPES):
            data = thaw(event.data)
            turn = data.get("turn") if isinstance(data, dict) else None
            if not isinstance(turn, int):
                continue
            row = turns.setdefault(turn, {"turn": turn, **{k: 0 for k in _USAGE_KEYS}, "calls": 0, "failed": 0})
            if event.type == "turn/start":
                row["start"] = event.time
            elif event.type == "turn/end":
                row["end"] = event.time
                reason = data.get("reason")
                row["outcome"] = reason.get("kind") if isinstance(reason, dict) else None
            elif event.type == "step/start":
                open_steps[(turn, data.get("step", 0))] = event
            elif event.type == "step/end":
                started = open_steps.pop((turn, data.get("step", 0)), None)
                if started is not None:
                    steps.append({"turn": turn, "step": data.get("step"), "ms": max(0, event.time - started.time)})
            else:
                found = data.get("usage") if event.type == "assistant/message" else None
                counts = found if isinstance(found, dict) else last_usage(data.get("stream"))
                row["calls" if event.type == "assistant/message" else "failed"] += 1
                for key in _USAGE_KEYS:
                    value = counts.get(key) if isinstance(counts, dict) else None
                    if type(value) is int and value >= 0:
                        row[key] += value
        usage = view.projections.get("usage")
        return {
            "sessionId": session_id,
            "turns": [turns[t] for t in sorted(turns)],
            "steps": steps,
            "total": thaw(usage).get("total") if isinstance(usage, dict) else None,
            "stats": thaw(view.projections.get("stats")),
            "cost": self._cost(thaw(usage) if usage is not None else None),
        }
