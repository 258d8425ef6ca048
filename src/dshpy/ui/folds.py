"""A session's surface fold and transcript, cached per log length, and the transcript's last page.

Folding a log's surface is the costly step of the session views (it reads every
surface event), so a fold is kept per session and log length and extended by what
was appended since, unless a replacement came in (then the log is folded again).
"""

from __future__ import annotations

import copy
import itertools
import threading
from collections import OrderedDict
from typing import Any

from dshpy.core.events import SessionEvent, SurfaceReplace
from dshpy.query.errors import QueryError
from dshpy.query.surface_trace import SURFACE_TYPES, SurfaceTrace, trace_surface
from dshpy.storage.contract import SessionStore

from .transcript import TRANSCRIPT_TYPES, transcript_items

__all__ = ["TAIL_WINDOW", "Folded", "Folds", "transcript_page"]

TAIL_WINDOW = 3000
"""Events a transcript's last page is first folded from (see :meth:`Folds.tail`)."""
_CACHED_SESSIONS = 8


class Folded:
    """One session's surface fold and transcript, valid while its log has ``length`` events."""

    def __init__(self, length: int, trace: SurfaceTrace, items: list[dict[str, Any]]) -> None:
        self.length = length
        self.trace = trace
        self.items = items


def transcript_page(session_id: str, items: list[dict[str, Any]], *, earlier: bool, later: bool) -> dict[str, Any]:
    """The JSON of a transcript page."""
    return {"sessionId": session_id, "items": items, "hasEarlier": earlier, "hasLater": later}


class Folds:
    """The folds of the sessions viewed lately (a few), for one store; thread-safe."""

    def __init__(self, store: SessionStore) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._folds: OrderedDict[str, Folded] = OrderedDict()
        self._folding: set[str] = set()
        self._tails: OrderedDict[tuple[str, int, int], dict[str, Any]] = OrderedDict()
        self._fold_locks: dict[str, threading.Lock] = {}

    def fold(self, session_id: str) -> Folded:
        """The session's fold as of its current length: cached, extended by what was appended since, or new."""
        with self._lock:
            guard = self._fold_locks.setdefault(session_id, threading.Lock())
        with guard:  # one fold per session at a time: a second request waits for the first, then hits the cache
            return self._fold_locked(session_id)

    def _fold_locked(self, session_id: str) -> Folded:
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
            folded = Folded(length, trace, transcript_items(events, trace))
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

    def _extend(self, session_id: str, cached: Folded, length: int) -> Folded | None:
        """Fold only the events appended since ``cached``; ``None`` when one replaces others (then refold all)."""
        events = self._transcript_events(session_id, cached.length, length)
        if any(isinstance(e.surface_op, SurfaceReplace) for e in events):
            return None
        trace = copy.deepcopy(cached.trace)  # the cached fold may be serving another request right now
        trace_surface(session_id, (e for e in events if e.type in SURFACE_TYPES), into=trace)
        return Folded(length, trace, [*cached.items, *transcript_items(events, trace)])

    def tail(self, session_id: str, limit: int) -> dict[str, Any]:
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
            return transcript_page(session_id, items[-limit:], earlier=len(items) > limit, later=False)
        if tail is not None:
            return tail
        window = max(TAIL_WINDOW, limit * 20)
        while window < length:
            events = self._transcript_events(session_id, length - window, length)
            try:
                trace = trace_surface(session_id, (e for e in events if e.type in SURFACE_TYPES))
            except QueryError:  # a replacement reaches before the window
                window *= 4
                continue
            items = transcript_items(events, trace)
            if len(items) >= limit:
                page = transcript_page(session_id, items[-limit:], earlier=True, later=False)
                with self._lock:
                    self._tails[(session_id, length, limit)] = page
                    while len(self._tails) > _CACHED_SESSIONS:
                        self._tails.popitem(last=False)
                return page
            window *= 4
        items = self.fold(session_id).items
        return transcript_page(session_id, items[-limit:], earlier=len(items) > limit, later=False)

    def fold_later(self, session_id: str) -> None:
        with self._lock:
            if session_id in self._folding:
                return
            self._folding.add(session_id)

        def fold() -> None:
            try:
                self.fold(session_id)
            except Exception:  # the next request that needs the fold reports the error
                pass
            finally:
                with self._lock:
                    self._folding.discard(session_id)

        threading.Thread(target=fold, name="dshpy-ui-fold", daemon=True).start()

    def ready(self, session_id: str) -> Folded | None:
        """The fold if it is cached and current, or cheap to make (a short log); else start it and say ``None``."""
        length = self.store.stat(session_id).event_count
        with self._lock:
            cached = self._folds.get(session_id)
        if cached is not None and cached.length == length:
            return cached
        if length <= TAIL_WINDOW:
            return self.fold(session_id)
        self.fold_later(session_id)
        return None
