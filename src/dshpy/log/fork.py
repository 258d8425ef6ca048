"""Fork planning: which prefix a child inherits and what it starts with.

A child inherits the parent's events ``0..boundary`` (inclusive) and then its own
``session/end-seed {inherited: true}``; the parent is never touched. A boundary
inside an open turn is refused (``OPEN_TURN``) unless the caller asks to close it,
in which case v4's ``forked`` closers follow the marker. Planning is pure; stores
decide whether the prefix is copied or shared.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from dshpy.core.events import SessionEvent, event_from_parts, is_seq
from dshpy.errors import ForkError
from dshpy.log.repair import open_turn_closers

__all__ = ["ForkPlan", "plan_fork"]


@dataclass(frozen=True, slots=True)
class ForkPlan:
    """The child's starting log: ``inherited`` parent events, then ``own`` (marker + closers)."""

    boundary: int | None
    """Last inherited parent seq; ``None`` when the parent was empty."""
    inherited_count: int
    own: tuple[SessionEvent, ...]

    @property
    def inherited_event_count(self) -> int:
        """Seq of the child's ``session/end-seed {inherited: true}`` marker."""
        return self.inherited_count


def _open_turn_at(events: Sequence[SessionEvent], boundary: int) -> int | None:
    for event in reversed(events[: boundary + 1]):
        if event.type == "turn/end":
            return None
        if event.type == "turn/start":
            turn: int = event.data["turn"]
            return turn
    return None


def plan_fork(
    events: Sequence[SessionEvent],
    boundary: int | None = None,
    *,
    session_id: str = "",
    close_open_turn: bool = False,
    now_ms: int | None = None,
) -> ForkPlan:
    """Plan a fork of ``events`` at the inclusive ``boundary`` (default: the last seq).

    Raises :class:`ForkError` with ``INVALID_BOUNDARY`` (not a seq of this log) or
    ``OPEN_TURN`` (inside an open turn and ``close_open_turn`` is false).
    """
    name = f' of session "{session_id}"' if session_id else ""
    last = events[-1].seq if events else None
    if boundary is None:
        if not events:
            stamp = int(time.time() * 1000) if now_ms is None else now_ms
            marker = event_from_parts("session/end-seed", 0, stamp, {"inherited": True})
            return ForkPlan(None, 0, (marker,))
        boundary = len(events) - 1
    if not is_seq(boundary):
        raise ForkError("INVALID_BOUNDARY", f"fork boundary must be a non-negative safe integer, got {boundary!r}")
    if boundary >= len(events):
        shown = "none" if last is None else str(last)
        raise ForkError("INVALID_BOUNDARY", f"fork boundary {boundary} does not exist{name} (last seq: {shown})")
    if events[boundary].seq != boundary:
        raise ForkError("INVALID_BOUNDARY", f"fork boundary {boundary} does not match a contiguous event seq")
    open_turn = _open_turn_at(events, boundary)
    if open_turn is not None and not close_open_turn:
        raise ForkError(
            "OPEN_TURN",
            f"fork boundary {boundary}{name} ends inside open turn {open_turn}; fork at a turn end, "
            "or pass close_open_turn=True to close it with forked closers",
        )
    prefix = list(events[: boundary + 1])
    marker = event_from_parts("session/end-seed", boundary + 1, events[boundary].time, {"inherited": True})
    closers = open_turn_closers([*prefix, marker], "forked") if open_turn is not None else []
    return ForkPlan(boundary, boundary + 1, (marker, *closers))
