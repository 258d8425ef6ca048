"""Derived session messages → Anthropic Messages ``system`` + ``messages``, as dsh's DeepSeek adapter sends them.

The mapping (dsh ``dsh-llm-deepseek`` ``serialize``):

* the system prompt becomes the request's ``system`` field. In the converted list it
  is the first entry, ``{"role": "system", "content": "<text>"}`` (string content);
  :class:`~dshpy.llm.anthropic.AnthropicClient` moves it into ``system``;
* ``developer`` messages (tool-registry changes, notices) become in-history system
  updates ``{"role": "system", "content": [blocks]}`` placed after the preceding user
  turn, as DeepSeek's Messages API takes them;
* ``user`` → ``{"role": "user", "content": [text blocks]}``; ``tool`` results →
  ``tool_result`` blocks (``tool_use_id``, ``content``, ``is_error``) in a user turn,
  first in it; consecutive turns of one role merge into one;
* ``assistant`` → ``text`` (non-empty), ``thinking`` and ``tool_use`` (``input`` parsed
  from the logged arguments; unparsable history arguments become ``{}``).

**Thinking signatures.** A thinking block is sent with the ``signature`` the provider
gave it, read from the message's ``source.replayState`` (the blocks listed there align
with the content by index). dsh refuses to replay a state that is malformed, written
for another kind of response, or for a different model than the one now asked (a
signature does not carry over between models): the thinking text is then sent
without a signature. ``reasoning="none"`` drops thinking blocks altogether (a
summary request); otherwise every thinking block is sent, as dsh sends them.

Images and files a text request cannot carry become a ``[image omitted]`` text, as in
the chat-completions mapping.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from dshpy.llm.anthropic_mapping import REPLAY_KIND
from dshpy.llm.messages import ReasoningReplay, _placeholder
from dshpy.log.messages import Message

__all__ = ["MessagesHistory", "replay_blocks", "to_messages"]


def replay_blocks(message: Message, model: str) -> list[dict[str, Any]] | None:
    """The replay entries of an assistant message, index-aligned with its content; ``None`` if unusable."""
    source = message.source
    if not isinstance(source, dict) or source.get("kind") != "model":
        return None
    state = source.get("replayState")
    if not isinstance(state, dict):
        return None
    response = state.get("response")
    blocks = state.get("blocks")
    if not isinstance(response, dict) or response.get("kind") != REPLAY_KIND or response.get("version") != 1:
        return None
    if response.get("model") != source.get("model") or response.get("model") != model:
        return None
    content = message.content
    if not isinstance(blocks, (list, tuple)) or len(blocks) != len(content):
        return None
    out = []
    for block, entry in zip(content, blocks, strict=True):
        if not isinstance(entry, dict) or entry.get("type") != block.get("type"):
            return None
        signature = entry.get("signature")
        if signature is not None and (entry.get("type") != "reasoning" or not isinstance(signature, str)):
            return None
        out.append(dict(entry))
    return out


def _tool_input(raw: Any) -> dict[str, Any]:
    try:
        value = orjson.loads(str(raw))
    except orjson.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def _texts(content: Sequence[Any]) -> list[dict[str, Any]]:
    blocks = []
    for block in content:
        if block.get("type") in ("reasoning", "tool-call"):
            continue
        text = _placeholder(block)
        if text:
            blocks.append({"type": "text", "text": text})
    return blocks


def _assistant(message: Message, model: str, reasoning: ReasoningReplay) -> list[dict[str, Any]]:
    replay = replay_blocks(message, model)
    out: list[dict[str, Any]] = []
    for index, block in enumerate(message.content):
        kind = block.get("type")
        if kind == "text":
            if block["text"]:
                out.append({"type": "text", "text": str(block["text"])})
        elif kind == "reasoning":
            if reasoning == "none":
                continue
            thinking: dict[str, Any] = {"type": "thinking", "thinking": str(block["text"])}
            signature = replay[index].get("signature") if replay is not None else None
            if isinstance(signature, str):
                thinking["signature"] = signature
            out.append(thinking)
        elif kind == "tool-call":
            out.append(
                {
                    "type": "tool_use",
                    "id": str(block["id"]),
                    "name": str(block["name"]),
                    "input": _tool_input(block["arguments"]),
                }
            )
    return out


def _convert(message: Message, model: str, reasoning: ReasoningReplay) -> dict[str, Any] | None:
    """One message's wire entry (``None``: nothing to send)."""
    role = message.role
    if role == "system":
        return {
            "role": "system",
            "content": "".join(str(b.get("text", "")) for b in message.content if b.get("type") == "text"),
        }
    if role == "developer":
        blocks = _texts(message.content)
        return {"role": "system", "content": blocks} if blocks else None
    if role == "tool":
        result: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": str(message.data["toolCallId"]),
            "content": _texts(message.content),
        }
        if message.data.get("isError") is not None:
            result["is_error"] = bool(message.data["isError"])
        return {"role": "user", "content": [result]}
    if role == "assistant":
        blocks = _assistant(message, model, reasoning)
        return {"role": "assistant", "content": blocks} if blocks else None
    blocks = _texts(message.content)
    return {"role": "user", "content": blocks} if blocks else None


