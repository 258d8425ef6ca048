"""``stats``: how much work a session did and where the time went.

Counts:

* ``turns`` — ``turn/start`` events (a turn that is still open counts);
* ``steps`` — ``step/start`` events;
* ``model_calls`` / ``failed_model_calls`` — ``assistant/message`` / ``assistant/attempt``;
* ``tool_calls`` — ``tool/call`` events (calls that started);
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
  and are not counted. Mean TTFT is ``ttft_ms / ttft_count``; decode time is
  ``model_ms - ttft_ms`` over the same calls.
* ``tool_ms`` — each ``tool/call`` → the appended ``tool/result`` with its ``callId``.
  Calls still running are kept in ``pending_tools`` (callId → start time) and
  forgotten at ``turn/end``, as dsh does; results without a logged call (a call that
  never started) have no duration.
"""

from __future__ import annotations

from typing import Any

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
    request_start: int | None = None
    """Internal: start time of the model request in flight in the open step, if any."""
    pending_tools: dict[str, int] = Field(default_factory=dict)
    """Internal: started tool calls without a result yet, callId → ``tool/call`` time."""


def _model_call(state: StatsState, event: SessionEvent, data: dict[str, Any], *, failed: bool) -> StatsState:
    update: dict[str, Any] = {}
    if failed:
        update["failed_model_calls"] = state.failed_model_calls + 1
        update["request_start"] = event.time  # a retry is dispatched after this one settled
    else:
        update["model_calls"] = state.model_calls + 1
        update["request_start"] = None
    start = state.request_start
    if start is not None:
        update["model_ms"] = state.model_ms + max(0, event.time - start)
        first = first_time(data.get("stream"))
        if first is not None:
            update["ttft_ms"] = state.ttft_ms + max(0, first - start)
            update["ttft_count"] = state.ttft_count + 1
    return state.evolve(**update)


def apply_stats(state: StatsState, event: SessionEvent) -> StatsState:
    kind = event.type
    data = event.data
    if kind == "step/start":
        return state.evolve(steps=state.steps + 1, request_start=event.time)
    if not isinstance(data, dict):
        return state
    if kind == "assistant/message":
        return _model_call(state, event, data, failed=False)
    if kind == "assistant/attempt":
        return _model_call(state, event, data, failed=True)
    if kind == "tool/call":
        call_id = data.get("callId")
        update: dict[str, Any] = {"tool_calls": state.tool_calls + 1}
        if isinstance(call_id, str):
            update["pending_tools"] = {**state.pending_tools, call_id: event.time}
        return state.evolve(**update)
    if kind == "tool/result":
        if event.surface_op != "append":
            return state
        message = data.get("message")
        failed = isinstance(message, dict) and message.get("isError") is True
        update = {"tool_results": state.tool_results + 1}
        if failed:
            update["tool_errors"] = state.tool_errors + 1
        call_id = message.get("toolCallId") if isinstance(message, dict) else None
        if isinstance(call_id, str) and call_id in state.pending_tools:
            pending = dict(state.pending_tools)
            started = pending.pop(call_id)
            update["pending_tools"] = pending
            update["tool_ms"] = state.tool_ms + max(0, event.time - started)
        return state.evolve(**update)
    if kind == "llm/retry-started":
        start = state.request_start
        if start is not None and start >= event.time:
            return state
        return state.evolve(request_start=event.time)
    if kind == "turn/start":
        return state.evolve(turns=state.turns + 1)
    if kind == "turn/end":
        if not state.pending_tools and state.request_start is None:
            return state
        return state.evolve(pending_tools={}, request_start=None)
    return state


STATS: ProjectionDefinition[StatsState] = ProjectionDefinition(
    key="stats",
    state_version=1,
    state_schema=StatsState,
    init=StatsState,
    apply=apply_stats,
    types=frozenset(
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
    ),
)
"""Turns, steps, model and tool calls, tool errors, model time, tool time, time to first token."""
