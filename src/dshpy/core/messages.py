"""Typed shapes of messages, content blocks, token usage and packed model streams (dsh v4).

These are ``TypedDict`` s: stored data stays plain (frozen) JSON, so reading a field
costs nothing and the wire shape is exactly dsh's, while type checkers and pydantic
(see :mod:`dshpy.core.validation`) know the fields. Unknown extra keys are allowed
everywhere, because dsh lets producers add fields and we must carry them unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal, NotRequired

from pydantic import Discriminator, Tag
from typing_extensions import TypedDict

__all__ = [
    "AssistantMessage",
    "AssistantStreamRecord",
    "ChunkRecord",
    "ContentBlock",
    "DeveloperMessage",
    "FileBlock",
    "ImageBlock",
    "LlmFailure",
    "MessageData",
    "MessageSource",
    "OtherBlock",
    "OtherRecord",
    "ReasoningBlock",
    "Role",
    "StreamRunRecord",
    "SystemMessage",
    "TextBlock",
    "TokenUsage",
    "ToolAdditionBlock",
    "ToolCallBlock",
    "ToolCallRunRecord",
    "ToolRemovalBlock",
    "ToolResultMessage",
    "TurnEndReason",
    "UserMessage",
]

Role = Literal["system", "developer", "user", "assistant", "tool"]


class TextBlock(TypedDict):
    type: Literal["text"]
    text: str


class ReasoningBlock(TypedDict):
    type: Literal["reasoning"]
    text: str


class ImageBlock(TypedDict):
    type: Literal["image"]
    attachment: dict[str, Any]
    offloaded: NotRequired[bool]


class FileBlock(TypedDict):
    type: Literal["file"]
    attachment: dict[str, Any]


class ToolCallBlock(TypedDict):
    type: Literal["tool-call"]
    id: str
    name: str
    arguments: str
    """The raw JSON text the model produced; parsed only by the tool runner."""


class ToolAdditionBlock(TypedDict):
    type: Literal["tool-addition"]
    toolName: str


class ToolRemovalBlock(TypedDict):
    type: Literal["tool-removal"]
    toolName: str


class OtherBlock(TypedDict):
    """A block type this build does not interpret (``plugin:*`` and future types); kept verbatim."""

    type: str


_BLOCK_TYPE_TAGS = {
    kind: kind for kind in ("text", "reasoning", "image", "file", "tool-call", "tool-addition", "tool-removal")
}
_BLOCK_TAGS = frozenset(_BLOCK_TYPE_TAGS)


def _block_tag(value: Any) -> str | None:
    kind = value.get("type") if isinstance(value, dict) else None
    if not isinstance(kind, str):
        return None
    return kind if kind in _BLOCK_TAGS else "other"


ContentBlock = Annotated[
    Annotated[TextBlock, Tag("text")]
    | Annotated[ReasoningBlock, Tag("reasoning")]
    | Annotated[ImageBlock, Tag("image")]
    | Annotated[FileBlock, Tag("file")]
    | Annotated[ToolCallBlock, Tag("tool-call")]
    | Annotated[ToolAdditionBlock, Tag("tool-addition")]
    | Annotated[ToolRemovalBlock, Tag("tool-removal")]
    | Annotated[OtherBlock, Tag("other")],
    Discriminator(
        _block_tag, custom_error_type="invalid_block", custom_error_message="content block needs a string type"
    ),
]
"""A content block; known types are checked field by field, unknown ones only for a string ``type``."""


class MessageSource(TypedDict):
    """Who produced a message; ``kind`` names the producer (``user``, ``model``, ``tool``, …)."""

    kind: str


class _MessageBase(TypedDict):
    id: str
    content: list[ContentBlock]
    source: MessageSource


class UserMessage(_MessageBase):
    role: Literal["user"]


class SystemMessage(_MessageBase):
    role: Literal["system"]


class DeveloperMessage(_MessageBase):
    role: Literal["developer"]


class AssistantMessage(_MessageBase):
    role: Literal["assistant"]


class ToolResultMessage(_MessageBase):
    role: Literal["tool"]
    toolCallId: str
    isError: NotRequired[bool]


MessageData = UserMessage | SystemMessage | DeveloperMessage | AssistantMessage | ToolResultMessage


class TokenUsage(TypedDict):
    """Disjoint token buckets: billed input = input + cacheRead + cacheWrite; reasoning ⊂ output."""

    inputTokens: int
    outputTokens: int
    cacheReadTokens: NotRequired[int]
    cacheWriteTokens: NotRequired[int]
    reasoningTokens: NotRequired[int]
    totalTokens: NotRequired[int]


class LlmFailure(TypedDict):
    message: str
    code: str
    status: NotRequired[int]
    providerRetryAfterMs: NotRequired[int]
    requestId: NotRequired[str]


class TurnEndReason(TypedDict):
    """``{kind}`` plus ``reason`` (aborted) or ``error`` (error) as dsh v4 writes them."""

    kind: Literal["completed", "aborted", "blocked", "error", "max-tokens", "interrupted", "forked"]
    reason: NotRequired[dict[str, Any]]
    error: NotRequired[LlmFailure]


class ChunkRecord(TypedDict):
    """One stream chunk kept verbatim (block-start, block-end, usage, finish, …)."""

    type: Literal["chunk"]
    time: int
    chunk: dict[str, Any]


class StreamRunRecord(TypedDict):
    """A run of text or reasoning deltas of one block; member k's time is time0 + sum(dt[:k])."""

    type: Literal["text-chunks", "reasoning-chunks"]
    time0: int
    index: int
    dt: list[int]
    texts: list[str]


class ToolCallRunRecord(TypedDict):
    """A run of argument deltas of one tool call; ``name`` presence splits runs."""

    type: Literal["tool-call-chunks"]
    time0: int
    index: int
    dt: list[int]
    id: str
    name: NotRequired[str]
    args: list[str]


class OtherRecord(TypedDict):
    """A stream record type this build does not interpret; kept verbatim."""

    type: str


_RECORD_TYPE_TAGS = {
    "chunk": "chunk",
    "text-chunks": "run",
    "reasoning-chunks": "run",
    "tool-call-chunks": "tool-call-chunks",
}
_RECORD_TAGS = frozenset(_RECORD_TYPE_TAGS)


def _record_tag(value: Any) -> str | None:
    kind = value.get("type") if isinstance(value, dict) else None
    if not isinstance(kind, str):
        return None
    if kind in ("text-chunks", "reasoning-chunks"):
        return "run"
    return kind if kind in _RECORD_TAGS else "other"


AssistantStreamRecord = Annotated[
    Annotated[ChunkRecord, Tag("chunk")]
    | Annotated[StreamRunRecord, Tag("run")]
    | Annotated[ToolCallRunRecord, Tag("tool-call-chunks")]
    | Annotated[OtherRecord, Tag("other")],
    Discriminator(
        _record_tag, custom_error_type="invalid_record", custom_error_message="stream record needs a string type"
    ),
]
"""One packed stream record (dsh's ``AssistantStreamRecord``); expanding the runs gives the exact timed chunks."""

TYPE_TAGS: dict[Callable[[Any], str | None], dict[str, str]] = {
    _block_tag: _BLOCK_TYPE_TAGS,
    _record_tag: _RECORD_TYPE_TAGS,
}
"""For each callable discriminator above, the ``type`` values it sends to a checked shape, with that tag.

The discriminators send every other value to the ``other`` shape (or refuse it). Knowing the table,
:mod:`dshpy.core.validation` builds a union keyed on ``type`` itself, which pydantic-core resolves
without a Python call per block or record, and falls back to these unions for anything else."""
