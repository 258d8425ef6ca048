"""Prompts, answers and tool I/O in the GenAI conventions' message shapes — recorded only when asked for.

Content is off by default: prompts and outputs are sensitive and large. Turned on
(``capture_content=True``, ``dshpy run --otel-capture-content`` or
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``), the ``chat`` span gets
``gen_ai.input.messages`` / ``gen_ai.output.messages`` and the ``execute_tool`` span
``gen_ai.tool.call.arguments`` / ``gen_ai.tool.call.result``, each as a JSON string
(the Python SDK has no structured span attributes yet, which the conventions allow for).

A :data:`Redactor` sees every value first, in its structured form, as the conventions'
upload hook does: it returns the value to record (the same, trimmed, masked) or
``None`` to record nothing. A redactor that raises records nothing for that value: a
broken redaction rule must not leak what it was meant to hide.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["ContentCapture", "Redactor", "input_messages", "output_messages", "tool_result"]

log = logging.getLogger("dshpy.telemetry")

Redactor = Callable[[str, Any], Any]
"""``redact(attribute, value)``: the value to record under ``attribute`` (possibly changed), or ``None`` for none."""


def _parts_of_chat(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One chat-completions message (as sent) as convention parts: text, reasoning, tool calls, tool responses."""
    parts: list[dict[str, Any]] = []
    reasoning = message.get("reasoning_content")
    if isinstance(reasoning, str) and reasoning:
        parts.append({"type": "reasoning", "content": reasoning})
    content = message.get("content")
    if message.get("role") == "tool":
        parts.append({"type": "tool_call_response", "id": message.get("tool_call_id"), "response": content})
        return parts
    if isinstance(content, str):
        if content:
            parts.append({"type": "text", "content": content})
    elif isinstance(content, list):
        parts.extend(_parts_of_blocks(content))
    for call in message.get("tool_calls") or ():
        function = call.get("function") if isinstance(call, Mapping) else None
        if isinstance(function, Mapping):
            parts.append(
                {
                    "type": "tool_call",
                    "id": call.get("id"),
                    "name": function.get("name"),
                    "arguments": function.get("arguments"),
                }
            )
    return parts


def _parts_of_blocks(content: Iterable[Any]) -> list[dict[str, Any]]:
    """Content blocks as sent (chat text parts, or the Messages API's thinking, tool_use, tool_result) as parts."""
    parts: list[dict[str, Any]] = []
    for block in content:
        kind = block.get("type") if isinstance(block, Mapping) else None
        if kind == "text":
            parts.append({"type": "text", "content": block.get("text", "")})
        elif kind == "thinking":
            parts.append({"type": "reasoning", "content": block.get("thinking", "")})
        elif kind == "tool_use":
            arguments = block.get("input")
            parts.append(
                {"type": "tool_call", "id": block.get("id"), "name": block.get("name"), "arguments": arguments}
            )
        elif kind == "tool_result":
            response = "".join(b.get("text", "") for b in block.get("content") or () if isinstance(b, Mapping))
            parts.append({"type": "tool_call_response", "id": block.get("tool_use_id"), "response": response})
    return parts


def input_messages(messages: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The request's messages, in order, as ``gen_ai.input.messages`` items (``{role, parts}``)."""
    return [{"role": message.get("role"), "parts": _parts_of_chat(message)} for message in messages]


def output_messages(content: Iterable[Mapping[str, Any]], finish_reason: str) -> list[dict[str, Any]]:
    """An ``assistant/message``'s content blocks as the one ``gen_ai.output.messages`` item."""
    parts: list[dict[str, Any]] = []
    for block in content:
        kind = block.get("type")
        if kind == "text":
            parts.append({"type": "text", "content": block.get("text", "")})
        elif kind == "reasoning":
            parts.append({"type": "reasoning", "content": block.get("text", "")})
        elif kind == "tool-call":
            parts.append(
                {
                    "type": "tool_call",
                    "id": block.get("id"),
                    "name": block.get("name"),
                    "arguments": block.get("arguments"),
                }
            )
    return [{"role": "assistant", "parts": parts, "finish_reason": finish_reason}]


def tool_result(content: Iterable[Mapping[str, Any]]) -> str:
    """A tool result's text blocks, joined: what the model reads back."""
    return "".join(str(block.get("text", "")) for block in content if block.get("type") == "text")


class ContentCapture:
    """Whether content is recorded, and the redactor every value passes through first."""

    __slots__ = ("enabled", "redact")

    def __init__(self, enabled: bool, redact: Redactor | None = None) -> None:
        self.enabled = enabled
        self.redact = redact

    def value(self, attribute: str, value: Any) -> str | None:
        """The attribute value to record (a string; JSON for structures), or ``None`` to record nothing."""
        if not self.enabled:
            return None
        if self.redact is not None:
            try:
                value = self.redact(attribute, value)
            except Exception:
                log.warning("the telemetry redactor failed on %s; nothing recorded for it", attribute, exc_info=True)
                return None
        if value is None:
            return None
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