def _assemble(entries: Sequence[dict[str, Any] | None]) -> list[dict[str, Any]]:
    system: str | None = None
    messages: list[dict[str, Any]] = []
    updates: list[dict[str, Any]] = []
    for entry in entries:
        if entry is None:
            continue
        if entry["role"] == "system":
            if isinstance(entry["content"], str):
                if not messages:
                    system = entry["content"]
                elif entry["content"]:
                    updates.append({"role": "system", "content": [{"type": "text", "text": entry["content"]}]})
            else:
                updates.append(entry)
            continue
        if entry["role"] == "assistant" and updates and messages and messages[-1]["role"] == "user":
            messages.extend(updates)
            updates = []
        previous = messages[-1] if messages else None
        if previous is not None and previous["role"] == entry["role"]:
            previous["content"] = [*previous["content"], *entry["content"]]
        else:
            messages.append({"role": entry["role"], "content": list(entry["content"])})
    if updates and messages and messages[-1]["role"] == "user":
        messages.extend(updates)
    for message in messages:  # tool results lead their user turn, as the API requires
        if message["role"] == "user":
            content = message["content"]
            results = [b for b in content if b.get("type") == "tool_result"]
            if results and content[: len(results)] != results:
                message["content"] = [*results, *(b for b in content if b.get("type") != "tool_result")]
    return ([{"role": "system", "content": system}] if system else []) + messages


def to_messages(
    messages: Sequence[Message], model: str, *, reasoning: ReasoningReplay = "latest-turn"
) -> list[dict[str, Any]]:
    """The converted history for ``model`` (system prompt first; see the module docstring)."""
    return _assemble([_convert(message, model, reasoning) for message in messages])


class MessagesHistory:
    """:func:`to_messages` with a per-message cache, for a loop that converts a growing history every step.

    The same interface as :class:`~dshpy.llm.messages.ChatHistory`: the event at a seq
    never changes, so each message is converted once (merging consecutive turns is
    redone per call; it copies lists, never the cached entries).
    """

    __slots__ = ("_cache", "model", "reasoning")

    def __init__(self, model: str, reasoning: ReasoningReplay = "latest-turn") -> None:
        self.model = model
        self.reasoning: ReasoningReplay = reasoning
        self._cache: dict[tuple[int, ReasoningReplay], dict[str, Any] | None] = {}

    def convert(self, messages: Sequence[Message]) -> list[dict[str, Any]]:
        cache = self._cache
        entries = []
        for message in messages:
            key = (message.seq, self.reasoning)
            if key not in cache:
                cache[key] = _convert(message, self.model, self.reasoning)
            entries.append(cache[key])
        return _assemble(entries)
