"""The one model call compaction needs, as a small injected seam.

Compaction lives below the model client (DESIGN.md §2: compaction is L4, the
client L5), so it never calls a model itself: it hands a :class:`SummaryRequest`
to a *summarizer* — any callable, sync or async — and gets a
:class:`SummaryOutput` (or plain text) back. The agent layer's summarizer sends
``request.messages`` (the conversation's system prompt and the span, exactly as
the model saw them), then ``request.instruction_message()``, with
``request.tools`` and ``max_tokens=request.max_tokens``, to the session's own
route, so the call is a prefix of the conversation and reuses the provider's
prompt cache (dsh's design). Tests and benchmarks pass a plain function.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from dshpy.log.messages import Message

__all__ = ["AsyncSummarizer", "Summarizer", "SummaryOutput", "SummaryRequest"]


@dataclass(frozen=True, slots=True)
class SummaryRequest:
    """Everything a summarizer needs to condense one span."""

    session_id: str
    compaction_id: str
    provider: str | None
    """The conversation's route (latest ``request/header``, else ``request/context``), if it has one."""
    model: str | None
    messages: tuple[Message, ...]
    """The system prompt (surface node 0, if it is one) and the span's messages, in model order."""
    tools: tuple[Mapping[str, Any], ...] | None
    """The conversation's tool schemas, so the request stays a prefix of the conversation's."""
    instruction: str
    """The text of the final user message: what to write."""
    max_tokens: int
    """The cap for the summary's output."""
    shadowed_seqs: tuple[int, ...]
    """The surface nodes the summary will replace."""
    purpose: str = "compaction"

    def instruction_message(self) -> dict[str, Any]:
        """The final user message, in the shape of a derived message (``{role, content}``)."""
        return {"role": "user", "content": [{"type": "text", "text": self.instruction}]}


@dataclass(frozen=True, slots=True)
class SummaryOutput:
    """A summarizer's answer: the model's content blocks and the call that produced them."""

    content: tuple[Mapping[str, Any], ...]
    """Everything the model answered; only its text blocks become the summary."""
    provider: str
    model: str
    usage: Mapping[str, Any] | None = None
    """The call's ``TokenUsage``, logged with the summary so usage totals count it."""
    max_tokens: int | None = None
    model_call: bool = True
    """Whether a model produced it (then the whole answer is logged as dsh's ``rawOutput``
    with ``llmStreamCall: true``); ``False`` for a summary made without a model."""

    @classmethod
    def text(
        cls,
        text: str,
        *,
        provider: str,
        model: str,
        usage: Mapping[str, Any] | None = None,
        max_tokens: int | None = None,
        model_call: bool = True,
    ) -> SummaryOutput:
        """An answer holding one text block."""
        return cls(({"type": "text", "text": text},), provider, model, usage, max_tokens, model_call)

    @classmethod
    def of(cls, content: Sequence[Mapping[str, Any]], *, provider: str, model: str, **options: Any) -> SummaryOutput:
        """An answer from a list of content blocks."""
        return cls(tuple(content), provider, model, **options)


class Summarizer(Protocol):
    """``summarizer(request) -> SummaryOutput | str``: a plain string is a summary made without a model call."""

    def __call__(self, request: SummaryRequest, /) -> SummaryOutput | str: ...


class AsyncSummarizer(Protocol):
    """The async form, for an agent that calls its model with ``await``."""

    def __call__(self, request: SummaryRequest, /) -> Awaitable[SummaryOutput | str]: ...
