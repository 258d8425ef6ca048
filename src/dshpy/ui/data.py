"""What the UI's JSON endpoints answer, computed from one store through :mod:`dshpy.query`.

Every answer is plain JSON (camelCase keys, as the JSON-RPC methods use). The pieces:
the session list (:mod:`.listing`), the surface folds behind the transcript and the
timeline (:mod:`.folds`), and usage per turn (:mod:`.usage`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from dshpy.core.json import thaw
from dshpy.query import SessionQuery
from dshpy.query.lineage import trace_lineage
from dshpy.query.surface_trace import SURFACE_TYPES
from dshpy.storage.contract import SessionStore

from .folds import Folds, transcript_page
from .listing import LIST_PAGE, SessionListing, outcome_of
from .params import page_size, seq_param
from .usage import usage_of

__all__ = ["LIST_PAGE", "TIMELINE_PAGE", "TRANSCRIPT_PAGE", "CostEstimate", "UiData"]

TIMELINE_PAGE = 200
TRANSCRIPT_PAGE = 150
_MAX_TREE = 200  # fork-tree nodes given a boundary (each costs one indexed read)

CostEstimate = Callable[[Mapping[str, Any]], "dict[str, Any] | None"]
"""Prices a ``usage`` projection value (``dshpy ui`` passes the configured price table's estimate)."""


class UiData:
    """The UI's queries over ``store``; thread-safe (the server runs them in worker threads)."""

    def __init__(self, store: SessionStore, *, cost: CostEstimate | None = None) -> None:
        self.store = store
        self.query = SessionQuery(store)
        self._cost_of = cost
        self.listing = SessionListing(store, self.query, self._cost)
        self.folds = Folds(store)

    def _cost(self, usage: Any) -> dict[str, Any] | None:
        if self._cost_of is None or not isinstance(usage, dict):
            return None
        return self._cost_of(usage)

    # -- the session list ------------------------------------------------------------------

    def warm(self) -> None:
        """Start listing the store in the background (the server calls it when it starts)."""
        self.listing.warm()

    def sessions(self, params: Mapping[str, str]) -> dict[str, Any]:
        """A page of sessions (roots with their forks nested, unless a filter is set), or search hits for ``q``."""
        return self.listing.sessions(params)

    def session(self, session_id: str) -> dict[str, Any]:
        """Header, projections (title, lifecycle, usage, stats), lineage and cost of one session."""
        view = self.query.inspect(session_id).to_dict()
        lineage = trace_lineage(self.listing.lineage_infos(session_id), session_id).to_dict()
        self._boundaries(lineage)
        view["lineage"] = lineage
        usage = view["projections"].get("usage")
        view["cost"] = self._cost(usage)
        view["lastOutcome"] = outcome_of(view["projections"])
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

    def transcript(self, session_id: str, params: Mapping[str, str]) -> dict[str, Any]:
        """``limit`` top-level transcript items: the last ones, those before position ``before``, or from ``from``.

        Items are in the model's order; ``at`` is an item's position (its seq, or for a
        checkpoint the first seq it replaced), which ``before``/``from`` page by.
        """
        limit = page_size(params.get("limit"), TRANSCRIPT_PAGE)
        if "before" not in params and "from" not in params:
            return self.folds.tail(session_id, limit)
        items = self.folds.fold(session_id).items
        if "before" in params:
            before = seq_param("before", params.get("before"))
            end = next((i for i, item in enumerate(items) if item["at"] >= before), len(items))
            start = max(0, end - limit)
        else:
            from_seq = seq_param("from", params.get("from"))
            start = next((i for i, item in enumerate(items) if item["at"] >= from_seq), len(items))
            end = min(len(items), start + limit)
        return transcript_page(session_id, items[start:end], earlier=start > 0, later=end < len(items))

    def events(self, session_id: str, params: Mapping[str, str]) -> dict[str, Any]:
        """A page of the raw log from seq ``from``; ``visible=1`` keeps only what is on the model's surface now."""
        from_seq = seq_param("from", params.get("from"))
        limit = page_size(params.get("limit"), TIMELINE_PAGE)
        visible = params.get("visible") == "1"
        folded = self.folds.ready(session_id) if not visible else self.folds.fold(session_id)
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
        return usage_of(self.store, self.query, session_id, self._cost)
