"""The token meter: how big the next model request will be, from the log alone.

The next request is the tool schemas of the latest ``request/header`` plus the
derived messages (the system prompt is surface node 0). Each surface node is priced
with the fixed heuristic of :mod:`~dshpy.compaction.estimate`; the provider's own
count then calibrates the total, as dsh's ``TokenMeter.measure`` does:

* the latest ``assistant/message`` that reported ``usage`` is the *anchor*: the
  provider counted its request (input + cache read + cache write) and its answer
  (output), so ``usage`` is what that request plus answer really cost;
* if the request header has not changed since, the estimate is that count plus the
  heuristic price of whatever the surface gained or lost after the anchor — never
  less than the pure estimate of the anchor's request, so a provider that reports
  nothing useful cannot make the meter under-count;
* otherwise (no usage yet, or a new header), it is the pure estimate.

The meter folds each session's log incrementally (it keeps the priced surface and a
running total), so a step costs what the new events cost, and
:meth:`TokenMeter.usage` — "62% of the context window" — is O(1) after that.
Compaction reads :meth:`TokenMeter.measure`, which also lists the priced nodes.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass, field
from typing import Any, Literal

from dshpy.compaction.estimate import estimate_message, estimate_tools
from dshpy.compaction.pairing import Link, apply_link, balanced_cuts, tool_link
from dshpy.compaction.window import default_context_window
from dshpy.core.events import SessionEvent, SurfaceReplace
from dshpy.core.vocabulary import SURFACE_EVENT_TYPES
from dshpy.log.messages import message_of
from dshpy.log.session import Session

__all__ = ["DEFAULT_METER", "ContextUsage", "Measurement", "PricedNode", "TokenMeter", "context_usage"]

Baseline = Literal["usage", "estimated", "none"]


@dataclass(frozen=True, slots=True)
class PricedNode:
    """One surface node and its heuristic price (0 for a node that derives no message)."""

    seq: int
    tokens: int


@dataclass(frozen=True, slots=True)
class Measurement:
    """The estimated size of the next request, with the priced surface it was computed from."""

    total_tokens: int
    """The estimate compaction compares with its threshold."""
    surface_tokens: int
    """Heuristic price of the derived messages."""
    tools_tokens: int
    """Heuristic price of the tool schemas of the latest ``request/header``."""
    baseline: Baseline
    """``usage``: anchored to the provider's count; ``estimated``: heuristic only; ``none``: empty."""
    seqs: tuple[int, ...]
    """The current surface, in model order."""
    prices: tuple[int, ...]
    """The heuristic price of each node of :attr:`seqs`."""
    cuts: tuple[bool, ...]
    """``cuts[i]``: no tool call is open across the cut before node ``i`` (one more entry: after the last)."""
    log_length: int
    """How many events the measurement covers."""

    @property
    def nodes(self) -> tuple[PricedNode, ...]:
        """The surface as (seq, price) pairs."""
        return tuple(map(PricedNode, self.seqs, self.prices))


@dataclass(frozen=True, slots=True)
class ContextUsage:
    """How full the model's context window is: the "62% of context used" read."""

    used: int
    """Estimated tokens of the next request."""
    window: int | None
    """The model's context window, when known."""
    baseline: Baseline

    @property
    def ratio(self) -> float | None:
        """``used / window`` (may exceed 1), or ``None`` without a window."""
        return None if not self.window else self.used / self.window

    @property
    def percent(self) -> int | None:
        """The ratio as a whole percentage, capped at 100 as dsh's context meter shows it."""
        ratio = self.ratio
        return None if ratio is None else min(100, round(ratio * 100))

    def to_dict(self) -> dict[str, Any]:
        """``{used, window, ratio}`` for JSON answers."""
        return {"used": self.used, "window": self.window, "ratio": self.ratio}


@dataclass(slots=True)
class _Anchor:
    header: Any
    surface_tokens: int
    """The surface the anchored request saw, plus its answer."""
    usage_tokens: int | None


