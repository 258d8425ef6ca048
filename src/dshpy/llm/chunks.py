"""dsh's ``StreamChunk`` vocabulary: what a model stream is made of, provider-independently.

A provider adapter turns its wire format into these chunks; everything downstream
(the live callbacks, the packed ``assistant/message.data.stream``, the message
content) is built from them alone, so one adapter is all a new wire format needs.

* ``block-start {index, blockType}`` — a content block opens (``text``, ``reasoning``, ``tool-call``);
* ``text-delta {index, text}`` / ``reasoning-delta {index, text}`` — text arrives;
* ``tool-call-delta {index, id, name?, argumentsDelta}`` — a tool call's name (first delta) and argument text;
* ``block-end {index, block}`` — the block is complete; ``block`` is the content block itself;
* ``usage {usage}`` — the provider's (cumulative) ``TokenUsage``;
* ``finish {reason}`` — ``stop``, ``tool-calls``, ``max-tokens``, or ``error``/``aborted`` with a failure.

Chunks are plain dicts in dsh's exact JSON shape, because they are stored verbatim.
"""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

__all__ = [
    "BlockType",
    "FinishKind",
    "StreamChunk",
    "block_end",
    "block_start",
    "finish",
    "reasoning_delta",
    "text_delta",
    "tool_call_delta",
    "usage_chunk",
]

StreamChunk: TypeAlias = dict[str, Any]
"""One chunk, e.g. ``{"type": "text-delta", "index": 0, "text": "Hi"}``."""

BlockType = Literal["text", "reasoning", "tool-call"]
FinishKind = Literal["stop", "tool-calls", "max-tokens", "error", "aborted"]


def block_start(index: int, block_type: BlockType) -> StreamChunk:
    return {"type": "block-start", "index": index, "blockType": block_type}


def text_delta(index: int, text: str) -> StreamChunk:
    return {"type": "text-delta", "index": index, "text": text}


def reasoning_delta(index: int, text: str) -> StreamChunk:
    return {"type": "reasoning-delta", "index": index, "text": text}


def tool_call_delta(index: int, call_id: str, arguments_delta: str, name: str | None = None) -> StreamChunk:
    chunk: StreamChunk = {"type": "tool-call-delta", "index": index, "id": call_id}
    if name is not None:
        chunk["name"] = name
    chunk["argumentsDelta"] = arguments_delta
    return chunk


def block_end(index: int, block: dict[str, Any]) -> StreamChunk:
    return {"type": "block-end", "index": index, "block": block}


def usage_chunk(usage: dict[str, Any]) -> StreamChunk:
    return {"type": "usage", "usage": usage}


def finish(kind: FinishKind, failure: dict[str, Any] | None = None) -> StreamChunk:
    """``finish``; ``error`` and ``aborted`` carry the ``LlmFailure`` that ended the attempt."""
    reason: dict[str, Any] = {"kind": kind}
    if failure is not None:
        reason["failure"] = failure
    return {"type": "finish", "reason": reason}
