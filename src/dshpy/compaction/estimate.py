"""The token price of a message, as dsh's token meter prices it (``dsh-token-meter/estimate``).

No tokenizer: a fixed density of 4 characters per token plus 4 tokens of structure
per content block and per message. It is cheap, needs no model-specific data, and —
because the same numbers are written into ``compaction/summary`` and
``compaction/prune`` (``shadowedTokenCount``) — it must price the same content to
the same number dsh does, or a dsh reader folding those prices would drift from
ours. So lengths are counted as JavaScript counts them: UTF-16 code units, an astral
character being two. Provider-reported usage corrects the estimate where it
exists (see :mod:`dshpy.compaction.meter`).

The rules (0.2.1rc2):

* text and reasoning blocks: ``ceil(len / 4) + 4``;
* a tool-call block: ``ceil(len(name) / 4) + ceil(len(arguments) / 4) + 4``;
* any other block (image, file, plugin blocks): ``4 + ceil(len(JSON) / 4)`` of its
  compact JSON (an image without its ``offloaded`` mark);
* a message: its blocks + 4; a system message is priced as one string (its text,
  other blocks as JSON) + 4, and an empty one costs nothing;
* the tool schemas of a request: ``ceil(len(JSON of the list) / 4) + 4``, nothing
  when there are none.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dshpy.core.json import dumps

__all__ = [
    "BLOCK_OVERHEAD",
    "CHARS_PER_TOKEN",
    "estimate_content",
    "estimate_message",
    "estimate_tools",
    "utf16_length",
]

CHARS_PER_TOKEN = 4
"""Characters (UTF-16 code units) per token."""

BLOCK_OVERHEAD = 4
"""Structural tokens per content block, and per message for its role framing."""


def utf16_length(text: str) -> int:
    """``text.length`` in JavaScript: astral characters count twice."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _tokens(length: int) -> int:
    return -(-length // CHARS_PER_TOKEN)


def _json_length(value: Any) -> int:
    """The length of ``JSON.stringify(value)`` (compact; non-ASCII kept, lone surrogates escaped)."""
    return utf16_length(dumps(value).decode())


def _structural(block: Mapping[str, Any]) -> int:
    if block.get("type") == "image" and "offloaded" in block:
        block = {key: value for key, value in block.items() if key != "offloaded"}
    return BLOCK_OVERHEAD + _tokens(_json_length(block))


def estimate_content(blocks: Sequence[Mapping[str, Any]]) -> int:
    """The price of content blocks, structure included."""
    tokens = 0
    for block in blocks:
        kind = block.get("type")
        if kind in ("text", "reasoning"):
            tokens += _tokens(utf16_length(block["text"])) + BLOCK_OVERHEAD
        elif kind == "tool-call":
            tokens += _tokens(utf16_length(block["name"])) + _tokens(utf16_length(block["arguments"])) + BLOCK_OVERHEAD
        else:
            tokens += _structural(block)
    return tokens


def estimate_message(message: Mapping[str, Any]) -> int:
    """The price of one model-visible message (``{role, content, ...}``)."""
    content: Sequence[Mapping[str, Any]] = message["content"]
    if message["role"] != "system":
        return estimate_content(content) + BLOCK_OVERHEAD
    if not content:
        return 0  # an empty prompt is "no system prompt"
    length = 0
    for block in content:
        length += utf16_length(block["text"]) if block.get("type") == "text" else _json_length(block)
    return _tokens(length) + BLOCK_OVERHEAD


def estimate_tools(tools: Sequence[Any] | None) -> int:
    """The price of a request's tool schemas (0 without any)."""
    if not tools:
        return 0
    return _tokens(_json_length(list(tools))) + BLOCK_OVERHEAD
