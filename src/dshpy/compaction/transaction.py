"""One compaction as one batch: ``compaction/start``, ``compaction/summary``, the checkpoint, ``compaction/end``.

dsh appends ``compaction/start`` first (it doubles as its lock), then waits for the
summary, then appends the rest one by one. dshpy waits for the summary *first* and
then appends all four events at once through :meth:`Session.append_events` (all
admitted or none) and flushes them as one conditional batch. So:

* a crash at any moment leaves either no trace of the compaction or all of it —
  never an open bracket;
* a failed or rejected summary writes nothing (no ``compaction/end {error}``: with
  no start on disk there is nothing to close; dsh readers accept the absence, and
  the error is raised to the caller instead of being recorded);
* another writer that got to the store first makes the flush fail with
  :class:`~dshpy.errors.ConflictError` and nothing of the compaction is stored.

The data shapes and their key order are 0.2.1rc2's (see :mod:`dshpy.log.records`).
The checkpoint cites ``[startSeq, summarySeq, ...shadowedSeqs]`` — in that order,
not increasing, so stores keep it verbatim — and replaces the span by its first and
last node.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dshpy.compaction.strategy import Span
from dshpy.compaction.summarizer import SummaryOutput, SummaryRequest
from dshpy.core.events import SessionEvent, event_from_parts
from dshpy.log.records import (
    checkpoint_source,
    compaction_bracket_data,
    compaction_summary_data,
    user_message,
)

__all__ = ["CompactionPlan", "CompactionResult", "compaction_events"]


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    """A selected span and the summary request for it; nothing is written until it is committed."""

    session_id: str
    compaction_id: str
    span: Span
    request: SummaryRequest
    source_command_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """What a dry run reports: the span (dsh's ``shadowed*`` names) and the summary call it would make."""
        span, request = self.span, self.request
        return {
            "shadowedRange": {"start": span.start_seq, "end": span.end_seq},
            "shadowedSeqs": list(span.seqs),
            "shadowedTokenCount": span.token_count,
            "summaryRequest": {
                "provider": request.provider,
                "model": request.model,
                "messages": len(request.messages) + 1,
                "maxTokens": request.max_tokens,
            },
        }


@dataclass(frozen=True, slots=True)
class CompactionResult:
    """A landed compaction (dsh's ``CompactionResult`` plus the checkpoint's seq and price)."""

    compaction_id: str
    turn: int | None
    """The turn that owns the bracket; ``None`` for a standalone compaction between turns."""
    start_seq: int
    summary_seq: int
    checkpoint_seq: int
    end_seq: int
    summary: tuple[Mapping[str, Any], ...]
    """The summary's text blocks (the checkpoint frames them)."""
    shadowed_seqs: tuple[int, ...]
    shadowed_token_count: int
    checkpoint_token_count: int
    """The checkpoint's price: always below ``shadowed_token_count``."""
    usage: Mapping[str, Any] | None = None
    """The summary call's token usage, when the summarizer reported it."""
    source_command_id: str | None = None

    @property
    def shadowed_range(self) -> tuple[int, int]:
        return self.shadowed_seqs[0], self.shadowed_seqs[-1]

    def to_dict(self) -> dict[str, Any]:
        """dsh's ``CompactionResult`` shape plus ``checkpointSeq``, ``checkpointTokenCount``, ``turn``, ``usage``."""
        result: dict[str, Any] = {"compactionId": self.compaction_id}
        if self.source_command_id is not None:
            result["sourceCommandId"] = self.source_command_id
        result.update(
            startSeq=self.start_seq,
            summarySeq=self.summary_seq,
            endSeq=self.end_seq,
            summary=[dict(block) for block in self.summary],
            shadowedRange={"start": self.shadowed_seqs[0], "end": self.shadowed_seqs[-1]},
            shadowedSeqs=list(self.shadowed_seqs),
            shadowedTokenCount=self.shadowed_token_count,
            checkpointSeq=self.checkpoint_seq,
            checkpointTokenCount=self.checkpoint_token_count,
            turn=self.turn,
            usage=None if self.usage is None else dict(self.usage),
        )
        return result


def checkpoint_message(plan: CompactionPlan, content: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The replacing ``user/message`` (a fresh message id; source ``compact-checkpoint``)."""
    return user_message(content, checkpoint_source(plan.compaction_id, plan.source_command_id))


def compaction_events(
    plan: CompactionPlan,
    summary: Sequence[Mapping[str, Any]],
    message: Mapping[str, Any],
    output: SummaryOutput,
    *,
    seq: int,
    time: int,
    turn: int | None,
) -> list[SessionEvent]:
    """The four events of a compaction landing at ``seq`` (all stamped ``time``)."""
    span = plan.span
    bracket = compaction_bracket_data(plan.compaction_id, turn, source_command_id=plan.source_command_id)
    record = compaction_summary_data(
        plan.compaction_id,
        summary,
        span.seqs,
        span.token_count,
        provider=output.provider,
        model=output.model,
        source_command_id=plan.source_command_id,
        raw_output=output.content if output.model_call else None,
        llm_stream_call=output.model_call,
        max_tokens=output.max_tokens,
        usage=output.usage,
    )
    replace = {"op": "replace", "startSeq": span.start_seq, "endSeq": span.end_seq}
    sources = [seq, seq + 1, *span.seqs]
    return [
        event_from_parts("compaction/start", seq, time, bracket),
        event_from_parts("compaction/summary", seq + 1, time, record),
        event_from_parts("user/message", seq + 2, time, message, replace, sources),
        event_from_parts("compaction/end", seq + 3, time, bracket),
    ]
