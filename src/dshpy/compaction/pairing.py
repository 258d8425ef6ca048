"""Where the surface may be cut without separating a tool call from its result.

A provider refuses a request whose tool result has no preceding call (or whose
call is never answered before the next user turn), so a compaction span must
start and end at *balanced* cuts: no call advertised before the cut is answered
after it. The walk follows the current surface in model order, as dsh's
``toolPairingBalancedBefore/After`` do, because earlier replacements move nodes.

dsh counts calls and results; this walk matches them by call id, which gives the
same cuts on every surface dsh accepts and, where a plain user-message
replacement already left a result without its call, keeps going (dsh would stop
with "corrupt surface"; compacting can only remove such an orphan, never make one).
"""

from __future__ import annotations

from collections.abc import Sequence

from dshpy.core.events import SessionEvent

__all__ = ["balanced_cuts", "is_balanced_span"]


def balanced_cuts(events: Sequence[SessionEvent], nodes: Sequence[int]) -> list[bool]:
    """``cuts[i]``: whether the cut just before ``nodes[i]`` is balanced (``cuts[len(nodes)]``: after the last)."""
    open_calls: set[str] = set()
    cuts = [True]
    for seq in nodes:
        event = events[seq]
        if event.type == "assistant/message":
            for block in event.data["message"]["content"]:
                if block.get("type") == "tool-call":
                    open_calls.add(block["id"])
        elif event.type == "tool/result":
            open_calls.discard(event.data["message"]["toolCallId"])
        cuts.append(not open_calls)
    return cuts


def is_balanced_span(cuts: Sequence[bool], start_index: int, end_index: int) -> bool:
    """Whether positions ``start_index..end_index`` (inclusive) start and end at balanced cuts."""
    return cuts[start_index] and cuts[end_index + 1]
