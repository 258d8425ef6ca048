"""An agent's hooks, turned into its session's spans (what the log alone cannot say: when things start and end).

The handlers run inside the agent's turn, so each one swallows and logs its own
failures: telemetry that breaks a turn would be worse than telemetry that misses a
span. The agent is held weakly, through its hooks, never by the trace.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from dshpy.telemetry.session_trace import SessionTrace

__all__ = ["AgentObserver"]

log = logging.getLogger("dshpy.telemetry")


def _quiet(handler: Callable[[Any], None]) -> Callable[[Any], None]:
    def run(payload: Any) -> None:
        try:
            handler(payload)
        except Exception:
            log.exception("telemetry failed in an agent hook (%s)", type(payload).__name__)

    return run


class AgentObserver:
    """Subscribes one agent's ``model-request``, ``tool-start``, ``tool-end`` and ``turn-end`` hooks to a trace."""

    def __init__(self, agent: Any, trace: SessionTrace) -> None:
        self._trace = trace
        trace.attach_agent(agent)
        self._removers = [
            agent.on("model-request", _quiet(self._model_request)),
            agent.on("tool-start", _quiet(self._tool_start)),
            agent.on("tool-end", _quiet(self._tool_end)),
            agent.on("turn-end", _quiet(self._turn_end)),
        ]

    def close(self) -> None:
        """Unsubscribe the hooks (telemetry was turned off)."""
        for remove in self._removers:
            remove()
        self._removers = []

    def _model_request(self, payload: Any) -> None:
        self._trace.model_request(payload.agent, payload.step, payload.attempt, payload.messages, payload.response)

    def _tool_start(self, payload: Any) -> None:
        self._trace.tool_start(payload.agent, payload.step, payload.call_id, payload.name, payload.arguments)

    def _tool_end(self, payload: Any) -> None:
        self._trace.tool_end(payload.call_id, payload.outcome)

    def _turn_end(self, payload: Any) -> None:
        self._trace.end_turn(payload.error)
