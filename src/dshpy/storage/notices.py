"""The seed's session lifecycle points, on the store: ``session/created``, ``session/flush``, ``session/disposed``.

The seed draws a session's life as ``ctx.sessions.create()`` → ``session/created``
→ turns appended → ``session/flush`` (the buffered events reach the disk) → …
→ ``session/disposed`` (the session leaves the store). dsh dispatches the same three
names (plus ``session/event``). A store reports them for every live session it hands out::

    store.on("session/created", lambda p: print(p.session.id, p.how))      # "created", "opened", "forked"
    store.on("session/flush", lambda p: print(p.session.id, p.first_seq, p.last_seq))
    store.on("session/disposed", lambda p: print(p.session_id))

* ``session/created`` — ``create``, ``open`` or ``fork`` returns a live session
  (``how`` says which); read-only ``inspect`` views are not live and not reported;
* ``session/flush`` — after each durable flush, with the seq range it made durable
  (``first_seq`` … ``last_seq``); the repair closers ``open`` writes are reported
  right after that session's ``session/created``;
* ``session/disposed`` — the session was closed: its last events flushed, its
  writer's lease released.

Handlers run in the thread that did the work (a write-behind flush runs on its
timer's thread) and after it succeeded, so they cannot undo it: an exception is
logged and contained, like dsh's creation and disposal observers — the data is
already safe, and a broken listener must not fail the write that triggered it.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

from dshpy.core.events import SessionEvent
from dshpy.log.session import Session, SessionWriter

__all__ = [
    "SESSION_POINTS",
    "SessionCreated",
    "SessionDisposed",
    "SessionFlushed",
    "SessionNotices",
    "SessionPoint",
]

log = logging.getLogger("dshpy.storage.notices")

SessionPoint = Literal["session/created", "session/flush", "session/disposed"]
SESSION_POINTS: tuple[str, ...] = get_args(SessionPoint)


@dataclass(frozen=True, slots=True)
class SessionCreated:
    """``session/created``: a live session entered the store's service."""

    session: Session
    how: Literal["created", "opened", "forked"]


@dataclass(frozen=True, slots=True)
class SessionFlushed:
    """``session/flush``: events ``first_seq`` … ``last_seq`` of ``session`` are durable now.

    Reported from inside the flush, before the session counts those events as flushed:
    trust the range, not ``session.pending_count``.
    """

    session: Session
    first_seq: int
    last_seq: int

    @property
    def count(self) -> int:
        """How many events the flush made durable."""
        return self.last_seq - self.first_seq + 1


@dataclass(frozen=True, slots=True)
class SessionDisposed:
    """``session/disposed``: the session was closed (flushed) and its writer released."""

    session: Session

    @property
    def session_id(self) -> str:
        return self.session.id


Handler = Callable[[Any], Any]


class SessionNotices:
    """Handlers for the three points of one store."""

    def __init__(self) -> None:
        self._handlers: dict[str, list[Handler]] = {name: [] for name in SESSION_POINTS}
        self._lock = threading.Lock()

    def on(self, name: str, handler: Handler) -> Callable[[], None]:
        """Call ``handler(payload)`` at ``name``; returns a function that stops it."""
        if name not in self._handlers:
            raise ValueError(f"unknown session point {name!r}; the points are: {', '.join(SESSION_POINTS)}")
        if not callable(handler):
            raise TypeError(f"a {name} handler must be callable, not {type(handler).__name__}")
        handlers = self._handlers[name]
        with self._lock:
            handlers.append(handler)

        def off() -> None:
            with self._lock:
                if handler in handlers:
                    handlers.remove(handler)

        return off

    def emit(self, name: str, payload: Any) -> None:
        """Run ``name``'s handlers in order; one that raises is logged, and the next still runs."""
        for handler in tuple(self._handlers[name]):
            try:
                handler(payload)
            except Exception:
                log.exception("%s handler %r failed (contained: the session is unaffected)", name, handler)

    def watch(self, writer: SessionWriter) -> NoticeWriter:
        """Wrap a live session's writer so that its flushes and its close are reported (see :class:`NoticeWriter`)."""
        return NoticeWriter(writer, self)


class NoticeWriter:
    """A session's writer that reports ``session/flush`` after each write and ``session/disposed`` on close.

    It exists before its session does (the store assembles the session around it);
    :meth:`announce` binds it and reports ``session/created``, then any flush made
    before (``open``'s repair). It holds the session weakly: nothing here keeps a
    session alive.
    """

    __slots__ = ("_early", "_inner", "_notices", "_session")

    def __init__(self, inner: SessionWriter, notices: SessionNotices) -> None:
        self._inner = inner
        self._notices = notices
        self._session: weakref.ref[Session] | None = None
        self._early: list[tuple[int, int]] = []

    def write(self, session_id: str, expected_seq: int, events: Sequence[SessionEvent]) -> None:
        """Write through, then report ``session/flush`` (held back until :meth:`announce` while assembling)."""
        self._inner.write(session_id, expected_seq, events)
        if not events:
            return
        span = (expected_seq, expected_seq + len(events) - 1)
        session = self._session() if self._session is not None else None
        if session is None:
            self._early.append(span)
        else:
            self._notices.emit("session/flush", SessionFlushed(session, *span))

    def close(self) -> None:
        """Close through (releasing the lease), then report ``session/disposed``."""
        try:
            self._inner.close()
        finally:
            session = self._session() if self._session is not None else None
            if session is not None:
                self._notices.emit("session/disposed", SessionDisposed(session))

    def announce(self, session: Session, how: Literal["created", "opened", "forked"]) -> None:
        """Bind ``session`` and report it, then the flushes it made while being assembled."""
        self._session = weakref.ref(session)
        self._notices.emit("session/created", SessionCreated(session, how))
        early, self._early = self._early, []
        for span in early:
            self._notices.emit("session/flush", SessionFlushed(session, *span))
