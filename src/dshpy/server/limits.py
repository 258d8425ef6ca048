"""The resource limits of one server, and the error a caller gets when one is reached.

A live session holds its store's write lock (a JSONL session: a lock file descriptor)
and its whole log in memory, and a queued prompt holds its text until its turn runs;
without limits a client could exhaust the server's descriptors or memory just by
touching many sessions or queueing prompts behind a slow model. Over a limit a request
is answered ``LIMIT_EXCEEDED`` (-32007) with ``data: {"limit", "max", "sessionId"?}``;
nothing is half done, so it can simply be retried later.
"""

from __future__ import annotations

from dataclasses import dataclass

from .protocol import LIMIT_EXCEEDED, RpcError

__all__ = ["ServerLimits", "limit_error"]


@dataclass(frozen=True, slots=True)
class ServerLimits:
    """Bounds on what one server holds (``dshpy serve --max-live-sessions …``)."""

    max_live_sessions: int = 64
    """Sessions held open for writing; the least recently used idle one is closed to make room."""
    idle_seconds: float = 600.0
    """An idle live session is closed after this long without a request (it reopens on the next one)."""
    max_queued_prompts: int = 16
    """Prompts waiting behind a session's running turn (the running one not counted)."""
    max_queued_bytes: int = 16 << 20
    """UTF-8 bytes of prompt text waiting in all sessions' queues together."""

    def __post_init__(self) -> None:
        for name in ("max_live_sessions", "max_queued_prompts", "max_queued_bytes"):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if not self.idle_seconds > 0:
            raise ValueError(f"idle_seconds must be positive, got {self.idle_seconds!r}")


def limit_error(message: str, limit: str, maximum: int, session_id: str | None = None) -> RpcError:
    """The -32007 error for a reached limit: ``data`` names the ``limit``, its ``max`` and the session, if any.

    Clients branch on ``data.limit`` (``"liveSessions"``, ``"queuedPrompts"``,
    ``"queuedBytes"``, ``"inFlightRequests"``), so the message is free to change.
    """
    data: dict[str, object] = {"limit": limit, "max": maximum}
    if session_id is not None:
        data["sessionId"] = session_id
    return RpcError(LIMIT_EXCEEDED, message, data)
