"""JSON-RPC over HTTP/1.1 (``POST /rpc``) plus a Server-Sent Events stream (``GET /events``).

* ``POST /rpc`` (or ``/``): one JSON-RPC frame per request body; the answer is the
  response frame (``204`` for a notification). ``Content-Length`` is required and
  checked against the limit before the body is read: ``413`` and the connection
  closes. Connections are kept alive.
* ``GET /events[?sessionId=A&sessionId=B]``: ``text/event-stream``; the first event is
  ``event: ready`` with ``{"streamId"}``, then each notification as one ``data:``
  line holding the JSON-RPC notification frame. Send ``X-Dshpy-Stream: <streamId>``
  with ``session.subscribe`` / ``session.unsubscribe`` to change what it carries.
* ``GET /health``: ``{"ok": true}``.

Security: the default bind is 127.0.0.1. Binding anywhere else needs a token
(refused at startup otherwise); with a token every request needs
``Authorization: Bearer <token>`` (compared with :func:`hmac.compare_digest`), else
``401``. Without a token, requests whose ``Host`` is not a loopback name get ``403``
(DNS-rebinding guard).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import logging
import secrets
from collections.abc import Callable
from urllib.parse import parse_qs, urlsplit

import orjson

from dshpy.core.ids import check_session_id

from .hub import Subscription
from .methods import Runtime
from .protocol import DEFAULT_MAX_REQUEST_BYTES

__all__ = ["HttpServer", "InsecureBindError", "is_loopback"]

log = logging.getLogger("dshpy.server")
MAX_HEAD_BYTES = 32 * 1024
SSE_QUEUE_LIMIT = 10_000
_REASONS = {
    200: "OK",
    204: "No Content",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    411: "Length Required",
    413: "Payload Too Large",
    431: "Request Header Fields Too Large",
}
_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})


class InsecureBindError(ValueError):
    """A non-loopback bind address without a token."""


def is_loopback(host: str) -> bool:
    if host in ("localhost",):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class SsePeer:
    def __init__(self, stream_id: str, subscription: Subscription) -> None:
        self.stream_id = stream_id
        self.subscription = subscription
        self.queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.overflowed = False

    def send(self, frame: bytes) -> None:
        if self.overflowed:
            return
        if self.queue.qsize() >= SSE_QUEUE_LIMIT:  # a reader this slow is dropped, not buffered forever
            self.overflowed = True
            self.queue.put_nowait(None)
            return
        self.queue.put_nowait(frame)


class HttpServer:
    def __init__(
        self,
        runtime: Runtime,
        *,
        host: str = "127.0.0.1",
        port: int = 8765,
        token: str | None = None,
        max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
    ) -> None:
        if not token and not is_loopback(host):
            raise InsecureBindError(
                f"refusing to listen on {host} without a token: pass --token or set DSHPY_TOKEN "
                "(only loopback addresses may be served without one)"
            )
        self.runtime = runtime
        self.host = host
        self.port = port
        self._token = token.encode() if token else None
        self.max_request_bytes = max_request_bytes
        self.streams: dict[str, SsePeer] = {}
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._connection, self.host, self.port, limit=MAX_HEAD_BYTES)
        sockets = self._server.sockets
        if sockets:
            self.port = int(sockets[0].getsockname()[1])

    async def serve(self, ready: Callable[[HttpServer], None] | None = None) -> None:
        """Serve until ``shutdown`` is answered (or the task is cancelled)."""
        await self.start()
        if ready is not None:
            ready(self)
        try:
            await self.runtime.closed.wait()
            await asyncio.sleep(0.05)  # let the shutdown answer go out
        finally:
            await self.stop()

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            for peer in self.streams.values():
                peer.queue.put_nowait(None)
            for task in list(self._connections):
                task.cancel()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)
            self._server = None
        if not self.runtime.closed.is_set():
            await self.runtime.close()

    # -- one connection ------------------------------------------------------------

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._connections.add(task)
        try:
            while await self._exchange(reader, writer):
                pass
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        except Exception:
            log.exception("HTTP connection failed")
        finally:
            if task is not None:
                self._connections.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _respond(
        self,
        writer: asyncio.StreamWriter,
        status: int,
        body: bytes = b"",
        *,
        content_type: str = "application/json",
        close: bool = False,
        extra: tuple[tuple[str, str], ...] = (),
    ) -> bool:
        lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}", f"Content-Length: {len(body)}"]
        if body:
            lines.append(f"Content-Type: {content_type}")
        lines.extend(f"{name}: {value}" for name, value in extra)
        lines.append("Connection: close" if close else "Connection: keep-alive")
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        await writer.drain()
        return not close

    async def _error(
        self, writer: asyncio.StreamWriter, status: int, message: str, extra: tuple[tuple[str, str], ...] = ()
    ) -> bool:
        body = orjson.dumps({"error": message})
        return await self._respond(writer, status, body, close=True, extra=extra)

    async def _exchange(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.LimitOverrunError:
            return await self._error(writer, 431, "request head too large")
        except asyncio.IncompleteReadError:
            return False
        try:
            request_line, *header_lines = head.decode("latin-1").split("\r\n")
            verb, target, version = request_line.split(" ", 2)
        except ValueError:
            return await self._error(writer, 400, "malformed request line")
        headers: dict[str, str] = {}
        for line in header_lines:
            if line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
        keep_alive = version == "HTTP/1.1" and headers.get("connection", "").lower() != "close"
        if not self._authorized(headers):
            challenge = (("WWW-Authenticate", "Bearer"),)
            return await self._error(writer, 401, "missing or wrong bearer token", challenge)
        if self._token is None and not self._host_allowed(headers.get("host", "")):
            return await self._error(writer, 403, "Host header is not a loopback name")
        url = urlsplit(target)
        if verb == "POST" and url.path in ("/", "/rpc"):
            return await self._rpc(reader, writer, headers, keep_alive)
        if verb == "GET" and url.path == "/events":
            await self._events(writer, url.query)
            return False
        if verb == "GET" and url.path == "/health":
            return await self._respond(writer, 200, b'{"ok":true}', close=not keep_alive)
        if url.path in ("/", "/rpc", "/events", "/health"):
            return await self._error(writer, 405, f"{verb} is not allowed on {url.path}")
        return await self._error(writer, 404, f"no such endpoint {url.path}")

    def _authorized(self, headers: dict[str, str]) -> bool:
        if self._token is None:
            return True
        scheme, _, given = headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer":
            return False
        return hmac.compare_digest(given.strip().encode(), self._token)

    @staticmethod
    def _host_allowed(host: str) -> bool:
        if not host:
            return True
        name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
        return name.lower() in _LOOPBACK_NAMES or is_loopback(name)

    async def _rpc(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, headers: dict[str, str], keep_alive: bool
    ) -> bool:
        if "chunked" in headers.get("transfer-encoding", "").lower() or "content-length" not in headers:
            return await self._error(writer, 411, "Content-Length is required")
        try:
            length = int(headers["content-length"])
        except ValueError:
            return await self._error(writer, 400, "bad Content-Length")
        if length < 0:
            return await self._error(writer, 400, "bad Content-Length")
        if length > self.max_request_bytes:  # refused before a byte of the body is read
            return await self._error(writer, 413, f"request larger than {self.max_request_bytes} bytes")
        body = await reader.readexactly(length)
        peer = self.streams.get(headers.get("x-dshpy-stream", ""))
        frame = await self.runtime.handle_frame(body, peer)
        if frame is None:
            return await self._respond(writer, 204, close=not keep_alive)
        return await self._respond(writer, 200, frame, close=not keep_alive)

    async def _events(self, writer: asyncio.StreamWriter, query: str) -> None:
        subscription = Subscription()
        wanted = parse_qs(query).get("sessionId", [])
        for session_id in wanted:
            try:
                subscription.subscribe(check_session_id(session_id))
            except ValueError:
                await self._error(writer, 400, "invalid sessionId")
                return
        peer = SsePeer(secrets.token_hex(16), subscription)
        self.streams[peer.stream_id] = peer
        self.runtime.hub.add(peer)
        try:
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
                b"Connection: close\r\nX-Accel-Buffering: no\r\n\r\n"
            )
            ready = orjson.dumps({"streamId": peer.stream_id})
            writer.write(b"event: ready\ndata: " + ready + b"\n\n")
            await writer.drain()
            while True:
                try:
                    frame = await asyncio.wait_for(peer.queue.get(), timeout=15)
                except TimeoutError:
                    writer.write(b": ping\n\n")
                    await writer.drain()
                    continue
                if frame is None:
                    return
                parts = [b"data: " + frame + b"\n\n"]
                while not peer.queue.empty():
                    more = peer.queue.get_nowait()
                    if more is None:
                        writer.write(b"".join(parts))
                        return
                    parts.append(b"data: " + more + b"\n\n")
                writer.write(b"".join(parts))
                await writer.drain()
        finally:
            self.runtime.hub.remove(peer)
            self.streams.pop(peer.stream_id, None)
