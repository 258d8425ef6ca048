"""Where the surface may be cut without separating a tool call from its result.

A provider refuses a request whose tool result has no preceding call (or whose
call is never answered before the next user turn), so a compaction span must
start and end at *balanced* cuts: no call advertised before the cut is answered
after it. The walk follows the current surface in model order, as dsh's
``toolPairingBalancedBefore/After`` do, because earlier replacements move nodes.

Each surface node is reduced once to its *link* (:func:`tool_link`): the call ids
an assistant message advertises, the call id a tool result answers, or nothing.
The token meter keeps the links beside its prices and extends the cuts as nodes
are appended, so a compaction reads them instead of walking the log.

dsh counts calls and results; this walk matches them by call id, which gives the
same cuts on every surface dsh accepts and, where a plain user-message
replacement already left a result without its call, keeps going (dsh would stop
with "corrupt surface"; compacting can only remove such an orphan, never make one).
"""

from __future__ import annotations

from collections.abc import Iterable

from dshpy.core.events import SessionEvent

__all__ = ["Link", "apply_link", "balanced_cuts", "tool_link"]

Link = tuple[str, ...] | str | None
"""The call ids a node advertises (a tuple), the call id it answers (a str), or ``None``."""


def tool_link(event: SessionEvent) -> Link:
    """What ``event`` (a surface node) does to the open tool calls."""
    if event.type == "assistant/message":
        ids = tuple(block["id"] for block in event.data["message"]["content"] if block.get("type") == "tool-call")
        return ids or None
    if event.type == "tool/result":
        return str(event.data["message"]["toolCallId"])
    return None


def apply_link(open_calls: set[str], link: Link) -> None:
    """Open or answer calls for one node."""
    if isinstance(link, tuple):
        open_calls.update(link)
    elif link is not None:
        open_calls.discard(link)


def balanced_cuts(links: Iterable[Link]) -> list[bool]:
    """``cuts[i]``: whether the cut just before node ``i`` is balanced (the last entry: after the last node)."""
    open_calls: set[str] = set()
    cuts = [True]
    for link in links:
        apply_link(open_calls, link)
        cuts.append(not open_calls)
    return cuts
