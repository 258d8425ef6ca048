"""Derived session messages → chat-completions messages: exactly what the model is sent.

The agent builds every request from ``session.derive_messages()`` through
:func:`to_chat_messages` and nothing else, so the log determines the request: the
end-to-end tests check the server received exactly this conversion.

The mapping:

* ``system`` → ``{"role": "system", "content": text}`` (an empty system prompt derives to no message);
* ``developer`` → ``role: "system"`` (DeepSeek and most compatible servers have no developer role),
  ``tool-addition`` / ``tool-removal`` blocks as ``[tool added: name]`` lines;
* ``user`` → ``{"role": "user", "content": text}``;
* ``assistant`` → ``{"role": "assistant", "content": text or None, "tool_calls": [...]}``, plus
  ``reasoning_content`` (see below);
* ``tool`` → ``{"role": "tool", "tool_call_id": id, "content": text}``.

Text blocks of one message are joined with a blank line (assistant text: joined as
streamed). Blocks a text-only endpoint cannot take (images, files) become a short
``[image omitted]`` placeholder rather than disappearing silently.

**Reasoning.** DeepSeek's thinking models need the ``reasoning_content`` of the
assistant messages *of the current turn* sent back while a tool-calling turn goes on,
and must not (older models: may not) get it for earlier turns. With the default
``reasoning="latest-turn"`` an assistant message carries ``reasoning_content`` exactly
when it comes after the last human prompt (the last ``user`` message whose source
kind is ``user``); ``"none"`` never sends it, ``"all"`` always does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from dshpy.log.messages import Message

__all__ = ["ChatHistory", "ReasoningReplay", "to_chat_messages"]

ReasoningReplay = Literal["latest-turn", "none", "all"]


def _placeholder(block: Any) -> str | None:
    kind = block.get("type")
    if kind == "text":
        return str(block["text"])
    if kind == "tool-addition":
        return f"[tool added: {block['toolName']}]"
    if kind == "tool-removal":
        return f"[tool removed: {block['toolName']}]"
    if kind in ("image", "file"):
        attachment = block.get("attachment") or {}
        name = attachment.get("name") if isinstance(attachment, dict) else None
        return f"[{kind} omitted{': ' + name if isinstance(name, str) and name else ''}]"
    return None


def _text(content: Sequence[Any], separator: str = "\n\n") -> str:
    parts = [text for text in (_placeholder(block) for block in content) if text is not None]
    return separator.join(parts)


def _is_human_prompt(message: Message) -> bool:
    source = message.source
    return message.role == "user" and isinstance(source, dict) and source.get("kind") == "user"


def _latest_prompt(messages: Sequence[Message]) -> int:
    for position in range(len(messages) - 1, -1, -1):
        if _is_human_prompt(messages[position]):
            return position
    return -1


def _convert(message: Message) -> tuple[dict[str, Any], str]:
    """One message's chat entry, and its reasoning text (sent only where the replay rule says)."""
    role = message.role
    content = message.content
    if role in ("system", "developer"):
        return {"role": "system", "content": _text(content)}, ""
    if role == "tool":
        return {"role": "tool", "tool_call_id": str(message.data["toolCallId"]), "content": _text(content)}, ""
    if role != "assistant":  # user, or a role a later format may add: shown as user text rather than dropped
        return {"role": "user", "content": _text(content)}, ""
    text = "".join(str(b["text"]) for b in content if b.get("type") == "text")
    calls = [
        {"id": str(b["id"]), "type": "function", "function": {"name": str(b["name"]), "arguments": str(b["arguments"])}}
        for b in content
        if b.get("type") == "tool-call"
    ]
    entry: dict[str, Any] = {"role": "assistant", "content": text if text or not calls else None}
    if calls:
        entry["tool_calls"] = calls
    return entry, "".join(str(b["text"]) for b in content if b.get("type") == "reasoning")


def _assemble(
    messages: Sequence[Message], converted: Sequence[tuple[dict[str, Any], str]], reasoning: ReasoningReplay
) -> list[dict[str, Any]]:
    latest = _latest_prompt(messages) if reasoning == "latest-turn" else -1
    out: list[dict[str, Any]] = []
    for position, (entry, thinking) in enumerate(converted):
        if thinking and (reasoning == "all" or (reasoning == "latest-turn" and position > latest)):
            out.append({**entry, "reasoning_content": thinking})
        else:
            out.append(entry)
    return out


def to_chat_messages(
    messages: Sequence[Message], *, reasoning: ReasoningReplay = "latest-turn"
) -> list[dict[str, Any]]:
    """The chat-completions ``messages`` for a derived history (see the module docstring)."""
    return _assemble(messages, [_convert(message) for message in messages], reasoning)


class ChatHistory:
    """:func:`to_chat_messages` with a per-message cache, for a loop that converts a growing history every step.

    A message is converted once: the event at a seq never changes, so its entry is
    cached by seq (a surface replace only changes *which* seqs are in the history).
    Returned entries are shared between calls and must not be mutated.
    """

    __slots__ = ("_cache", "reasoning")

    def __init__(self, reasoning: ReasoningReplay = "latest-turn") -> None:
        self.reasoning: ReasoningReplay = reasoning
        self._cache: dict[int, tuple[dict[str, Any], str]] = {}

    def convert(self, messages: Sequence[Message]) -> list[dict[str, Any]]:
        cache = self._cache
        converted = []
        for message in messages:
            entry = cache.get(message.seq)
            if entry is None:
                entry = cache[message.seq] = _convert(message)
            converted.append(entry)
        return _assemble(messages, converted, self.reasoning)
