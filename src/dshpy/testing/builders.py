"""Builders for realistic event data, shared by tests, property strategies and benchmarks.

Each function returns plain ``data`` in dsh v4's shape; :class:`TurnScript` appends
whole turns (splice, turn/step brackets, messages, tool calls and results) in the
order dsh's agent loop writes them, so tests exercise the same logs real agents make.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from dshpy.core.events import SessionEvent
from dshpy.log import records
from dshpy.log.session import Session

__all__ = [
    "TurnScript",
    "assistant_data",
    "attempt_data",
    "system_data",
    "text_stream",
    "tool_result_data",
    "user_message",
]

_ids = itertools.count(1)


def _next_id(prefix: str) -> str:
    return f"{prefix}-{next(_ids)}"


def user_message(text: str, *, message_id: str | None = None, kind: str = "user") -> dict[str, Any]:
    """A ``user/message`` payload (the message object itself is the event data)."""
    return records.user_message(text, {"kind": kind}, message_id=message_id or _next_id("user"))


def system_data(turn: int, step: int, text: str) -> dict[str, Any]:
    return records.system_data(turn, step, text, message_id=_next_id("system"))


def text_stream(text: str, *, time0: int = 0, index: int = 0, pieces: int = 3) -> list[dict[str, Any]]:
    """A packed ``AssistantStreamRecord`` list for one text block streamed in ``pieces`` deltas."""
    size = max(1, len(text) // max(1, pieces))
    texts = [text[i : i + size] for i in range(0, len(text), size)] or [""]
    return [
        {"type": "chunk", "time": time0, "chunk": {"type": "block-start", "index": index, "blockType": "text"}},
        {"type": "text-chunks", "time0": time0, "index": index, "dt": [1] * (len(texts) - 1), "texts": texts},
        {
            "type": "chunk",
            "time": time0 + len(texts),
            "chunk": {"type": "block-end", "index": index, "block": {"type": "text", "text": text}},
        },
        {
            "type": "chunk",
            "time": time0 + len(texts),
            "chunk": {"type": "usage", "usage": {"inputTokens": 100, "outputTokens": 20}},
        },
        {"type": "chunk", "time": time0 + len(texts), "chunk": {"type": "finish", "reason": {"kind": "stop"}}},
    ]


def assistant_data(
    turn: int,
    step: int,
    text: str = "",
    *,
    tool_calls: Sequence[tuple[str, str, str]] = (),
    reasoning: str = "",
    usage: dict[str, int] | None = None,
) -> dict[str, Any]:
    """An ``assistant/message`` payload; ``tool_calls`` are ``(call id, name, arguments json)``."""
    content: list[dict[str, Any]] = []
    if reasoning:
        content.append({"type": "reasoning", "text": reasoning})
    if text:
        content.append({"type": "text", "text": text})
    content.extend({"type": "tool-call", "id": cid, "name": name, "arguments": args} for cid, name, args in tool_calls)
    return records.assistant_data(
        turn,
        step,
        content,
        provider="deepseek",
        model="deepseek-chat",
        stream=text_stream(text or "x"),
        usage=usage if usage is not None else {"inputTokens": 100, "outputTokens": 20, "cacheReadTokens": 0},
        message_id=_next_id("assistant"),
    )


def attempt_data(turn: int, step: int, partial: str = "par") -> dict[str, Any]:
    """An ``assistant/attempt`` payload: a failed try's partial stream (with its usage chunk)."""
    return records.attempt_data(turn, step, text_stream(partial)[:2] + text_stream(partial)[3:4])


def tool_result_data(turn: int, step: int, call_id: str, text: str, *, is_error: bool = False) -> dict[str, Any]:
    return records.tool_result_data(
        turn, step, call_id, [{"type": "text", "text": text}], is_error=is_error, message_id=_next_id("tool")
    )


class TurnScript:
    """Appends complete turns to a session in dsh's write order."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def turn(
        self,
        prompt: str = "hello",
        *,
        steps: int = 1,
        tools_per_step: int = 1,
        system: str | None = None,
        close: bool = True,
    ) -> list[SessionEvent]:
        """One turn of ``steps`` steps; every step but the last calls ``tools_per_step`` tools."""
        s = self.session
        turn = s.next_turn
        out: list[SessionEvent] = []
        message = user_message(prompt)
        out.append(s.append("agent/inbox/spliced", records.insert_splice("next-turn", 0, [message])))
        out.append(s.append("turn/start", {"turn": turn}))
        out.append(s.append("agent/inbox/spliced", records.claim_splice("next-turn", 1)))
        for step in range(1, steps + 1):
            out.append(s.append("step/start", {"turn": turn, "step": step}))
            if step == 1:
                if system is not None:
                    out.append(s.append("system/message", system_data(turn, step, system), surface_op="append"))
                out.append(s.append("user/message", message, surface_op="append"))
                context = records.request_context_data("deepseek", "deepseek-chat", 128000)
                out.append(s.append("request/context", context))
            last = step == steps
            calls = [] if last else [(_next_id("call"), "read_file", '{"path":"a.txt"}') for _ in range(tools_per_step)]
            out.append(
                s.append(
                    "assistant/message",
                    assistant_data(turn, step, f"step {step}", tool_calls=calls),
                    surface_op="append",
                )
            )
            for call_id, name, args in calls:
                call = s.append("tool/call", records.tool_call_data(turn, step, call_id, name, args))
                out.append(call)
                out.append(
                    s.append(
                        "tool/result",
                        tool_result_data(turn, step, call_id, "file contents " * 4),
                        surface_op="append",
                        source_event_seqs=[call.seq],
                    )
                )
            out.append(s.append("step/end", {"turn": turn, "step": step}))
        if close:
            out.append(s.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}}))
        return out
