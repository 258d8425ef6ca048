"""A scripted model server on 127.0.0.1 (chat completions and Anthropic Messages), for tests and benchmarks.

Agent code talks to models over HTTP, and most of what can go wrong is HTTP: a 429
with ``Retry-After``, a 500, a stream that stops half-way, a server that never
answers. Monkeypatching the client would skip exactly that layer, so
:class:`FakeModelServer` is a real server (stdlib :mod:`http.server`, one thread per
connection, HTTP/1.1 with chunked server-sent events) that the real ``openai``
client connects to. Each request takes the next scripted :class:`Reply`; every
request body is recorded (:attr:`FakeModelServer.requests`) so a test can check what
the model was actually shown.

With ``context_window=N`` the server also behaves like a provider with a finite
window: it counts each request's prompt tokens (:func:`prompt_tokens`, a fixed
characters-per-token rule), answers a request over ``N`` with the provider's
context-length error (without using up a scripted reply), and reports the counted
prompt size in every usage object it streams, so a client's token meter sees
realistic numbers.

    with FakeModelServer([Reply.tool_calls(("read_file", '{"path": "a.txt"}')), Reply.text("done")]) as server:
        client = ChatClient(ModelConfig.from_env(base_url=server.base_url, api_key="test", env={}))

``POST …/v1/messages`` is answered in the Anthropic Messages dialect instead, from the
same script (:mod:`dshpy.testing.fake_messages`): thinking blocks with the reply's
``signature``, ``tool_use`` with ``input_json_delta``, usage with cache reads, and
Anthropic error bodies (:meth:`Reply.overloaded`, :meth:`Reply.fail`).

Chat streams speak DeepSeek's dialect of the protocol: ``reasoning_content`` deltas,
``tool_calls`` deltas (index, id and name first, then argument fragments) and a usage
object with ``prompt_cache_hit_tokens`` / ``prompt_cache_miss_tokens`` beside the
OpenAI fields.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

from dshpy.testing.fake_messages import MessagesRenderer, anthropic_error_body

__all__ = ["FakeModelServer", "Reply", "Responder", "SilentPort", "ToolCall", "Usage", "prompt_tokens"]

UsagePosition = Literal["finish", "separate", "first", "none"]


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts the fake reports, in DeepSeek's shape (cache hits are part of the prompt)."""

    prompt_tokens: int = 120
    completion_tokens: int = 12
    cache_hit_tokens: int = 0
    reasoning_tokens: int | None = None

    def to_json(self) -> dict[str, Any]:
        usage: dict[str, Any] = {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": self.cache_hit_tokens},
            "prompt_cache_hit_tokens": self.cache_hit_tokens,
            "prompt_cache_miss_tokens": self.prompt_tokens - self.cache_hit_tokens,
        }
        if self.reasoning_tokens is not None:
            usage["completion_tokens_details"] = {"reasoning_tokens": self.reasoning_tokens}
        return usage


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call the fake model makes; ``arguments`` is streamed in ``pieces`` fragments."""

    name: str
    arguments: str = "{}"
    id: str | None = None
    pieces: int = 3


def _split(text: str, pieces: int) -> list[str]:
    if not text:
        return []
    size = max(1, -(-len(text) // max(1, pieces)))
    return [text[i : i + size] for i in range(0, len(text), size)]


@dataclass(frozen=True, slots=True)
class Reply:
    """One scripted answer: a stream of chunks, an error status, or silence.

    Build replies with the class methods; :meth:`cut` and :meth:`stall` derive a
    reply that breaks off after some chunks.
    """

    kind: Literal["stream", "error", "hang"] = "stream"
    chunks: tuple[dict[str, Any], ...] = ()
    """``choices[0]`` / top-level fragments of each SSE chunk, completed with ids when sent."""
    status: int = 200
    headers: tuple[tuple[str, str], ...] = ()
    body: Any = None
    stop_after: int | None = None
    """Send only this many chunks, then break off (see ``ending``)."""
    ending: Literal["done", "cut", "stall", "error"] = "done"
    chunk_delay: float = 0.0
    """Seconds to sleep before each chunk (to make streams observably live)."""
    signature: str | None = None
    """The thinking block's signature, sent (Messages dialect only) as a ``signature_delta``."""
    stream_error: str | None = None
    """With ``ending="error"``: the in-band error type sent after ``stop_after`` chunks."""

    first_delay: float = 0.0
    """Seconds to sleep before the first chunk, after the headers: a model's time to first token."""
    pause_after: int | None = None
    """Send this many chunks, then wait for :meth:`FakeModelServer.release` (or close) before the rest."""

    # -- streams ------------------------------------------------------------------

    @classmethod
    def text(
        cls,
        text: str,
        *,
        reasoning: str | None = None,
        pieces: int = 3,
        usage: Usage | None = Usage(),
        usage_at: UsagePosition = "finish",
        finish: str = "stop",
        chunk_delay: float = 0.0,
        signature: str | None = None,
    ) -> Reply:
        """A text answer (optionally after a ``reasoning_content`` block), streamed in ``pieces`` deltas.

        ``signature`` signs the reasoning (a thinking block's ``signature_delta`` in the
        Messages dialect; the chat dialect has no signatures).
        """
        return cls.stream(
            text=text,
            reasoning=reasoning,
            pieces=pieces,
            usage=usage,
            usage_at=usage_at,
            finish=finish,
            chunk_delay=chunk_delay,
            signature=signature,
        )

    @classmethod
    def tool_calls(
        cls,
        *calls: ToolCall | tuple[str, str] | tuple[str, str, str],
        text: str | None = None,
        reasoning: str | None = None,
        pieces: int = 3,
        usage: Usage | None = Usage(),
        usage_at: UsagePosition = "finish",
        chunk_delay: float = 0.0,
        signature: str | None = None,
    ) -> Reply:
        """Tool calls (``ToolCall`` or ``(name, arguments[, id])``), after optional reasoning and text."""
        specs = [c if isinstance(c, ToolCall) else ToolCall(c[0], c[1], c[2] if len(c) > 2 else None) for c in calls]
        return cls.stream(
            text=text,
            reasoning=reasoning,
            calls=specs,
            pieces=pieces,
            usage=usage,
            usage_at=usage_at,
            finish="tool_calls",
            chunk_delay=chunk_delay,
            signature=signature,
        )

    @classmethod
    def length(cls, text: str, **options: Any) -> Reply:
        """A text answer the server cut at its token limit (``finish_reason: length``)."""
        return cls.text(text, finish="length", **options)

    @classmethod
    def stream(
        cls,
        *,
        text: str | None = None,
        reasoning: str | None = None,
        calls: Sequence[ToolCall] = (),
        pieces: int = 3,
        usage: Usage | None = Usage(),
        usage_at: UsagePosition = "finish",
        finish: str | None = "stop",
        chunk_delay: float = 0.0,
        signature: str | None = None,
    ) -> Reply:
        """The general form: reasoning, then text, then tool calls, then the finish and usage chunks."""
        chunks: list[dict[str, Any]] = [{"delta": {"role": "assistant", "content": ""}}]
        if usage is not None and usage_at == "first":
            chunks.append({"usage": usage.to_json(), "choices": []})
        for piece in _split(reasoning or "", pieces):
            chunks.append({"delta": {"content": None, "reasoning_content": piece}})
        for piece in _split(text or "", pieces):
            chunks.append({"delta": {"content": piece}})
        ids = itertools.count()
        for index, call in enumerate(calls):
            call_id = call.id or f"call_fake_{next(ids)}"
            chunks.append(
                {
                    "delta": {
                        "tool_calls": [
                            {
                                "index": index,
                                "id": call_id,
                                "type": "function",
                                "function": {"name": call.name, "arguments": ""},
                            }
                        ]
                    }
                }
            )
            for piece in _split(call.arguments, call.pieces):
                chunks.append({"delta": {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}})
        if finish is not None:
            final: dict[str, Any] = {"delta": {}, "finish_reason": finish}
            if usage is not None and usage_at == "finish":
                final["usage"] = usage.to_json()
            chunks.append(final)
        if usage is not None and usage_at == "separate":
            chunks.append({"usage": usage.to_json(), "choices": []})
        return cls(chunks=tuple(chunks), chunk_delay=chunk_delay, signature=signature)

    @classmethod
    def deltas(cls, *pieces: str, usage: Usage | None = Usage(), chunk_delay: float = 0.0) -> Reply:
        """A text answer streamed in exactly these ``content`` deltas, one SSE chunk each.

        A piece may end in the high half of a surrogate pair and the next begin with the
        low half (``"a\\ud83d"``, ``"\\ude00b"``): the JSON of each chunk then holds a lone
        ``\\ud83d`` escape, as a real server's can when it splits an emoji between chunks.
        """
        chunks: list[dict[str, Any]] = [{"delta": {"role": "assistant", "content": ""}}]
        chunks.extend({"delta": {"content": piece}} for piece in pieces)
        final: dict[str, Any] = {"delta": {}, "finish_reason": "stop"}
        if usage is not None:
            final["usage"] = usage.to_json()
        chunks.append(final)
        return cls(chunks=tuple(chunks), chunk_delay=chunk_delay)

    def delayed(self, seconds: float) -> Reply:
        """This reply, its first chunk sent ``seconds`` after the headers (a real model's time to first token)."""
        return replace(self, first_delay=seconds)

    def cut(self, after: int) -> Reply:
        """This stream, broken off after ``after`` chunks: the connection closes with no ``[DONE]``."""
        return replace(self, stop_after=after, ending="cut")

    def fail(self, after: int, error_type: str = "overloaded_error") -> Reply:
        """This stream, ended after ``after`` chunks by an in-band error event of ``error_type``.

        Messages dialect: ``event: error`` with ``{"type": "error", "error": {"type": …}}``;
        chat dialect: a ``data:`` chunk holding ``{"error": {…}}``, as OpenAI-compatible
        servers report a failure mid-stream.
        """
        return replace(self, stop_after=after, ending="error", stream_error=error_type)

    def paused(self, after: int) -> Reply:
        """This stream, paused after ``after`` chunks until :meth:`FakeModelServer.release`, then sent to its end.

        Lets a test look at a turn in the middle of its answer without timing anything.
        """
        return replace(self, pause_after=after)

    def stall(self, after: int) -> Reply:
        """This stream, paused after ``after`` chunks until :meth:`FakeModelServer.release` or close."""
        return replace(self, stop_after=after, ending="stall")

    # -- errors -------------------------------------------------------------------

    @classmethod
    def error(
        cls,
        status: int,
        message: str,
        *,
        type: str = "api_error",
        code: str | None = None,
        headers: Iterable[tuple[str, str]] = (),
    ) -> Reply:
        """An error response with an OpenAI/DeepSeek style body ``{"error": {message, type, param, code}}``."""
        body = {"error": {"message": message, "type": type, "param": None, "code": code}}
        return cls(kind="error", status=status, body=body, headers=tuple(headers))

    @classmethod
    def rate_limited(cls, retry_after: float | str | None = 0) -> Reply:
        """429 Too Many Requests, with ``Retry-After`` (seconds, or an HTTP date) unless ``None``."""
        headers = () if retry_after is None else (("Retry-After", str(retry_after)),)
        return cls.error(429, "Rate limit reached for requests", type="rate_limit_error", headers=headers)

    @classmethod
    def server_error(cls, status: int = 500, message: str = "The server had an error processing your request") -> Reply:
        return cls.error(status, message, type="server_error")

    @classmethod
    def context_window_exceeded(
        cls, style: Literal["deepseek", "openai"] = "deepseek", *, window: int | None = None, requested: int = 200000
    ) -> Reply:
        """400 for a prompt over the model's context window, worded as DeepSeek or OpenAI word it."""
        if style == "openai":
            return cls.error(
                400,
                f"This model's maximum context length is {window or 128000} tokens. However, your messages resulted "
                f"in {requested} tokens. Please reduce the length of the messages.",
                type="invalid_request_error",
                code="context_length_exceeded",
            )
        return cls.error(
            400,
            f"This model's maximum context length is {window or 131072} tokens. However, you requested {requested} "
            f"tokens ({requested} in the messages, 0 in the completion). Please reduce the length of the messages or "
            "completion.",
            type="invalid_request_error",
            code="invalid_request_error",
        )

    @classmethod
    def overloaded(cls) -> Reply:
        """529 ``overloaded_error``, as Anthropic-format APIs answer when they shed load."""
        return cls.error(529, "Overloaded", type="overloaded_error")

    @classmethod
    def unauthorized(cls) -> Reply:
        """401, as DeepSeek answers an unknown key."""
        return cls.error(
            401,
            "Authentication Fails, Your api key: ****test is invalid",
            type="authentication_error",
            code="invalid_request_error",
        )

    @classmethod
    def hang(cls) -> Reply:
        """Never answer (until the server closes): the model request of a crash test."""
        return cls(kind="hang")


