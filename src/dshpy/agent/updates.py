"""What a running turn tells its caller live, and what it returns when it ends.

Streaming output is delivered, never stored chunk by chunk: each model chunk goes to
the caller as a :class:`ChunkUpdate` the moment it arrives, while the log only gets
the packed stream once the attempt settles. Every appended event is also delivered
(:class:`EventUpdate`), so a UI can show tool calls, retries and the turn's end.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from dshpy.core.events import SessionEvent

__all__ = ["ChunkUpdate", "EventUpdate", "TurnResult", "Update", "add_usage"]

_BUCKETS = ("inputTokens", "outputTokens", "cacheReadTokens", "cacheWriteTokens", "reasoningTokens", "totalTokens")


@dataclass(frozen=True, slots=True)
class ChunkUpdate:
    """One model stream chunk (dsh ``StreamChunk``) of ``attempt`` (1, 2, … within the step)."""

    turn: int
    step: int
    attempt: int
    chunk: dict[str, Any]
    time: int

    @property
    def text(self) -> str:
        """The text of a ``text-delta`` (``""`` for every other chunk)."""
        return str(self.chunk.get("text", "")) if self.chunk.get("type") == "text-delta" else ""

    @property
    def reasoning(self) -> str:
        """The text of a ``reasoning-delta`` (``""`` for every other chunk)."""
        return str(self.chunk.get("text", "")) if self.chunk.get("type") == "reasoning-delta" else ""


@dataclass(frozen=True, slots=True)
class EventUpdate:
    """An event the agent appended to the session."""

    event: SessionEvent


Update = ChunkUpdate | EventUpdate


def add_usage(total: dict[str, int], usage: Any) -> None:
    """Add a ``TokenUsage`` object's buckets into ``total`` (in place)."""
    if not isinstance(usage, dict):
        return
    for bucket in _BUCKETS:
        value = usage.get(bucket)
        if type(value) is int:
            total[bucket] = total.get(bucket, 0) + value


@dataclass(slots=True)
class TurnResult:
    """How a turn ended.

    ``reason`` is the logged ``turn/end`` reason (``{"kind": "completed"}``, ``{"kind":
    "error", "error": LlmFailure}``, …); ``text`` the last assistant text of the turn;
    ``usage`` the tokens of every model call of the turn, failed attempts included.
    """

    session_id: str
    turn: int
    reason: dict[str, Any]
    text: str = ""
    steps: int = 0
    usage: dict[str, int] = field(default_factory=dict)
    events: list[SessionEvent] = field(default_factory=list)
    blocked_reason: str | None = None

    @property
    def kind(self) -> str:
        return str(self.reason["kind"])

    @property
    def error(self) -> dict[str, Any] | None:
        error = self.reason.get("error")
        return dict(error) if isinstance(error, dict) else None

    @property
    def ok(self) -> bool:
        """Completed (or stopped at the token limit) rather than failed, blocked or aborted."""
        return self.kind in ("completed", "max-tokens")

    def tool_results(self) -> Iterable[SessionEvent]:
        return (event for event in self.events if event.type == "tool/result")
