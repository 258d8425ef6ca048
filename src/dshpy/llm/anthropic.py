"""A streaming client for an Anthropic-format Messages API: DeepSeek's, which dsh 0.2.1 speaks.

``POST {base}/v1/messages`` (``/v1`` is not added twice when the base already ends in
it) with ``x-api-key`` and ``anthropic-version: 2023-06-01``, streamed as server-sent
events, which :class:`~dshpy.llm.anthropic_mapping.MessagesMapper` turns into the same
``StreamChunk`` vocabulary the chat-completions client yields. Failures are the same
``LlmFailure`` codes (:mod:`~dshpy.llm.failures`): a 429 keeps its ``Retry-After``,
a 529 ``overloaded_error`` and a 5xx are retryable ``SERVER`` failures, a prompt over
the window is ``CONTEXT_WINDOW_EXCEEDED``, a stream that stops before
``message_stop`` is ``STREAM_INTERRUPTED``. Like :class:`~dshpy.llm.client.ChatClient`
it never retries on its own: the agent loop retries, and logs every failed try.

The request body is dsh's (``dsh-llm-deepseek``): ``model``, ``stream``, ``messages``,
``max_tokens`` (256,000 unless the caller sets one — the Messages API requires it),
``thinking: {type: enabled|disabled}``, ``output_config: {effort}`` (``high`` by
default; dsh accepts ``off``, ``low``, ``high`` and ``max``), ``system``, and ``tools``
in the ``input_schema`` form. Built on httpx2 (the httpx fork dshpy and ``openai`` already depend on); the
official ``anthropic`` package would add a dependency for a few dozen lines of SSE.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import httpx2 as httpx
import orjson

from dshpy.core.json import dumps
from dshpy.llm.anthropic_mapping import MessagesMapper
from dshpy.llm.anthropic_messages import MessagesHistory
from dshpy.llm.chunks import StreamChunk
from dshpy.llm.config import API_KEY_HINT, MissingApiKeyError, ModelConfig
from dshpy.llm.deadline import RequestDeadline, _End
from dshpy.llm.failures import LlmError, classify_anthropic_error
from dshpy.llm.messages import ReasoningReplay
from dshpy.llm.response_info import ResponseInfo

__all__ = ["ANTHROPIC_VERSION", "DEFAULT_MESSAGES_MAX_TOKENS", "REASONING_EFFORTS", "AnthropicClient", "messages_url"]

ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_MESSAGES_MAX_TOKENS = 256_000
"""dsh's default output cap for DeepSeek's Messages API (its ``DEFAULT_MAX_TOKENS``)."""
REASONING_EFFORTS = ("off", "low", "high", "max")

log = logging.getLogger("dshpy.llm.anthropic")


def messages_url(base_url: str) -> str:
    """``<base>/v1/messages``, or ``<base>/messages`` when the base already ends in ``/v1`` (dsh's rule)."""
    base = base_url.rstrip("/")
    root = base if urlsplit(base).path.endswith("/v1") else f"{base}/v1"
    return f"{root}/messages"


async def _sse_data(lines: AsyncIterator[str]) -> AsyncIterator[tuple[str | None, str]]:
    """``(event name, data)`` of each complete server-sent event; a tail without its blank line is dropped."""
    event: str | None = None
    data: list[str] = []
    async for line in lines:
        if not line:
            if data:
                yield event, "\n".join(data)
            event, data = None, []
        elif line.startswith(":"):
            continue
        else:
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "event":
                event = value
            elif name == "data":
                data.append(value)


class AnthropicClient:
    """Streams Messages API answers; one instance per event loop (it owns an HTTP connection pool).

    The same surface as :class:`~dshpy.llm.client.ChatClient` (``config``,
    ``provider``, ``model``, :meth:`history`, :meth:`stream`, :meth:`close`), so the
    agent loop, compaction and the server take either. ``default_headers`` are sent
    with every request (dsh adds ``x-deepseek-harness-*`` attribution headers there).
    """

    def __init__(self, config: ModelConfig | None = None, *, default_headers: Mapping[str, str] | None = None) -> None:
        self.config = config if config is not None else ModelConfig.from_env(provider="deepseek-official")
        if not self.config.api_key:
            raise MissingApiKeyError(f"no API key: {API_KEY_HINT}")
        timeouts = self.config.timeouts
        read = timeouts.read
        self._limits = {"connect": timeouts.connect, "read": read, "write": read, "pool": read}
        self._url = messages_url(self.config.base_url)
        self._headers = {
            **dict(default_headers or {}),
            "content-type": "application/json",
            "accept": "text/event-stream",
            "x-api-key": self.config.api_key,
            "anthropic-version": ANTHROPIC_VERSION,
        }
        self._client = httpx.AsyncClient(timeout=httpx.Timeout(**self._limits))

    @property
    def provider(self) -> str:
        return self.config.provider

    @property
    def model(self) -> str:
        return self.config.model

    @property
    def request_defaults(self) -> dict[str, Any]:
        """dsh's adapter defaults, sent when the caller sets none: 256,000 output tokens, effort ``high``."""
        return {"maxTokens": DEFAULT_MESSAGES_MAX_TOKENS, "reasoningEffort": "high"}

    def history(self, reasoning: ReasoningReplay = "latest-turn") -> MessagesHistory:
        """A cached converter from derived messages to this API's messages (signatures included)."""
        return MessagesHistory(self.config.model, reasoning)

    def request_body(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] = (),
        max_tokens: int | None = None,
        reasoning_effort: str | None = None,
        extra_body: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The JSON body of one streamed request; ``messages`` as :meth:`history` converts them."""
        effort = reasoning_effort or "high"
        if effort not in REASONING_EFFORTS:
            raise LlmError(
                {
                    "message": f"the Messages API does not support reasoning effort {effort!r} "
                    f"(use one of {', '.join(REASONING_EFFORTS)})",
                    "code": "INVALID_REQUEST",
                }
            )
        entries = list(messages)
        system = None
        if entries and entries[0].get("role") == "system" and isinstance(entries[0].get("content"), str):
            system = entries.pop(0)["content"]
        body: dict[str, Any] = {
            "model": self.config.model,
            "stream": True,
            "messages": entries,
            "max_tokens": max_tokens if max_tokens is not None else DEFAULT_MESSAGES_MAX_TOKENS,
            "thinking": {"type": "disabled" if effort == "off" else "enabled"},
        }
        if effort != "off":
            body["output_config"] = {"effort": effort}
        if system:
            body["system"] = system
        if tools:
            body["tools"] = [
                {"name": t["name"], "description": t["description"], "input_schema": t["parameters"]} for t in tools
            ]
        if extra_body:
            body.update(extra_body)
        return body

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
        """Send one request and yield its chunks; the last one is ``finish`` (with the replay state).

        ``info``, if given, gets the model and id the server names in ``message_start``.

        Raises :class:`LlmError` on failure, before or during the stream (chunks
        already yielded stay valid: the partial stream of the failed attempt).
        """
        body = self.request_body(
            messages, tools=tools, max_tokens=max_tokens, reasoning_effort=reasoning_effort, extra_body=extra_body
        )
        deadline = RequestDeadline(self.config, self._limits)
        request = self._client.build_request("POST", self._url, content=dumps(body), headers=self._headers)
        try:
            async with deadline.arm():
                response = await self._client.send(request, stream=True)
                if response.status_code >= 400:
                    raw = await response.aread()
                    await response.aclose()
                    raise self._status_failure(response, raw)
        except (LlmError, asyncio.CancelledError):
            raise
        except Exception as error:
            raise deadline.failure(error, streaming=False) from error
        if info is not None and info.on_accepted is not None:
            try:  # dsh's extensions.accept(): after the status, before the body
                info.on_accepted()
            except Exception:  # the answer still counts; what the callback records is resent later
                log.warning("recording the accepted request failed", exc_info=True)
        mapper = MessagesMapper(self.config.model)
        events = _sse_data(response.aiter_lines())
        try:
            while not isinstance(item := await deadline.next(events), _End):
                name, data = item
                try:
                    event = orjson.loads(data)
                except orjson.JSONDecodeError:
                    raise LlmError(
                        {"message": "the Messages stream holds an event that is not JSON", "code": "STREAM_INTERRUPTED"}
                    ) from None
                if not isinstance(event, dict) or (name is not None and name != event.get("type")):
                    raise LlmError(
                        {
                            "message": f"the Messages stream holds a malformed {name or 'unnamed'} event",
                            "code": "STREAM_INTERRUPTED",
                        }
                    )
                if info is not None and info.model is None and event.get("type") == "message_start":
                    message = event.get("message")
                    if isinstance(message, dict) and isinstance(message.get("model"), str):
                        info.model, info.id = message["model"], message.get("id")
                for out in mapper.feed(event):
                    yield out
                if mapper.finished:
                    break
            for out in mapper.end():
                yield out
        except (LlmError, asyncio.CancelledError, GeneratorExit):
            raise
        except Exception as error:
            raise deadline.failure(error, streaming=True) from error
        finally:
            await response.aclose()

    def _status_failure(self, response: httpx.Response, raw: bytes) -> LlmError:
        try:
            parsed: Any = orjson.loads(raw)
        except orjson.JSONDecodeError:
            parsed = raw.decode("utf-8", "replace").strip()
        headers = dict(response.headers)
        request_id = headers.get("request-id") or headers.get("x-request-id") or headers.get("x-deepseek-request-id")
        return classify_anthropic_error(parsed, response.status_code, headers, request_id)

    async def close(self) -> None:
        """Close the connection pool."""
        await self._client.aclose()

    async def __aenter__(self) -> AnthropicClient:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.close()
