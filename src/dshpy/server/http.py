"""JSON-RPC over HTTP/1.1 (``POST /rpc``) plus a Server-Sent Events stream (``GET /events``), on uvicorn.

* ``POST /rpc`` (or ``/``): one JSON-RPC frame per request body, ``Content-Type:
  application/json`` (``415`` otherwise); the answer is the response frame
  (``204`` for a notification). ``Content-Length`` is required (``411``) and
  checked against the limit before the body is read (``413``, connection
  closed). Connections are kept alive. ``shutdown`` is refused over HTTP
  (``-32601``) unless the server was started with ``allow_shutdown``.
* ``GET /events[?sessionId=A&sessionId=B]``: ``text/event-stream``; the first event
  is ``event: ready`` with ``{"streamId"}``, then each notification as one
  ``data:`` line holding the JSON-RPC notification frame. A stream carries the
  sessions named in its URL, the sessions its client creates, prompts, resumes or
  forks while sending ``X-Dshpy-Stream: <streamId>``, and those it
  ``session.subscribe``\\ s to (``session.subscribe {}``: everything).
* ``GET /health``: ``{"ok": true}``.

Security (see :mod:`~dshpy.server.http_guard` for the trust model): the default
bind is 127.0.0.1; binding anywhere else needs a token; with a token every request
needs ``Authorization: Bearer <token>``; cross-origin browser requests are
refused. Limits (see :mod:`~dshpy.server.connections`): a request head must arrive
within ``head_timeout`` seconds and its body within ``body_timeout``; at most
``max_connections`` connections are open (idle ones are evicted first), at most
``max_streams`` event streams.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import resource
import socket
from collections.abc import Callable, Iterable

import uvicorn

from .connections import ConnectionLimits, limited_protocol
from .http_app import AppOptions, SsePeer, build_app
from .http_guard import InsecureBindError, RequestGuard, is_loopback
from .methods import Runtime
from .protocol import DEFAULT_MAX_REQUEST_BYTES

__all__ = ["ConnectionLimits", "HttpServer", "InsecureBindError", "is_loopback"]

log = logging.getLogger("dshpy.server")
MAX_HEAD_BYTES = 32 * 1024
KEEP_ALIVE_SECONDS = 5
GRACEFUL_SHUTDOWN_SECONDS = 3
LISTEN_BACKLOG = 2048  # the kernel's queue: waiting there costs the server no descriptor


def _accept_backlog(limits: ConnectionLimits) -> int:
    """How many sockets asyncio accepts in one go (its ``backlog``) before any is refused or evicted."""
    return max(16, min(128, limits.max_connections // 2))


def _ensure_descriptors(limits: ConnectionLimits) -> None:
    """Raise the soft descriptor limit if the cap, one accept burst and the store could not fit in it."""
    needed = limits.max_connections + 4 * _accept_backlog(limits) + 128  # a few bursts overlap (measured)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        target = needed if hard == resource.RLIM_INFINITY else min(hard, needed)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        if soft < needed:
            log.warning(
                "open-file limit %d is below the %d that %d connections need: lower --max-connections",
                soft,
                needed,
                limits.max_connections,
            )


def _bind(host: str, port: int, backlog: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    return socket.create_server((host.strip("[]"), port), family=family, backlog=backlog)


class HttpServer:
    """One uvicorn server for one :class:`Runtime`; ``serve()`` runs until ``shutdown`` closes the runtime."""

    def __init__(
        self,
        runtime: Runtime,
        *,
        host: str = "127.0.0.1",
        port: int = 8765,
        token: str | None = None,
        max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
        allowed_origins: Iterable[str] = (),
        allow_shutdown: bool = False,
        limits: ConnectionLimits | None = None,
        max_streams: int = 64,
    ) -> None:
        self.guard = RequestGuard(token=token, host=host, port=port, allowed_origins=allowed_origins)
        self.runtime = runtime
        self.host = host
        self.port = port
        self.limits = limits or ConnectionLimits()
        self.max_request_bytes = max_request_bytes
        self.streams: dict[str, SsePeer] = {}
        options = AppOptions(max_request_bytes, allow_shutdown=allow_shutdown, max_streams=max_streams)
        self.app = build_app(runtime, self.guard, options, self.streams)
        self._server: uvicorn.Server | None = None
        self.on_stop: list[Callable[[], None]] = []
        """Called first when the server stops: what else it serves ends its long requests (the web UI's live views),
        so the graceful shutdown does not wait for them."""

    async def start(self) -> None:
        """Bind and start accepting, without waiting for shutdown (``serve()`` is start, wait, stop).

        Afterwards :attr:`port` is the real port, also when 0 asked the kernel for a free
        one. Raises the soft open-file limit when the connection cap needs more
        descriptors (a warning if it cannot), and ``OSError`` when the address cannot be
        bound.
        """
        uvicorn_log = logging.getLogger("uvicorn.error")
        if uvicorn_log.level == logging.NOTSET:  # one warning per malformed request would let anyone flood stderr
            uvicorn_log.setLevel(logging.INFO if log.isEnabledFor(logging.INFO) else logging.ERROR)
        _ensure_descriptors(self.limits)
        backlog = _accept_backlog(self.limits)
        sock = _bind(self.host, self.port, backlog=backlog)
        self.port = int(sock.getsockname()[1])
        self.guard.bound(self.port)
        config = uvicorn.Config(
            self.app,
            http=limited_protocol(self.limits),
            lifespan="off",
            backlog=backlog,
            log_config=None,
            access_log=False,
            server_header=False,
            timeout_keep_alive=KEEP_ALIVE_SECONDS,
            timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
            h11_max_incomplete_event_size=MAX_HEAD_BYTES,
        )
        config.load()
        server = uvicorn.Server(config)
        server.lifespan = config.lifespan_class(config)
        try:
            await server.startup(sockets=[sock])
        except BaseException:
            sock.close()
            raise
        sock.listen(LISTEN_BACKLOG)  # asyncio listened with the accept burst; the kernel may queue more
        self._server = server
        self._socket = sock

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
        """End every event stream, stop uvicorn (waiting a few seconds for requests in progress) and close the runtime.

        Safe to call twice, and before :meth:`start` succeeded.
        """
        server, self._server = self._server, None
        if server is not None:
            for stop in self.on_stop:
                try:
                    stop()
                except Exception:
                    log.exception("stopping a part of the HTTP server failed")
            for peer in list(self.streams.values()):
                peer.queue.put_nowait(None)
            with contextlib.suppress(Exception):
                await server.shutdown(sockets=[self._socket])
        if not self.runtime.closed.is_set():
            await self.runtime.close()
