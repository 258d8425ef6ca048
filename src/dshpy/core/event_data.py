"""Typed ``data`` of the event types dshpy interprets (dsh v4 ``SessionEventMap``).

Only the fields dshpy reads or dsh requires are declared; every shape admits extra
keys so that sessions written by other producers round-trip unchanged.
:data:`EVENT_DATA_SHAPES` maps each type to its shape for validation.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired

from typing_extensions import TypedDict

from dshpy.core.messages import (
    AssistantMessage,
    AssistantStreamRecord,
    ContentBlock,
    DeveloperMessage,
    SystemMessage,
    TokenUsage,
    ToolResultMessage,
    TurnEndReason,
    UserMessage,
)

__all__ = [
    "EVENT_DATA_SHAPES",
    "AssistantAttemptData",
    "AssistantMessageData",
    "CommandDoneData",
    "CommandRunData",
    "CompactionBracketData",
    "CompactionSummaryData",
    "DeveloperMessageData",
    "EndSeedData",
    "InboxSplicedData",
    "LlmRetryData",
    "LlmRetryStartedData",
    "PtcDispatchData",
    "RequestContextData",
    "RequestHeaderData",
    "SessionTitleData",
    "StepData",
    "SystemMessageData",
    "TitleRequestData",
    "TodoItem",
    "TodoWriteData",
    "ToolCallData",
    "ToolResultData",
    "TurnEndData",
    "TurnStartData",
]


class TurnStartData(TypedDict):
    turn: int


class TurnEndData(TypedDict):
    turn: int
    reason: TurnEndReason


class StepData(TypedDict):
    turn: int
    step: int


class SystemMessageData(TypedDict):
    turn: int
    step: int
    message: SystemMessage


class DeveloperMessageData(TypedDict):
    turn: int
    step: int
    message: DeveloperMessage
    headerSeq: NotRequired[int]


class AssistantMessageData(TypedDict):
    turn: int
    step: int
    message: AssistantMessage
    stream: list[AssistantStreamRecord]
    usage: NotRequired[TokenUsage]
    interrupted: NotRequired[Literal[True]]


class AssistantAttemptData(TypedDict):
    """A model attempt that failed after it started: logged for its tokens, never shown to the model."""

    turn: int
    step: int
    stream: list[AssistantStreamRecord]


class ToolCallData(TypedDict):
    turn: int
    step: int
    callId: str
    name: str
    arguments: str


class ToolResultError(TypedDict):
    name: str
    code: str
    reason: NotRequired[Any]


class ToolResultData(TypedDict):
    turn: int
    step: int
    message: ToolResultMessage
    error: NotRequired[ToolResultError]
    meta: NotRequired[Any]


class RequestHeaderData(TypedDict):
    header: dict[str, Any]
    reason: Literal["initial", "resume", "change", "series"]
    startsSeries: NotRequired[Literal[True]]


class RequestContextData(TypedDict):
    provider: str
    model: str
    contextWindow: NotRequired[int]
    systemPromptUpdate: NotRequired[Literal["in-history"]]


class EndSeedData(TypedDict):
    inherited: NotRequired[Literal[True]]


class SessionTitleData(TypedDict):
    title: str
    messageSeqs: list[int]
    source: dict[str, Any]


class TodoItem(TypedDict):
    content: str
    status: Literal["pending", "in_progress", "completed"]


class TodoWriteData(TypedDict):
    todos: list[TodoItem]


class LlmRetryData(TypedDict):
    retryId: str
    turn: int
    step: int
    provider: str
    retry: int
    policyKey: NotRequired[str]
    mode: NotRequired[str]
    maxRetries: NotRequired[int]
    delayMs: NotRequired[int | float]  # dsh writes the jittered delay unrounded (543.73…)
    failure: NotRequired[dict[str, Any]]


class LlmRetryStartedData(TypedDict):
    retryId: str
    turn: int
    step: int
    retry: int


class InboxSplicedData(TypedDict):
    target: Literal["next-turn", "next-step"]
    start: int
    inserted: list[UserMessage]
    removedCount: NotRequired[int]
    outcome: NotRequired[Literal["canceled"]]


class CompactionBracketData(TypedDict):
    compactionId: str
    turn: int | None
    sourceCommandId: NotRequired[str]
    error: NotRequired[str]


class CommandRunData(TypedDict):
    commandId: str
    name: str


class CommandDoneData(TypedDict):
    commandId: str
    kind: Literal["success", "error"]
    sourceEventSeq: NotRequired[int]


class CompactionSummaryData(TypedDict):
    compactionId: str
    summary: list[ContentBlock]


class PtcDispatchData(TypedDict):
    subCallId: str
    rootCallId: str
    parentCallId: str
    name: NotRequired[str]
    arguments: NotRequired[Any]


class TitleRequestData(TypedDict):
    messageSeqs: list[int]
    messages: list[dict[str, Any]]


EVENT_DATA_SHAPES: dict[str, Any] = {
    "turn/start": TurnStartData,
    "turn/end": TurnEndData,
    "step/start": StepData,
    "step/end": StepData,
    "system/message": SystemMessageData,
    "developer/message": DeveloperMessageData,
    "user/message": UserMessage,
    "assistant/message": AssistantMessageData,
    "assistant/attempt": AssistantAttemptData,
    "tool/call": ToolCallData,
    "tool/result": ToolResultData,
    "request/header": RequestHeaderData,
    "request/context": RequestContextData,
    "session/end-seed": EndSeedData,
    "session/title": SessionTitleData,
    "todo/write": TodoWriteData,
    "llm/retry": LlmRetryData,
    "llm/retry-started": LlmRetryStartedData,
    "agent/inbox/spliced": InboxSplicedData,
    "compaction/start": CompactionBracketData,
    "compaction/end": CompactionBracketData,
    "compaction/summary": CompactionSummaryData,
    "command/run": CommandRunData,
    "command/done": CommandDoneData,
    "tool/ptc-dispatch-start": PtcDispatchData,
    "tool/ptc-dispatch": PtcDispatchData,
    "session/title-llm-request": TitleRequestData,
}
"""Shape checked for each interpreted type; other known types only need JSON data."""
