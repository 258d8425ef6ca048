"""Connection-level limits for the HTTP server: read deadlines and a connection cap.

uvicorn's h11 protocol parses HTTP well but only times out *idle* keep-alive
connections, and its keep-alive timer is reset by every byte received: a client
that trickles a request head one byte a second (slowloris) holds a connection —
and a file descriptor — forever, before any authentication runs. Its
``limit_concurrency`` answers ``503`` to new *requests* but still keeps every
connection open. This subclass adds what the server needs:

* a **head deadline**: the request line and headers must arrive within
  ``head_timeout`` seconds of the connection opening (or of the previous
  response); otherwise ``408`` (if any of the head arrived) and close;
* a **body deadline**: the body must arrive within ``body_timeout`` seconds of
  the head;
* a **connection cap**: at most ``max_connections`` open connections. When the cap
  is reached, a new connection evicts the connection that has waited longest for
  a request head (an idle or trickling one, never one with a request in
  progress or an event stream); when every connection is busy, the newcomer gets
  ``503`` and is closed at once, so descriptors stay bounded.

The deadlines run below the ASGI app, so they hold before authentication too.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

import h11
from uvicorn.config import Config
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

__all__ = ["ConnectionLimits", "limited_protocol"]

_TIMEOUT_408 = b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
_BUSY_BODY = b'{"error":"too many open connections"}'
_BUSY_503 = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
    b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(_BUSY_BODY), _BUSY_BODY)
)


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """The knobs (seconds, counts); see ``dshpy serve --help``."""

    head_timeout: float = 10.0
    body_timeout: float = 30.0
    max_connections: int = 256

    def __post_init__(self) -> None:
        if self.head_timeout <= 0 or self.body_timeout <= 0:
            raise ValueError("head and body timeouts must be positive")
        if self.max_connections < 1:
            raise ValueError("max_connections must be at least 1")


class _LimitedH11Protocol(H11Protocol):
    limits = ConnectionLimits()

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self._deadline: asyncio.TimerHandle | None = None
        self._phase: str | None = None  # "head" | "body" | None (a request is being answered)
        self._phase_started = 0.0
        self._partial_head = False
        self._refused = False

    # -- asyncio.Protocol ------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if len(self.connections) >= self.limits.max_connections and not self._evict_one():
            self._refused = True
            self.transport = transport
            transport.write(_BUSY_503)
            transport.close()
            return
        super().connection_made(transport)
        self._track()

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        if self._phase == "head":
            self._partial_head = True
        super().data_received(data)
        self._track()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        if self._refused:
            return
        super().connection_lost(exc)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._track()

    # -- deadlines -------------------------------------------------------------------

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _track(self) -> None:
        """Arm the deadline of the phase h11 is in; disarm it while a request is being answered."""
        if self.transport is None or self.transport.is_closing():
            self._disarm()
            return
        state = self.conn.their_state
        phase = "head" if state is h11.IDLE else "body" if state is h11.SEND_BODY else None
        if phase == self._phase:
            return
        self._disarm()
        self._phase = phase
        self._partial_head = False
        if phase is None:
            return
        self._phase_started = time.monotonic()
        timeout = self.limits.head_timeout if phase == "head" else self.limits.body_timeout
        self._deadline = self.loop.call_later(timeout, self._expire)

    def _expire(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        if self._phase == "head" and self._partial_head and self.conn.our_state is h11.IDLE:
            self.transport.write(_TIMEOUT_408)
        self.logger.info("closing a connection whose request %s did not arrive in time", self._phase)
        self.transport.close()

    # -- the cap ---------------------------------------------------------------------

    def _evict_one(self) -> bool:
        """Close the connection that has waited longest for a request head; ``False`` if none is waiting."""
        oldest: _LimitedH11Protocol | None = None
        for connection in self.connections:
            if (
                isinstance(connection, _LimitedH11Protocol)
                and connection._phase == "head"
                and not connection.transport.is_closing()
                and (oldest is None or connection._phase_started < oldest._phase_started)
            ):
                oldest = connection
        if oldest is None:
            return False
        oldest._disarm()
        oldest.transport.close()
        oldest.connections.discard(oldest)
        return True


def limited_protocol(limits: ConnectionLimits) -> type[H11Protocol]:
    """uvicorn's h11 protocol with ``limits`` (pass as ``uvicorn.Config(http=...)``)."""
    return type("LimitedH11Protocol", (_LimitedH11Protocol,), {"limits": limits})