@dataclass(slots=True)
class _Fold:
    """One session's priced surface after its first ``consumed`` events."""

    consumed: int = 0
    seqs: list[int] = field(default_factory=list)
    prices: list[int] = field(default_factory=list)
    links: list[Link] = field(default_factory=list)
    cuts: list[bool] | None = field(default_factory=lambda: [True])
    """Kept up to date while nodes are only appended; ``None`` after a replace (rebuilt on demand)."""
    open_calls: set[str] = field(default_factory=set)
    surface_tokens: int = 0
    header: Any = None
    tools_tokens: int = 0
    context: Any = None
    anchor: _Anchor | None = None

    def fold(self, event: SessionEvent) -> None:
        kind = event.type
        if kind == "request/header":
            self.header = event.data["header"]
            self.tools_tokens = estimate_tools(self.header.get("tools"))
        elif kind == "request/context":
            self.context = event.data
        if kind not in SURFACE_EVENT_TYPES or event.surface_op is None:
            return
        message = message_of(event)
        price = 0 if message is None else estimate_message(message.data)
        if kind == "assistant/message":
            usage = _usage_tokens(event.data.get("usage"))
            self.anchor = _Anchor(self.header, self.surface_tokens + price, usage)
        link = tool_link(event)
        op = event.surface_op
        if isinstance(op, SurfaceReplace):
            start = self.seqs.index(op.start_seq)
            end = self.seqs.index(op.end_seq, start)
            self.surface_tokens += price - sum(self.prices[start : end + 1])
            self.seqs[start : end + 1] = [event.seq]
            self.prices[start : end + 1] = [price]
            self.links[start : end + 1] = [link]
            self.cuts = None
        else:
            self.seqs.append(event.seq)
            self.prices.append(price)
            self.links.append(link)
            self.surface_tokens += price
            if self.cuts is not None:
                apply_link(self.open_calls, link)
                self.cuts.append(not self.open_calls)

    def current_cuts(self) -> list[bool]:
        if self.cuts is None:
            self.cuts = balanced_cuts(self.links)
            self.open_calls = set()
            for link in self.links:
                apply_link(self.open_calls, link)
        return self.cuts

    def total(self) -> tuple[int, Baseline]:
        """The next request's estimate and what it is anchored to."""
        tools = self.tools_tokens
        anchor = self.anchor
        if anchor is not None and (anchor.header is self.header or anchor.header == self.header):
            estimated = tools + anchor.surface_tokens
            usage = anchor.usage_tokens
            drift = self.surface_tokens - anchor.surface_tokens
            if usage is not None and usage >= estimated:
                return max(0, usage + drift), "usage"
            return max(0, estimated + drift), "estimated"
        if self.header is None and self.surface_tokens == 0:
            return 0, "none"
        return tools + self.surface_tokens, "estimated"

    def window(self) -> int | None:
        context = self.context
        if isinstance(context, dict):
            window = context.get("contextWindow")
            if type(window) is int and window > 0:
                return window
            return default_context_window(context.get("model"))
        config = self.header.get("config") if isinstance(self.header, dict) else None
        return default_context_window(config.get("model")) if isinstance(config, dict) else None


def _usage_tokens(usage: Any) -> int | None:
    """Input + cache read + cache write + output of a ``TokenUsage`` (reasoning is part of output)."""
    if not isinstance(usage, dict):
        return None
    total = 0
    for key in ("inputTokens", "cacheReadTokens", "cacheWriteTokens", "outputTokens"):
        value = usage.get(key, 0)
        if type(value) is not int or value < 0:
            return None
        total += value
    return total


class TokenMeter:
    """Measures sessions; keeps one incremental fold per live session (weakly held)."""

    def __init__(self) -> None:
        self._folds: weakref.WeakKeyDictionary[Session, _Fold] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def _fold(self, session: Session) -> _Fold:
        """The session's fold, caught up with its log (callers hold the lock)."""
        state = self._folds.get(session)
        if state is None:
            state = self._folds[session] = _Fold()
        events = session.events
        for seq in range(state.consumed, len(events)):
            state.fold(events[seq])
        state.consumed = len(events)
        return state

    def measure(self, session: Session) -> Measurement:
        """The next request's estimate with the priced surface (O(surface): it copies the node list)."""
        with self._lock:
            state = self._fold(session)
            total, baseline = state.total()
            seqs, prices, cuts = tuple(state.seqs), tuple(state.prices), tuple(state.current_cuts())
            surface, tools = state.surface_tokens, state.tools_tokens
            return Measurement(total, surface, tools, baseline, seqs, prices, cuts, state.consumed)

    def usage(self, session: Session, *, window: int | None = None) -> ContextUsage:
        """How full the context is; ``window`` overrides the one the log records (or the model's default)."""
        with self._lock:
            state = self._fold(session)
            total, baseline = state.total()
            return ContextUsage(total, window if window is not None else state.window(), baseline)

    def window(self, session: Session) -> int | None:
        """The context window the log records for the session's route (or the routed model's default)."""
        with self._lock:
            return self._fold(session).window()

    def reserved_output_tokens(self, session: Session) -> int:
        """Output tokens the routed request reserves in the same window (its header's ``maxTokens``)."""
        with self._lock:
            header = self._fold(session).header
        config = header.get("config") if isinstance(header, dict) else None
        max_tokens = config.get("maxTokens") if isinstance(config, dict) else None
        return max_tokens if type(max_tokens) is int and max_tokens > 0 else 0


DEFAULT_METER = TokenMeter()
"""The meter the module-level helpers use; its folds live as long as their sessions."""


def context_usage(session: Session, *, window: int | None = None) -> ContextUsage:
    """How full ``session``'s context window is (``used``, ``window``, ``ratio``), from its log alone."""
    return DEFAULT_METER.usage(session, window=window)