_CHARS_PER_TOKEN = 4
_MESSAGE_OVERHEAD = 4


def _message_chars(message: Any) -> int:
    if not isinstance(message, dict):
        return len(json.dumps(message))
    chars = 0
    content = message.get("content")
    if isinstance(content, str):
        chars += len(content)
    elif content is not None:
        chars += len(json.dumps(content, ensure_ascii=False))
    reasoning = message.get("reasoning_content")
    if isinstance(reasoning, str):
        chars += len(reasoning)
    for call in message.get("tool_calls") or ():
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
            chars += len(str(function.get("name") or "")) + len(str(function.get("arguments") or ""))
    return chars


def prompt_tokens(request: dict[str, Any]) -> int:
    """The prompt size the fake provider counts for a chat-completions request body.

    Every message costs 4 tokens plus a token per 4 characters of its text, reasoning
    and tool-call names and arguments; the tool schemas a token per 4 characters of
    their JSON. A stand-in for a tokenizer: deterministic, close to real counts for
    English and code, and independent of dshpy's own estimator.
    """
    tokens = 0
    for message in request.get("messages") or ():
        tokens += _MESSAGE_OVERHEAD + math.ceil(_message_chars(message) / _CHARS_PER_TOKEN)
    system = request.get("system")
    if system:
        tokens += _MESSAGE_OVERHEAD + math.ceil(len(json.dumps(system, ensure_ascii=False)) / _CHARS_PER_TOKEN)
    tools = request.get("tools")
    if tools:
        tokens += math.ceil(len(json.dumps(tools, ensure_ascii=False)) / _CHARS_PER_TOKEN)
    return tokens


