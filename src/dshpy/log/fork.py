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


def _open_turn_at(window: Sequence[SessionEvent], index: int) -> int | None:
    for event in reversed(window[: index + 1]):
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
    length: int | None = None,
    session_id: str = "",
    close_open_turn: bool = False,
    now_ms: int | None = None,
) -> ForkPlan:
    """Plan a fork at the inclusive ``boundary`` (default: the last seq).

    ``events`` is the whole log, or a contiguous window of it that contains the
    boundary and starts at or before the last ``turn/start``/``turn/end`` before it
    (that is all a fork needs to know, so stores need not read a long prefix);
    ``length`` is the whole log's length when ``events`` is a window.

    Raises :class:`ForkError` with ``INVALID_BOUNDARY`` (not a seq of this log) or
    ``OPEN_TURN`` (inside an open turn and ``close_open_turn`` is false).
    """
    name = f' of session "{session_id}"' if session_id else ""
    offset = events[0].seq if events else 0
    total = offset + len(events) if length is None else length
    if boundary is None:
        if total == 0:
            stamp = int(time.time() * 1000) if now_ms is None else now_ms
            marker = event_from_parts("session/end-seed", 0, stamp, {"inherited": True})
            return ForkPlan(None, 0, (marker,))
        boundary = total - 1
    if not is_seq(boundary):
        raise ForkError("INVALID_BOUNDARY", f"fork boundary must be a non-negative safe integer, got {boundary!r}")
    if boundary >= total:
        shown = "none" if total == 0 else str(total - 1)
        where = f' session "{session_id}"' if session_id else " the session"
        raise ForkError("INVALID_BOUNDARY", f"fork boundary {boundary} is past the end of{where} (last seq: {shown})")
    index = boundary - offset
    if not 0 <= index < len(events):
        raise ValueError(f"fork window starting at seq {offset} does not contain boundary {boundary}")
    if events[index].seq != boundary:
        raise ForkError("INVALID_BOUNDARY", f"fork boundary {boundary} does not match a contiguous event seq")
    open_turn = _open_turn_at(events, index)
    if open_turn is not None and not close_open_turn:
        raise ForkError(
            "OPEN_TURN",
            f"fork boundary {boundary}{name} ends inside open turn {open_turn}; fork at a turn end, "
            "or pass close_open_turn=True to close it with forked closers",
        )
    marker = event_from_parts("session/end-seed", boundary + 1, events[index].time, {"inherited": True})
    closers = open_turn_closers([*events[: index + 1], marker], "forked") if open_turn is not None else []
    return ForkPlan(boundary, boundary + 1, (marker, *closers))
