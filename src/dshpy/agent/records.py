"""The data of the events the agent loop writes, in dsh v4's exact shapes and key order.

Key order is not semantics, but matching the real runtime's byte layout (checked
against tests/fixtures/dsh) keeps sessions diffable against dsh's own:
``user/message`` is ``{content, source, role, id}``, messages are ``{role, content,
source, id}``, a tool result message ``{role, source, toolCallId, content, isError,
id}``, ``assistant/message`` data ``{turn, step, message, usage, stream}``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dshpy.core.ids import new_message_id

__all__ = [
    "ABORTED_BEFORE_DISPATCH",
    "ABORTED_RUNNING",
    "assistant_data",
    "claim_splice",
    "insert_splice",
    "system_data",
    "tool_result_data",
    "user_message",
]

ABORTED_BEFORE_DISPATCH = "Error: tool call aborted before dispatch"
"""dsh's text for a call cancelled before its body started (``TOOL_ABORTED_BEFORE_DISPATCH``)."""

ABORTED_RUNNING = (
    "Error: the tool call was cancelled while it was running, so it may have done part of its work. "
    "Its outcome is unknown. Do not retry blindly."
)
"""Our text for a call cancelled while its body ran (``TOOL_ABORTED``)."""


def user_message(content: str | Sequence[Mapping[str, Any]], source: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A ``UserMessage``; ``source`` defaults to ``{"kind": "user"}`` (a human prompt)."""
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else [dict(b) for b in content]
    return {
        "content": blocks,
        "source": dict(source) if source is not None else {"kind": "user"},
        "role": "user",
        "id": new_message_id(),
    }


def insert_splice(target: str, start: int, messages: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``agent/inbox/spliced`` for messages queued into the ``next-turn`` or ``next-step`` inbox."""
    return {"target": target, "start": start, "inserted": [dict(m) for m in messages]}


def claim_splice(target: str, count: int) -> dict[str, Any]:
    """``agent/inbox/spliced`` for the loop taking ``count`` queued messages."""
    return {"target": target, "start": 0, "removedCount": count, "inserted": []}


def system_data(turn: int, step: int, text: str) -> dict[str, Any]:
    """``system/message``; an empty prompt still reserves surface node 0 (content ``[]``)."""
    return {
        "turn": turn,
        "step": step,
        "message": {
            "role": "system",
            "content": [{"type": "text", "text": text}] if text else [],
            "source": {"kind": "system-prompt"},
            "id": new_message_id(),
        },
    }


def assistant_data(
    turn: int,
    step: int,
    content: list[dict[str, Any]],
    *,
    provider: str,
    model: str,
    stream: list[dict[str, Any]],
    usage: Mapping[str, Any] | None,
    interrupted: bool = False,
) -> dict[str, Any]:
    data: dict[str, Any] = {
        "turn": turn,
        "step": step,
        "message": {
            "role": "assistant",
            "content": content,
            "source": {"kind": "model", "provider": provider, "model": model},
            "id": new_message_id(),
        },
    }
    if usage is not None:
        data["usage"] = dict(usage)
    data["stream"] = stream
    if interrupted:
        data["interrupted"] = True
    return data


def tool_result_data(
    turn: int,
    step: int,
    call_id: str,
    content: Sequence[Mapping[str, Any]],
    *,
    is_error: bool,
    error: Mapping[str, Any] | None = None,
    meta: Any = None,
) -> dict[str, Any]:
    data: dict[str, Any] = {
        "turn": turn,
        "step": step,
        "message": {
            "role": "tool",
            "source": {"kind": "tool", "callId": call_id},
            "toolCallId": call_id,
            "content": [dict(b) for b in content],
            "isError": is_error,
            "id": new_message_id(),
        },
    }
    if error is not None:
        data["error"] = dict(error)
    if meta is not None:
        data["meta"] = meta
    return data