def _with_prompt(usage: dict[str, Any], prompt: int) -> dict[str, Any]:
    """``usage`` reporting ``prompt`` prompt tokens (cache hits capped by it)."""
    hit = min(int(usage.get("prompt_cache_hit_tokens") or 0), prompt)
    usage = {**usage, "prompt_tokens": prompt, "total_tokens": prompt + int(usage.get("completion_tokens") or 0)}
    usage["prompt_tokens_details"] = {"cached_tokens": hit}
    usage["prompt_cache_hit_tokens"] = hit
    usage["prompt_cache_miss_tokens"] = prompt - hit
    return usage


Responder = Callable[[dict[str, Any]], "Reply | None"]


@dataclass
class _State:
    script: list[Reply]
    default: Reply | None
    context_window: int | None = None
    responder: Responder | None = None
    response_model: str | None = None
    prompt_sizes: list[int] = field(default_factory=list)
    refused: int = 0
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    arrived: threading.Condition = field(init=False)
    release: threading.Event = field(default_factory=threading.Event)
    closing: threading.Event = field(default_factory=threading.Event)
    counter: itertools.count[int] = field(default_factory=itertools.count)

    def __post_init__(self) -> None:
        self.arrived = threading.Condition(self.lock)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    state: _State

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that closes its kept-alive connection is normal, not an error to print: the server shares the
        process's stderr with the code under test, whose output tests read (a CLI run in-process)."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # small SSE writes must not wait for delayed ACKs (40 ms stalls)
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # quiet: tests read their own output
        pass

    def do_POST(self) -> None:
        state = self.server.state
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._json(400, {"error": {"message": "request body is not JSON", "type": "invalid_request_error"}})
            return
        messages_api = self.path.split("?")[0].rstrip("/").endswith("/messages")
        if not messages_api and not self.path.rstrip("/").endswith("/chat/completions"):
            self._json(404, {"error": {"message": f"no route {self.path}", "type": "invalid_request_error"}})
            return
        prompt = prompt_tokens(body) if isinstance(body, dict) else 0
        with state.lock:
            state.requests.append(body)
            state.headers.append({k.lower(): v for k, v in self.headers.items()})
            state.prompt_sizes.append(prompt)
            window = state.context_window
            if window is not None and prompt > window:
                reply: Reply | None = Reply.context_window_exceeded(window=window, requested=prompt)
                state.refused += 1
            else:
                reply = state.responder(body) if state.responder is not None and isinstance(body, dict) else None
                if reply is None:
                    reply = state.script.pop(0) if state.script else state.default
            number = next(state.counter)
            state.arrived.notify_all()
        if reply is None:
            self._json(500, {"error": {"message": "FakeModelServer: no scripted reply left", "type": "fake"}})
            return
        try:
            if reply.kind == "error":
                error_body = anthropic_error_body(reply.status, reply.body) if messages_api else reply.body
                self._json(reply.status, error_body, reply.headers)
            elif reply.kind == "hang":
                self._wait(state.closing)
                self.close_connection = True
            elif messages_api:
                self._stream_messages(reply, body, number)
            else:
                self._stream(reply, body, number)
        except (BrokenPipeError, ConnectionResetError):  # the client went away (cancel, kill): nothing to do
            self.close_connection = True

    def _json(self, status: int, body: Any, headers: Iterable[tuple[str, str]] = ()) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _wait(self, *events: threading.Event) -> None:
        while not any(event.is_set() for event in events):
            time.sleep(0.01)

    def _send_chunk(self, payload: bytes) -> None:
        self.wfile.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
        self.wfile.flush()

    def _stream(self, reply: Reply, request: dict[str, Any], number: int) -> None:
        state = self.server.state
        model = state.response_model or request.get("model", "fake-model")
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        created = int(time.time())
        chunks = reply.chunks if reply.stop_after is None else reply.chunks[: reply.stop_after]
        if reply.first_delay:
            self.wfile.flush()  # the headers go now: the wait is for the first token, not the response
            time.sleep(reply.first_delay)
        for index, part in enumerate(chunks):
            self._pause(reply, index)
            if reply.chunk_delay:
                time.sleep(reply.chunk_delay)
            chunk: dict[str, Any] = {
                "id": f"chatcmpl-fake-{number}",
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "system_fingerprint": "fp_fake",
            }
            if "choices" in part:
                chunk.update(part)
            else:
                choice = {
                    "index": 0,
                    "delta": part["delta"],
                    "logprobs": None,
                    "finish_reason": part.get("finish_reason"),
                }
                chunk["choices"] = [choice]
                if "usage" in part:
                    chunk["usage"] = part["usage"]
            if state.context_window is not None and isinstance(chunk.get("usage"), dict):
                chunk["usage"] = _with_prompt(chunk["usage"], state.prompt_sizes[number])
            self._send_chunk(b"data: " + json.dumps(chunk).encode() + b"\n\n")
        if reply.stop_after is not None and reply.ending == "error":
            error = {"error": {"message": f"fake {reply.stream_error}", "type": reply.stream_error, "code": None}}
            self._send_chunk(b"data: " + json.dumps(error).encode() + b"\n\n")
        elif self._break_off(reply):
            return
        else:
            self._send_chunk(b"data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _pause(self, reply: Reply, index: int) -> None:
        """Before chunk ``index`` of a paused reply: hold what was sent so far until released."""
        if reply.pause_after is not None and index == reply.pause_after:
            self.wfile.flush()
            self._wait(self.server.state.release, self.server.state.closing)

    def _break_off(self, reply: Reply) -> bool:
        """End a stalled or cut reply (True), or do nothing (False)."""
        state = self.server.state
        if reply.stop_after is not None and reply.ending == "stall":
            self._wait(state.release, state.closing)
            self.close_connection = True
            return True
        if reply.stop_after is not None and reply.ending == "cut":
            self.close_connection = True
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)  # no terminating chunk: the body is incomplete
            return True
        return False

    def _stream_messages(self, reply: Reply, request: dict[str, Any], number: int) -> None:
        """The reply as Messages API events (see :mod:`dshpy.testing.fake_messages`)."""
        state = self.server.state
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        prompt = state.prompt_sizes[number] if state.context_window is not None else None
        model = state.response_model or str(request.get("model", "fake-model"))
        renderer = MessagesRenderer(model, reply.signature, prompt)
        chunks = reply.chunks if reply.stop_after is None else reply.chunks[: reply.stop_after]
        if reply.first_delay:
            self.wfile.flush()
            time.sleep(reply.first_delay)
        for index, part in enumerate(chunks):
            self._pause(reply, index)
            if reply.chunk_delay:
                time.sleep(reply.chunk_delay)
            group = renderer.group(part, reply.chunks, number)
            if group:
                self._send_chunk(b"".join(group))
        if reply.stop_after is not None and reply.ending == "error":
            error = {"type": "error", "error": {"type": reply.stream_error, "message": f"fake {reply.stream_error}"}}
            self._send_chunk(f"event: error\ndata: {json.dumps(error)}\n\n".encode())
        elif self._break_off(reply):
            return
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


