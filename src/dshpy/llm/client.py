"""A streaming client for any OpenAI-compatible chat-completions endpoint (DeepSeek by default).

Built on the official ``openai`` package (HTTP, SSE parsing, error types), with its
hidden retries switched off (``max_retries=0``): a retry the log does not show is a
model call nobody can account for, so retries belong to the agent loop, which logs
every failed try as an ``assistant/attempt`` (see :mod:`dshpy.agent.loop`).

:meth:`ChatClient.stream` yields dsh ``StreamChunk`` s (via :class:`ChunkMapper`) and
raises :class:`LlmError` with a classified ``LlmFailure`` when the call fails, before
or during the stream. The same code talks to DeepSeek, OpenAI, vLLM, Ollama or a
llama.cpp server; only the base URL changes.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any

import openai
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from dshpy.core.json import dumps
from dshpy.llm.chunks import StreamChunk
from dshpy.llm.config import (
    API_KEY_HINT,
    DEFAULT_BASE_URL,
    DEFAULT_MODEL,
    MissingApiKeyError,
    ModelConfig,
    ModelConfigError,
    ModelTimeouts,
)
from dshpy.llm.deadline import RequestDeadline, _End
from dshpy.llm.failures import LlmError
from dshpy.llm.mapping import ChunkMapper
from dshpy.llm.messages import ChatHistory, ReasoningReplay
from dshpy.llm.response_info import ResponseInfo

__all__ = [
    "API_KEY_HINT",
    "DEFAULT_BASE_URL",
    "DEFAULT_MODEL",
    "ChatClient",
    "MissingApiKeyError",
    "ModelConfig",
    "ModelConfigError",
    "ModelTimeouts",
    "ResponseInfo",
]




class ChatClient:
    """Streams chat completions; one instance per event loop (it owns an HTTP connection pool).

    The time limits are the config's :class:`ModelTimeouts`: ``connect`` bounds the
    TCP/TLS connect, ``read`` each wait for the server (the answer's headers, then
    each chunk), ``total`` the whole request. ``include_usage`` asks for the usage
    chunk (``stream_options``), which the token accounting needs; turn it off only
    for a server that refuses the option.
    """

    def __init__(
        self,
        config: ModelConfig | None = None,
        *,
        include_usage: bool = True,
        default_headers: Mapping[str, str] | None = None,
    ) -> None:
        self.config = config if config is not None else ModelConfig.from_env()
        if not self.config.api_key:
            raise MissingApiKeyError(f"no API key: {API_KEY_HINT}")
        self.include_usage = include_usage
        timeouts = self.config.timeouts
        # Sending the body and waiting for a pooled connection are waits for the server too.
        read = timeouts.read
        self._limits = {"connect": timeouts.connect, "read": read, "write": read, "pool": read}
        self._client = openai.AsyncOpenAI(
            api_key=self.config.api_key,
            base_url=self.config.base_url,
            max_retries=0,
            timeout=openai.Timeout(**self._limits),
            default_headers=dict(default_headers or {}),
        )

    @property
    def provider(self) -> str:
        return self.config.provider

    @property
    def model(self) -> str:
        return self.config.model

    @property
    def request_defaults(self) -> dict[str, Any]:
        """None: an unset ``max_tokens`` / ``reasoning_effort`` is not sent, so the server's own applies."""
        return {}

    def history(self, reasoning: ReasoningReplay = "latest-turn") -> ChatHistory:
        """A cached converter from derived messages to chat-completions messages."""
        return ChatHistory(reasoning)

    def request_params(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] = (),
        max_tokens: int | None = None,
        reasoning_effort: str | None = None,
        extra_body: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The keyword arguments of ``chat.completions.create`` for one streamed request."""
        params: dict[str, Any] = {"model": self.config.model, "messages": list(messages), "stream": True}
        if self.include_usage:
            params["stream_options"] = {"include_usage": True}
        if tools:
            params["tools"] = [
                {
                    "type": "function",
                    "function": {"name": t["name"], "description": t["description"], "parameters": t["parameters"]},
                }
                for t in tools
            ]
        if max_tokens is not None:
            params["max_tokens"] = max_tokens
        if reasoning_effort is not None:
            params["reasoning_effort"] = reasoning_effort
        if extra_body:
            params["extra_body"] = dict(extra_body)
        return params

    async def stream(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] = (),
        max_tokens: int | None = None,
        reasoning_effort: str | None = None,
        extra_body: Mapping[str, Any] | None = None,
        info: ResponseInfo | None = None,
    ) -> AsyncGenerator[StreamChunk, None]:
        """Send one request and yield its chunks; the last one is ``finish``.

        ``info``, if given, gets the model and id the server names in its chunks.
        Raises :class:`LlmError` on failure (chunks already yielded stay valid: they
        are the partial stream of the failed attempt). Cancelling the consumer closes
        the HTTP response.
        """
        params = self.request_params(
            messages, tools=tools, max_tokens=max_tokens, reasoning_effort=reasoning_effort, extra_body=extra_body
        )
        # The history and the tool list are already plain JSON in the wire shape. Passed as
        # typed arguments, the SDK would walk them through its TypedDict transform on every
        # request — O(history) pure-Python work that dominated the loop (0.17 s at 300
        # messages) — and then encode the body with ``json.dumps(...).encode()``, which
        # cannot encode a lone surrogate (a non-UTF-8 file name a tool listed is one). So
        # the body is encoded here, by the log's own codec: ``\udcff`` escapes as dsh's
        # ``JSON.stringify`` sends them, orjson's speed otherwise.
        extra = params.pop("extra_body", {})
        history = {key: params.pop(key) for key in ("messages", "tools") if key in params}
        body = {**params, **extra, **history}  # as the SDK merged them: extra_body over the named fields
        deadline = RequestDeadline(self.config, self._limits)
        try:
            async with deadline.arm():
                response = await self._client.post(
                    "/chat/completions",
                    cast_to=ChatCompletion,
                    content=dumps(body),
                    options={"headers": {"Content-Type": "application/json"}},
                    stream=True,
                    stream_cls=openai.AsyncStream[ChatCompletionChunk],
                )
        except asyncio.CancelledError:
            raise
        except Exception as error:
            raise deadline.failure(error, streaming=False) from error
        mapper = ChunkMapper()
        chunks = response.__aiter__()
        try:
            while not isinstance(chunk := await deadline.next(chunks), _End):
                if info is not None and info.model is None and chunk.model:
                    info.model, info.id = chunk.model, chunk.id
                for out in mapper.feed(chunk.to_dict()):
                    yield out
            for out in mapper.end():
                yield out
        except (LlmError, asyncio.CancelledError, GeneratorExit):
            raise
        except Exception as error:
            raise deadline.failure(error, streaming=True) from error
        finally:
            await response.close()

    async def close(self) -> None:
        """Close the connection pool."""
        await self._client.close()

    async def __aenter__(self) -> ChatClient:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.close()
