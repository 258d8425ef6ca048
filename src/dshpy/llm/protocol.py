"""What the agent loop needs from a model client, and the factory that picks one by provider.

Two wire formats stand behind one interface: OpenAI-compatible chat completions
(:class:`~dshpy.llm.client.ChatClient`: DeepSeek's OpenAI endpoint, OpenAI, vLLM,
Ollama) and Anthropic-format Messages (:class:`~dshpy.llm.anthropic.AnthropicClient`:
provider ``deepseek-official``, the API dsh 0.2.1 talks to). Each converts the derived
history into its own request messages (:meth:`ModelClient.history`) and yields the
same ``StreamChunk`` vocabulary, so nothing downstream knows which one it drives.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any, Protocol

from dshpy.llm.anthropic import AnthropicClient
from dshpy.llm.chunks import StreamChunk
from dshpy.llm.client import ChatClient
from dshpy.llm.config import ModelConfig
from dshpy.llm.messages import ReasoningReplay
from dshpy.llm.response_info import ResponseInfo
from dshpy.log.messages import Message

__all__ = ["HistoryConverter", "ModelClient", "make_client"]


class HistoryConverter(Protocol):
    """Derived messages → the request messages of one wire format (cached per message)."""

    reasoning: ReasoningReplay

    def convert(self, messages: Sequence[Message]) -> list[dict[str, Any]]: ...


class ModelClient(Protocol):
    """A streaming model client (see the module docstring)."""

    config: ModelConfig

    @property
    def provider(self) -> str: ...

    @property
    def model(self) -> str: ...

    @property
    def request_defaults(self) -> dict[str, Any]:
        """What the client sends for an unset ``maxTokens`` / ``reasoningEffort`` (logged as adapter defaults)."""
        ...

    def history(self, reasoning: ReasoningReplay = "latest-turn") -> HistoryConverter: ...

    def stream(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] = (),
        max_tokens: int | None = None,
        reasoning_effort: str | None = None,
        extra_body: Mapping[str, Any] | None = None,
        info: ResponseInfo | None = None,
    ) -> AsyncGenerator[StreamChunk, None]: ...

    async def close(self) -> None: ...


def make_client(config: ModelConfig, *, default_headers: Mapping[str, str] | None = None) -> ModelClient:
    """The client for ``config``'s wire format: Messages for ``deepseek-official``, chat completions otherwise."""
    if config.wire_format == "messages":
        return AnthropicClient(config, default_headers=default_headers)
    return ChatClient(config, default_headers=default_headers)