class FakeModelServer:
    """A scripted chat-completions server on ``127.0.0.1`` (ephemeral port), run in a thread.

    ``script`` is consumed one reply per request, in order; when it is exhausted the
    ``default`` reply answers (``None``: a 500 saying the script ran out). Use it as a
    context manager, or call :meth:`start` and :meth:`close`.
    """

    def __init__(
        self,
        script: Iterable[Reply] = (),
        *,
        default: Reply | None = None,
        context_window: int | None = None,
        responder: Responder | None = None,
        response_model: str | None = None,
    ) -> None:
        """``context_window``: refuse prompts over this many tokens (see the module doc); ``None``: no limit.

        ``response_model``: the ``model`` every chunk names (``None``: the request's, as an
        exact-name deployment answers) — a real server may answer with another name than
        the one asked for (an alias resolved to a dated snapshot).

        ``responder(body)`` sees every request the window admits (under the server's
        lock: keep it quick) and may answer it with a :class:`Reply` chosen by content —
        a compaction's summary request, say — or return ``None`` to take the next
        scripted reply.
        """
        if context_window is not None and (type(context_window) is not int or context_window < 1):
            raise ValueError(f"context_window must be a positive integer, got {context_window!r}")
        self._state = _State(list(script), default, context_window, responder, response_model)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ----------------------------------------------------------------

    def start(self) -> FakeModelServer:
        server = _Server(("127.0.0.1", 0), _Handler)
        server.state = self._state
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.02}, name="fake-model", daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving; hanging and stalled replies are released (their connections close)."""
        self._state.closing.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeModelServer:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # -- use ----------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("FakeModelServer is not running")
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """The base URL to give a client (requests go to ``<base_url>/chat/completions``)."""
        return f"http://127.0.0.1:{self.port}"

    def add(self, *replies: Reply) -> None:
        """Append replies to the script."""
        with self._state.lock:
            self._state.script.extend(replies)

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Every request body received so far (parsed JSON), in arrival order."""
        with self._state.lock:
            return list(self._state.requests)

    @property
    def request_headers(self) -> list[dict[str, str]]:
        """The headers of every request (lower-case names), in arrival order."""
        with self._state.lock:
            return list(self._state.headers)

    @property
    def prompt_sizes(self) -> list[int]:
        """The prompt tokens counted for every request (:func:`prompt_tokens`), in arrival order."""
        with self._state.lock:
            return list(self._state.prompt_sizes)

    @property
    def refused(self) -> int:
        """How many requests were refused for exceeding ``context_window``."""
        with self._state.lock:
            return self._state.refused

    @property
    def remaining(self) -> int:
        """Scripted replies not used yet."""
        with self._state.lock:
            return len(self._state.script)

    def wait_for_requests(self, count: int, timeout: float = 10.0) -> list[dict[str, Any]]:
        """Block until at least ``count`` requests have arrived; raise ``TimeoutError`` after ``timeout`` s."""
        with self._state.arrived:
            if not self._state.arrived.wait_for(lambda: len(self._state.requests) >= count, timeout):
                raise TimeoutError(f"FakeModelServer got {len(self._state.requests)} request(s), wanted {count}")
            return list(self._state.requests)

    def release(self) -> None:
        """Let stalled replies finish (they close their connection without ``[DONE]``) and paused ones go on."""
        self._state.release.set()


class SilentPort:
    """A loopback port where a TCP connect never completes: for connect-timeout tests.

    The socket listens with the smallest backlog and never accepts; a few
    connections fill its queue, after which the kernel drops further handshakes
    (no refusal, no answer), as a firewalled or black-holed address does.
    """

    def __init__(self) -> None:
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(0)
        self._port = int(self._listener.getsockname()[1])
        self._fillers: list[socket.socket] = []
        for _ in range(3):
            filler = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            filler.setblocking(False)
            with contextlib.suppress(BlockingIOError):  # the handshake completes in the background
                filler.connect(("127.0.0.1", self.port))
            self._fillers.append(filler)

    @property
    def port(self) -> int:
        return self._port

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        for filler in self._fillers:
            filler.close()
        self._listener.close()

    def __enter__(self) -> SilentPort:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
