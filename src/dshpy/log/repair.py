"""Closers for a turn left open by a crash (``interrupted``) or cut by a fork (``forked``).

A log whose last turn never ended is balanced by appending, never by rewriting:
first an error ``tool/result`` for each tool call the model asked for and never got
an answer to, then ``step/end`` if a step is open, then ``turn/end``. A call whose
``tool/call`` was logged may have run, so its result says the outcome is unknown
and warns the model not to retry blindly; a call never started says so.

The ids, error names and texts are dsh v4's own: dsh checks them when it reads a
log, so they must match for sessions to move between the two runtimes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from dshpy.core.events import SessionEvent, event_from_parts
from dshpy.log.records import closer_result_data, compaction_bracket_data

__all__ = [
    "CLOSER_TEXTS",
    "TOOL_NOT_STARTED",
    "TOOL_OUTCOME_UNKNOWN",
    "interrupted_turn_closers",
    "open_turn_closers",
]

TOOL_NOT_STARTED = "TOOL_NOT_STARTED"
TOOL_OUTCOME_UNKNOWN = "TOOL_OUTCOME_UNKNOWN"

_RETRY_ADVICE = (
    "Decide whether to retry from the tool semantics: retry only if the operation is read-only or idempotent; "
    "if it may have side effects, first verify external state or ask the user. Do not retry blindly."
)

CLOSER_TEXTS: dict[str, dict[str, str]] = {
    "interrupted": {
        "started": "The tool call was interrupted after it was recorded, but no result was durably recorded. "
        "Its outcome is unknown. " + _RETRY_ADVICE,
        "not_started": "The tool call was interrupted before the Harness recorded it as started. "
        "Retry it if it is still needed.",
    },
    "forked": {
        "started": "The history inherited by this branch records this tool call starting but does not include "
        "its result. The parent session may have completed it after the fork point. " + _RETRY_ADVICE,
        "not_started": "The history inherited by this branch has no record of this tool call starting. "
        "The parent session may have executed it after the fork point. " + _RETRY_ADVICE,
    },
}
"""Model-visible wording of synthetic results (dsh's canonical texts, which its reader checks)."""

Cause = Literal["interrupted", "forked"]


@dataclass(slots=True)
class _Call:
    turn: int
    step: int
    call_seq: int | None = None


def _pending_calls(events: Sequence[SessionEvent]) -> dict[str, _Call]:
    pending: dict[str, _Call] = {}
    for event in events:
        kind = event.type
        data: Any = event.data
        if kind in ("turn/start", "turn/end", "step/end"):
            pending.clear()
        elif kind == "assistant/message":
            for block in data["message"]["content"]:
                if block.get("type") == "tool-call":
                    pending[block["id"]] = _Call(data["turn"], data["step"])
        elif kind == "tool/call":
            call = pending.get(data["callId"])
            if call is not None:
                call.call_seq = event.seq
        elif kind == "tool/result" and event.surface_op == "append":
            call_id = data["message"]["source"]["callId"]
            call = pending.get(call_id)
            if call is not None and call.turn == data["turn"] and call.step == data["step"]:
                del pending[call_id]
    return pending


def open_turn_closers(events: Sequence[SessionEvent], cause: Cause) -> list[SessionEvent]:
    """The events that close the log's open turn for ``cause``; ``[]`` when no turn is open.

    Seqs continue the log and every closer reuses the last event's time, so repairing
    the same log twice yields identical bytes.
    """
    open_turn: int | None = None
    open_step: int | None = None
    for event in events:
        if event.type == "turn/start":
            open_turn, open_step = event.data["turn"], None
        elif event.type == "turn/end":
            open_turn, open_step = None, None
        elif event.type == "step/start":
            open_step = event.data["step"]
        elif event.type == "step/end":
            open_step = None
    if open_turn is None or not events:
        return []
    seq = events[-1].seq + 1
    time = events[-1].time
    texts = CLOSER_TEXTS[cause]
    closers: list[SessionEvent] = []
    for call_id, call in _pending_calls(events).items():
        started = call.call_seq is not None
        error = (
            {"name": "ToolOutcomeUnknownError", "code": TOOL_OUTCOME_UNKNOWN}
            if started
            else {"name": "ToolNotStartedError", "code": TOOL_NOT_STARTED}
        )
        data = closer_result_data(
            call.turn,
            call.step,
            call_id,
            texts["started" if started else "not_started"],
            message_id=f"{cause}-tool-result-{call_id}-{seq}",
            error=error,
        )
        sources = [call.call_seq] if call.call_seq is not None else None
        closers.append(event_from_parts("tool/result", seq, time, data, "append", sources))
        seq += 1
    if open_step is not None:
        closers.append(event_from_parts("step/end", seq, time, {"turn": open_turn, "step": open_step}))
        seq += 1
    closers.append(event_from_parts("turn/end", seq, time, {"turn": open_turn, "reason": {"kind": cause}}))
    return closers


def _open_compaction(events: Sequence[SessionEvent]) -> SessionEvent | None:
    current: SessionEvent | None = None
    for event in events:
        if event.type == "compaction/start":
            current = event
        elif event.type in ("compaction/end", "session/end-seed"):
            current = None
    return current


def interrupted_turn_closers(events: Sequence[SessionEvent]) -> list[SessionEvent]:
    """Crash repair: close an open tail turn with ``turn/end {kind: interrupted}``.

    A compaction bracket the crash left open is closed first with a failed
    ``compaction/end`` (``error: "interrupted"``): the summary never landed, so the
    log is exactly as before the compaction, and later turns may not cross an open
    bracket. (dsh instead leaves the bracket open and marks it stale with a
    ``session/end-seed``; both forms are valid to both readers.)
    """
    closers: list[SessionEvent] = []
    start = _open_compaction(events)
    if start is not None:
        data = compaction_bracket_data(
            start.data["compactionId"],
            start.data["turn"],
            source_command_id=start.data.get("sourceCommandId"),
            error="interrupted",
        )
        closers.append(event_from_parts("compaction/end", events[-1].seq + 1, events[-1].time, data))
    return closers + open_turn_closers([*events, *closers], "interrupted")
