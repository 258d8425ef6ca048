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
import os
from collections.abc import AsyncGenerator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit

import openai

from dshpy.llm.chunks import StreamChunk
from dshpy.llm.failures import LlmError, classify_exception
from dshpy.llm.mapping import ChunkMapper

__all__ = [
    "DEFAULT_BASE_URL",
    "DEFAULT_MODEL",
    "ChatClient",
    "MissingApiKeyError",
    "ModelConfig",
]

DEFAULT_BASE_URL = "https://api.deepseek.com"
DEFAULT_MODEL = "deepseek-chat"
API_KEY_HINT = "set DEEPSEEK_API_KEY (e.g. export DEEPSEEK_API_KEY=sk-...; any non-empty value for a local server)"

_CONTEXT_WINDOWS = {"deepseek-chat": 131_072, "deepseek-reasoner": 131_072}
"""Known windows, logged in ``request/context`` (DeepSeek's own errors name 131072 tokens)."""


class MissingApiKeyError(ValueError):
    """No API key was configured; the message says how to set one."""


def _provider_of(base_url: str) -> str:
    host = (urlsplit(base_url).hostname or "").lower()
    if host == "deepseek.com" or host.endswith(".deepseek.com"):
        return "deepseek"
    if host == "openai.com" or host.endswith(".openai.com"):
        return "openai"
    return "openai-compatible"


@dataclass(frozen=True, slots=True)
class ModelConfig:
    """Where requests go and as whom: the route that ``request/header`` and ``request/context`` log."""

    base_url: str = DEFAULT_BASE_URL
    api_key: str | None = None
    model: str = DEFAULT_MODEL
    provider: str = "deepseek"
    """The provider name logged in events (``deepseek``, ``openai``, ``openai-compatible``, …)."""
    context_window: int | None = None

    @classmethod
    def from_env(
        cls,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        model: str | None = None,
        provider: str | None = None,
        context_window: int | None = None,
        env: Mapping[str, str] | None = None,
    ) -> ModelConfig:
        """Explicit values, then ``DEEPSEEK_BASE_URL`` / ``DEEPSEEK_API_KEY`` / ``DEEPSEEK_MODEL``, then defaults."""
        environ = os.environ if env is None else env
        url = (base_url or environ.get("DEEPSEEK_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
        chosen = model or environ.get("DEEPSEEK_MODEL") or DEFAULT_MODEL
        return cls(
            base_url=url,
            api_key=api_key or environ.get("DEEPSEEK_API_KEY") or None,
            model=chosen,
            provider=provider or _provider_of(url),
            context_window=context_window if context_window is not None else _CONTEXT_WINDOWS.get(chosen),
        )

    def with_model(self, model: str) -> ModelConfig:
        return replace(self, model=model, context_window=_CONTEXT_WINDOWS.get(model))


class ChatClient:
    """Streams chat completions; one instance per event loop (it owns an HTTP connection pool).

    ``timeout`` bounds each wait for the server (the answer's headers, then each
    chunk), ``connect_timeout`` the TCP/TLS connect. ``include_usage`` asks for the
    usage chunk (``stream_options``), which the token accounting needs; turn it off
    only for a server that refuses the option.
    """

    def __init__(
        self,
        config: ModelConfig | None = None,
        *,
        timeout: float = 600.0,
        connect_timeout: float = 10.0,
        include_usage: bool = True,
        default_headers: Mapping[str, str] | None = None,
    ) -> None:
        self.config = config if config is not None else ModelConfig.from_env()
        if not self.config.api_key:
            raise MissingApiKeyError(f"no API key: {API_KEY_HINT}")
        self.include_usage = include_usage
        self._client = openai.AsyncOpenAI(
            api_key=self.config.api_key,
            base_url=self.config.base_url,
            max_retries=0,
            timeout=openai.Timeout(timeout, connect=connect_timeout),
            default_headers=dict(default_headers or {}),
        )

    @property
    def provider(self) -> str:
        return self.config.provider

    @property
    def model(self) -> str:
        return self.config.model

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
    ) -> AsyncGenerator[StreamChunk, None]:
        """Send one request and yield its chunks; the last one is ``finish``.

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
        # messages). As ``extra_body`` they go into the JSON body as they are.
        raw = dict(params.pop("extra_body", {}))
        raw["messages"] = params.pop("messages")
        if "tools" in params:
            raw["tools"] = params.pop("tools")
        try:
            response = await self._client.chat.completions.create(messages=[], extra_body=raw, **params)
        except asyncio.CancelledError:
            raise
        except Exception as error:
            raise classify_exception(error, streaming=False) from error
        mapper = ChunkMapper()
        try:
            async for chunk in response:
                for out in mapper.feed(chunk.to_dict()):
                    yield out
            for out in mapper.end():
                yield out
        except (LlmError, asyncio.CancelledError, GeneratorExit):
            raise
        except Exception as error:
            raise classify_exception(error, streaming=True) from error
        finally:
            await response.close()

    async def close(self) -> None:
        """Close the connection pool."""
        await self._client.close()

    async def __aenter__(self) -> ChatClient:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.close()
