"""Tool-result pruning: an oversized tool output keeps its head and tail, the middle goes.

No model is involved, so it is the cheap first answer to a full context (dsh's
``ToolResultPruner``, 0.2.1rc2 defaults). Every current ``tool/result`` whose text
is longer than ``threshold_chars`` code points is rewritten to its first
``head_chars`` code points, :data:`PRUNE_MARKER`, and its last ``tail_chars``;
non-text blocks keep their place. The rewrite is logged, never stored over the
original: a ``compaction/prune`` pricing the node, then a ``tool/result`` whose data
is the original's with only ``message.content`` changed, replacing that one node
and citing it. A pruned result is within the threshold, so pruning again finds
nothing: the pass is idempotent.

Lengths are Unicode code points, as dsh counts them, and a cut never falls between
the halves of a surrogate pair (dshpy stores such a pair as its one character, but
a pair held as two code points is kept whole too). The marker is dsh's own string:
it is what a reader (or a later model) sees where output was removed, so both
runtimes write the same one.

dsh accepts a replacing ``tool/result`` only inside an open turn, so pruning needs
one (:class:`~dshpy.errors.PruneOutsideTurnError` otherwise). All rewrites of one
pass are appended and flushed as one batch.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dshpy.compaction.estimate import estimate_message
from dshpy.core.events import SessionEvent, event_from_parts
from dshpy.core.json import thaw
from dshpy.errors import CompactionConfigError, PruneOutsideTurnError
from dshpy.log.records import compaction_prune_data
from dshpy.log.session import Session

__all__ = ["PRUNE_MARKER", "PruneResult", "PrunedResult", "ToolResultPruner"]

PRUNE_MARKER = "\n\n[... tool result middle pruned ...]\n\n"
"""What stands where the middle of a pruned tool result was (dsh's marker)."""

_SURROGATE = re.compile("[\ud800-\udfff]")


def _points(text: str) -> Sequence[str]:
    """``text`` as code points, a high + low surrogate pair counting as one."""
    if _SURROGATE.search(text) is None:
        return text
    points: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        if "\ud800" <= char <= "\udbff" and index + 1 < len(text) and "\udc00" <= text[index + 1] <= "\udfff":
            points.append(text[index : index + 2])
            index += 2
        else:
            points.append(char)
            index += 1
    return points


def _length(blocks: Sequence[Mapping[str, Any]]) -> int:
    return sum(len(_points(block["text"])) for block in blocks if block.get("type") == "text")


@dataclass(frozen=True, slots=True)
class PrunedResult:
    """One rewritten tool result."""

    original_seq: int
    replacement_seq: int
    call_id: str
    chars_before: int
    chars_after: int


@dataclass(frozen=True, slots=True)
class PruneResult:
    """What one pruning pass rewrote."""

    pruned: tuple[PrunedResult, ...] = ()

    @property
    def chars_removed(self) -> int:
        return sum(p.chars_before - p.chars_after for p in self.pruned)

    def __bool__(self) -> bool:
        return bool(self.pruned)


class ToolResultPruner:
    """Head + marker + tail pruning of oversized tool results (see the module doc)."""

    def __init__(self, threshold_chars: int = 8192, head_chars: int = 4096, tail_chars: int = 1024) -> None:
        for name, value, minimum in (("threshold_chars", threshold_chars, 1), ("head_chars", head_chars, 0)):
            if type(value) is not int or value < minimum:
                raise CompactionConfigError(f"{name} ({value!r}) must be an integer >= {minimum}")
        if type(tail_chars) is not int or tail_chars < 0:
            raise CompactionConfigError(f"tail_chars ({tail_chars!r}) must be an integer >= 0")
        emitted = head_chars + len(PRUNE_MARKER) + tail_chars
        if emitted > threshold_chars:
            raise CompactionConfigError(
                f"head_chars + marker + tail_chars ({emitted}) must be at most threshold_chars ({threshold_chars})"
            )
        self.threshold_chars = threshold_chars
        self.head_chars = head_chars
        self.tail_chars = tail_chars

    def prune_content(self, blocks: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]] | None:
        """The pruned content, or ``None`` when the text is within the threshold."""
        total = _length(blocks)
        if total <= self.threshold_chars:
            return None
        removed_start = self.head_chars
        removed_end = total - self.tail_chars
        pruned: list[dict[str, Any]] = []
        consumed = 0
        marked = False
        for block in blocks:
            if block.get("type") != "text":
                pruned.append(dict(block))
                continue
            points = _points(block["text"])
            start, end = consumed, consumed + len(points)
            head_end = min(len(points), max(0, removed_start - start))
            tail_start = min(len(points), max(0, removed_end - start))
            marker = ""
            if not marked and start < removed_end and end > removed_start:
                marker, marked = PRUNE_MARKER, True
            text = "".join(points[:head_end]) + marker + "".join(points[tail_start:])
            if text:
                pruned.append({**block, "text": text})
            consumed = end
        return pruned

    def plan(self, session: Session, *, clock: Callable[[], int]) -> list[SessionEvent]:
        """The events one pass would append (a prune record and a rewrite per oversized result)."""
        events = session.events
        planned: list[SessionEvent] = []
        seq = len(events)
        now = clock()
        for node in session.surface_nodes:
            event = events[node]
            if event.type != "tool/result":
                continue
            message = event.data["message"]
            content = self.prune_content(message["content"])
            if content is None:
                continue
            data = thaw(event.data)
            data["message"]["content"] = content
            record = compaction_prune_data(node, estimate_message(message))
            planned.append(event_from_parts("compaction/prune", seq, now, record))
            replace = {"op": "replace", "startSeq": node, "endSeq": node}
            planned.append(event_from_parts("tool/result", seq + 1, now, data, replace, [node]))
            seq += 2
        return planned

    def prune(self, session: Session, *, clock: Callable[[], int], flush: bool = True) -> PruneResult:
        """Rewrite every oversized current tool result, as one batch; returns what changed."""
        if session.open_turn is None:
            raise PruneOutsideTurnError(
                f'session "{session.id}" has no open turn: dsh accepts a rewritten tool/result only inside one'
            )
        planned = self.plan(session, clock=clock)
        if not planned:
            return PruneResult()
        landed = session.append_events(planned)
        if flush:
            session.flush()
        pruned = []
        for record, rewrite in zip(landed[::2], landed[1::2], strict=True):
            seq = record.data["shadowedSeqs"][0]
            original = session.events[seq].data["message"]
            before, after = _length(original["content"]), _length(rewrite.data["message"]["content"])
            pruned.append(PrunedResult(seq, rewrite.seq, original["source"]["callId"], before, after))
        return PruneResult(tuple(pruned))
