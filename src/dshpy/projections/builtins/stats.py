"""``stats``: how much work a session did and where the time went.

Counts:

* ``turns`` — ``turn/start`` events (a turn that is still open counts);
* ``steps`` — ``step/start`` events;
* ``model_calls`` / ``failed_model_calls`` — ``assistant/message`` / ``assistant/attempt``;
* ``tool_calls`` — ``tool/call`` events (calls that started);
* ``last_outcome`` — the ``reason.kind`` of the latest ``turn/end`` (``completed``,
  ``error``, ``aborted``, ``interrupted``, ``max-tokens``, …), ``None`` before the
  first turn ends and while a turn is open;
* ``tool_results`` / ``tool_errors`` — appended ``tool/result`` events, and those whose
  message has ``isError: true`` (crash-repair results included: the call did fail).
  A replacing ``tool/result`` (pruning rewrites an old result) is not a new result.

Times (milliseconds, each a sum over the log; durations that come out negative
because of clock skew count 0):

* **request start** — when a model request was dispatched. The log has no event at
  the instant of dispatch, so it is taken as the time of the ``step/start`` for a
  step's first attempt, and for a retry the later of the previous attempt's
  settlement and its ``llm/retry-started``. The few milliseconds a step spends writing
  its context records before dispatch are therefore part of the model's time; this
  is dsh's ``sessionStats`` convention (``llmMs`` is measured from ``step/start``).
* ``model_ms`` — request start → the ``assistant/message`` / ``assistant/attempt``
  that settled it (the event's time, written when the stream ended): the wall time
  of model calls, failed ones included.
* ``ttft_ms`` over ``ttft_count`` calls — time to first token: request start → the
  first record of the call's stream. Calls with an empty stream have no first token
  and are not counted — nor are failed calls whose stream holds only the
  runtime's closing ``finish`` (they never connected). Mean TTFT is ``ttft_ms / ttft_count``; decode time is
  ``model_ms - ttft_ms`` over the same calls.
* ``tool_ms`` — each ``tool/call`` → the appended ``tool/result`` with its ``callId``.
  Calls still running are kept in ``pending_tools`` (callId → start time) and
  forgotten at ``turn/end``, as dsh does; results without a logged call (a call that
  never started) have no duration.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import Field

from dshpy.core.events import SessionEvent
from dshpy.projections.builtins._stream import first_time
from dshpy.projections.definition import ProjectionDefinition, ProjectionState

__all__ = ["STATS", "StatsState"]


class StatsState(ProjectionState):
    """Counts and summed durations over the whole log (see the module docstring for definitions)."""

    turns: int = 0
    steps: int = 0
    model_calls: int = 0
    failed_model_calls: int = 0
    tool_calls: int = 0
    tool_results: int = 0
    tool_errors: int = 0
    model_ms: int = 0
    ttft_ms: int = 0
    ttft_count: int = 0
    tool_ms: int = 0
    last_outcome: str | None = None
    request_start: int | None = None
    """Internal: start time of the model request in flight in the open step, if any."""
    pending_tools: dict[str, int] = Field(default_factory=dict)
    """Internal: started tool calls without a result yet, callId → ``tool/call`` time."""


_TYPES = frozenset(
    {
        "turn/start",
        "turn/end",
        "step/start",
        "assistant/message",
        "assistant/attempt",
        "tool/call",
        "tool/result",
        "llm/retry-started",
    }
)


_MODEL_CALLS = frozenset({"assistant/message", "assistant/attempt"})


def fold_stats(state: StatsState, events: Sequence[SessionEvent]) -> StatsState:
    """``state`` after ``events``: counters in a plain dict, the state rebuilt once at the end."""
    values = state.__dict__.copy()
    pending = state.pending_tools  # replaced by a private copy before the first change, never mutated in place
    own_pending = False
    changed = False
    for event in events:
        kind = event.type
        if kind not in _TYPES:
            continue
        if kind == "step/start":
            values["steps"] += 1
            values["request_start"] = event.time
            changed = True
            continue
        data = event.data
        if not isinstance(data, dict):
            continue
        if kind in _MODEL_CALLS:
            start = values["request_start"]
            if kind == "assistant/attempt":
                values["failed_model_calls"] += 1
                values["request_start"] = event.time  # a retry is dispatched after this one settled
            else:
                values["model_calls"] += 1
                values["request_start"] = None
            if start is not None:
                values["model_ms"] += max(0, event.time - start)
                first = first_time(data.get("stream"))
                if first is not None:
                    values["ttft_ms"] += max(0, first - start)
                    values["ttft_count"] += 1
        elif kind == "tool/call":
            values["tool_calls"] += 1
            call_id = data.get("callId")
            if isinstance(call_id, str):
                if not own_pending:
                    pending, own_pending = dict(pending), True
                pending[call_id] = event.time
        elif kind == "tool/result":
            if event.surface_op != "append":
                continue
            message = data.get("message")
            values["tool_results"] += 1
            if isinstance(message, dict) and message.get("isError") is True:
                values["tool_errors"] += 1
            call_id = message.get("toolCallId") if isinstance(message, dict) else None
            if isinstance(call_id, str) and call_id in pending:
                if not own_pending:
                    pending, own_pending = dict(pending), True
                values["tool_ms"] += max(0, event.time - pending.pop(call_id))
        elif kind == "llm/retry-started":
            start = values["request_start"]
            if start is not None and start >= event.time:
                continue
            values["request_start"] = event.time
        elif kind == "turn/start":
            values["turns"] += 1
            values["last_outcome"] = None
        else:  # turn/end
            reason = data.get("reason")
            outcome = reason.get("kind") if isinstance(reason, dict) else None
            values["last_outcome"] = outcome if isinstance(outcome, str) else None
            if pending or values["request_start"] is not None:
                pending, own_pending = {}, True
                values["request_start"] = None
        changed = True
    if not changed:
        return state
    values["pending_tools"] = pending
    return state.evolve(**values)


def apply_stats(state: StatsState, event: SessionEvent) -> StatsState:
    return fold_stats(state, (event,))


STATS: ProjectionDefinition[StatsState] = ProjectionDefinition(
    key="stats",
    state_version=2,
    state_schema=StatsState,
    init=StatsState,
    apply=apply_stats,
    types=_TYPES,
    apply_many=fold_stats,
)
"""Turns, steps, model and tool calls, tool errors, model time, tool time, time to first token."""
