"""The HTTP routes, as a Starlette app: ``POST /rpc``, ``GET /events`` (Server-Sent Events), ``GET /health``.

Every request first passes the :class:`~dshpy.server.http_guard.RequestGuard`
(token, Host, Origin). Errors outside JSON-RPC are ``{"error": message}`` with an
HTTP status, and close the connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import orjson
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from dshpy.core.ids import check_session_id
from dshpy.core.json import loads
from dshpy.errors import InvalidSessionIdError

from .http_guard import RequestGuard
from .hub import Subscription
from .methods import Runtime
from .protocol import METHOD_NOT_FOUND, FrameError, RpcError, error_frame, parse_frame
from .protocol import Request as RpcRequest

__all__ = ["AppOptions", "SsePeer", "build_app"]

log = logging.getLogger("dshpy.server")
SSE_QUEUE_LIMIT = 10_000
SSE_PING_SECONDS = 15.0
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
# Methods whose sessions an event stream starts carrying when the request names it (X-Dshpy-Stream).
FOLLOWING_METHODS = frozenset({"session.create", "session.send", "session.fork", "session/prompt", "session/resume"})
CREATING_METHODS = frozenset({"session.create", "session.fork"})  # their result names a new session


@dataclass(frozen=True, slots=True)
class AppOptions:
    """What :func:`build_app` enforces besides the guard.

    ``max_request_bytes`` bounds a ``POST /rpc`` body (``413`` before it is read);
    ``allow_shutdown`` lets ``shutdown`` through over HTTP (refused with -32601 by
    default, since any token holder could otherwise stop a shared server);
    ``max_streams`` bounds the open ``GET /events`` streams (``503`` beyond).
    """

    max_request_bytes: int
    allow_shutdown: bool = False
    max_streams: int = 64


class SsePeer:
    """One ``GET /events`` stream: a bounded queue the hub fills (``None`` ends the stream)."""

    def __init__(self, stream_id: str, subscription: Subscription) -> None:
        self.stream_id = stream_id
        self.subscription = subscription
        self.queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.overflowed = False

    def send(self, frame: bytes) -> None:
        """Queue one notification frame; never blocks the event loop that publishes it.

        A reader more than ``SSE_QUEUE_LIMIT`` frames behind is cut off: its stream ends
        and later frames are dropped, so one stalled client cannot grow the server's
        memory without bound; it can reconnect and catch up with ``session.events``.
        """
        if self.overflowed:
            return
        if self.queue.qsize() >= SSE_QUEUE_LIMIT:  # a reader this slow is dropped, not buffered forever
            self.overflowed = True
            self.queue.put_nowait(None)
            return
        self.queue.put_nowait(frame)


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    body = orjson.dumps({"error": message})
    return Response(body, status, {"connection": "close", **(headers or {})}, media_type="application/json")


class _EventStream(Response):
    """``text/event-stream`` for one peer; ends when the client goes, the server stops or the peer overflows."""

    def __init__(self, peer: SsePeer, streams: dict[str, SsePeer], runtime: Runtime) -> None:
        super().__init__(status_code=200, media_type="text/event-stream")
        self.peer = peer
        self.streams = streams
        self.runtime = runtime

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        peer = self.peer

        async def watch_disconnect() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            peer.queue.put_nowait(None)

        watcher = asyncio.ensure_future(watch_disconnect())
        try:
            headers = [
                (b"content-type", b"text/event-stream"),
                (b"cache-control", b"no-cache"),
                (b"x-accel-buffering", b"no"),
            ]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            ready = orjson.dumps({"streamId": peer.stream_id})
            first = b"event: ready\ndata: " + ready + b"\n\n"
            await send({"type": "http.response.body", "body": first, "more_body": True})
            while True:
                try:
                    frame = await asyncio.wait_for(peer.queue.get(), timeout=SSE_PING_SECONDS)
                except TimeoutError:
                    await send({"type": "http.response.body", "body": b": ping\n\n", "more_body": True})
                    continue
                if frame is None:
                    break
                parts = [b"data: " + frame + b"\n\n"]
                ended = False
                while not peer.queue.empty():
                    more = peer.queue.get_nowait()
                    if more is None:
                        ended = True
                        break
                    parts.append(b"data: " + more + b"\n\n")
                await send({"type": "http.response.body", "body": b"".join(parts), "more_body": True})
                if ended:
                    break
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            watcher.cancel()
            self.runtime.hub.remove(peer)
            self.streams.pop(peer.stream_id, None)


def _named_sessions(request: RpcRequest) -> list[str]:
    named: list[str] = []
    for key in ("sessionId", "childSessionId"):
        value = request.params.get(key)
        if isinstance(value, str):
            with contextlib.suppress(InvalidSessionIdError, ValueError):
                named.append(check_session_id(value))
    return named


def build_app(runtime: Runtime, guard: RequestGuard, options: AppOptions, streams: dict[str, SsePeer]) -> ASGIApp:
    """The ASGI app serving ``runtime``; ``streams`` holds the open event streams by id."""
    shutdown_refused = RpcError(
        METHOD_NOT_FOUND,
        "method not available over HTTP: shutdown (start the server with --allow-http-shutdown to allow it)",
    )

    async def rpc(request: Request) -> Response:
        content_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if content_type != "application/json":
            return _error(415, "Content-Type must be application/json")
        headers = request.headers
        if "chunked" in headers.get("transfer-encoding", "").lower() or "content-length" not in headers:
            return _error(411, "Content-Length is required")
        try:
            length = int(headers["content-length"])
        except ValueError:
            return _error(400, "bad Content-Length")
        if length < 0:
            return _error(400, "bad Content-Length")
        if length > options.max_request_bytes:  # refused before a byte of the body is read
            return _error(413, f"request larger than {options.max_request_bytes} bytes")
        try:
            body = await request.body()
        except ClientDisconnect:
            return _error(400, "the client went away")
        peer = streams.get(headers.get("x-dshpy-stream", ""))
        parsed: RpcRequest | None = None
        might_shut_down = b"shutdown" in body or b"\\u" in body  # an escaped method name hides from the first
        if peer is not None or (not options.allow_shutdown and might_shut_down):
            with contextlib.suppress(FrameError):
                parsed = parse_frame(body)
        if parsed is not None and parsed.method == "shutdown" and not options.allow_shutdown:
            return _frame_response(None if parsed.is_notification else error_frame(parsed.id, shutdown_refused))
        followed: list[str] = []
        if peer is not None and parsed is not None and parsed.method in FOLLOWING_METHODS:
            # before dispatch: a turn's events start flowing while the request is still running
            followed = [sid for sid in _named_sessions(parsed) if peer.subscription.follow(sid)]
        frame = await runtime.handle_frame(body, peer, headers)
        if peer is not None and parsed is not None and (followed or parsed.method in CREATING_METHODS):
            _follow_result(peer, frame, followed, created=parsed.method in CREATING_METHODS)
        return _frame_response(frame)

    async def events(request: Request) -> Response:
        if len(streams) >= options.max_streams:
            return _error(503, f"too many event streams (at most {options.max_streams})")
        wanted = request.query_params.getlist("sessionId")
        try:
            subscription = Subscription.scoped(check_session_id(session_id) for session_id in wanted)
        except (InvalidSessionIdError, ValueError):
            return _error(400, "invalid sessionId")
        peer = SsePeer(secrets.token_hex(16), subscription)
        streams[peer.stream_id] = peer
        runtime.hub.add(peer)
        return _EventStream(peer, streams, runtime)

    async def health(_request: Request) -> Response:
        return Response(b'{"ok":true}', 200, media_type="application/json")

    app = Starlette(
        routes=[
            Route("/", rpc, methods=["POST"]),
            Route("/rpc", rpc, methods=["POST"]),
            Route("/events", events, methods=["GET"]),
            Route("/health", health, methods=["GET"]),
        ],
        exception_handlers={404: _not_found, 405: _not_allowed},
    )
    return _guarded(app, guard)


def _frame_response(frame: bytes | None) -> Response:
    if frame is None:
        return Response(status_code=204)
    return Response(frame, 200, media_type="application/json")


def _follow_result(peer: SsePeer, frame: bytes | None, followed: list[str], *, created: bool) -> None:
    """After dispatch: carry a session the call created (or forked); drop what a failed call named."""
    if frame is None:
        return
    try:
        answer = loads(frame)  # our own frame: it may carry \udcff escapes orjson alone refuses
    except orjson.JSONDecodeError:
        return
    result = answer.get("result") if isinstance(answer, dict) else None
    if isinstance(result, dict):
        new_id = result.get("id")
        if created and isinstance(new_id, str):
            peer.subscription.follow(new_id)
    elif followed:
        for session_id in followed:
            peer.subscription.sessions.discard(session_id)


async def _not_found(request: Request, _exc: Exception) -> Response:
    return _error(404, f"no such endpoint {request.url.path}")


async def _not_allowed(request: Request, _exc: Exception) -> Response:
    return _error(405, f"{request.method} is not allowed on {request.url.path}")


def _guarded(app: Starlette, guard: RequestGuard) -> ASGIApp:
    """Wrap ``app`` so that a request the guard refuses never reaches a route."""

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        refusal = guard.check(headers)
        if refusal is not None:
            extra = {"www-authenticate": "Bearer"} if refusal.status == 401 else None
            await _error(refusal.status, refusal.message, extra)(scope, receive, send)
            return
        await app(scope, receive, send)

    return guarded
