"""The sessions a server holds open for writing, least recently used first, and their prompt queues.

Holding a session live keeps its writer (and its store lock) and its log in memory, so
:class:`LiveSessions` keeps at most ``max_live_sessions`` of them: before another one
is opened, the least recently used *idle* one is closed — closing flushes it and
releases its lock — and a periodic sweep closes those idle longer than
``idle_seconds``. A session is never closed while it is busy: a turn running, prompts
queued, being opened, background jobs running, or a notice injected for its next
turn that only its agent holds. A closed session reopens transparently on its next request; its last turn's
failure (reported by ``session/wait``) is remembered across the reopen. When every
live session is busy, opening one more is refused (-32007) instead of exceeding the cap.

Queued prompts are bounded per session (``max_queued_prompts``) and in total bytes
(``max_queued_bytes``): :meth:`LiveSessions.push` refuses one over either limit.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from dshpy.agent import Agent, TurnResult
from dshpy.agent.jobs import jobs_of
from dshpy.log.session import Session

from .limits import ServerLimits, limit_error

__all__ = ["Live", "LiveSessions", "Queued"]

_REMEMBERED = 4096
"""How many closed sessions the registry remembers (to reopen them without a resume marker, with their failure)."""


@dataclass(slots=True)
class Queued:
    """A prompt waiting for its turn; ``size`` is the UTF-8 length of its text.

    ``trace`` is the trace context of the request that queued it (telemetry on), its
    turn's parent."""

    message: dict[str, Any]
    size: int
    future: asyncio.Future[TurnResult] | None = None
    trace: Any = None


@dataclass(slots=True)
class Live:
    """One session the runtime holds open for writing, and everything that lives only in memory beside it.

    ``agent`` is created at the first prompt; ``worker`` is the task running its
    queued turns; ``failure`` is the last turn's error, reported by ``session/wait``;
    ``unsubscribe`` stops publishing its appends when it is closed.
    """

    session: Session
    cwd: str
    agent: Agent | None = None
    queue: deque[Queued] = field(default_factory=deque)
    worker: asyncio.Task[None] | None = None
    failure: BaseException | None = None
    unsubscribe: Callable[[], None] | None = None
    notice_pending: bool = False
    """The agent holds an injected notice (a working-directory change) for the next turn, in memory only."""

    @property
    def running(self) -> bool:
        """A turn is running (the worker task has not finished)."""
        return self.worker is not None and not self.worker.done()

    @property
    def busy(self) -> bool:
        """Closing it now would lose something: a running turn, queued prompts, or a notice only its agent holds."""
        return self.running or bool(self.queue) or self.notice_pending or self.jobs_pending

    @property
    def jobs_pending(self) -> bool:
        """Background jobs still run for it, or a job notice waits in its agent's inbox (both in this process only)."""
        if any(not job.terminal for job in jobs_of(self.session).list()):
            return True
        return self.agent is not None and self.agent.inbox_pending


class LiveSessions:
    """The live sessions of one runtime; ``close`` releases one (it is already out of the registry)."""

    def __init__(
        self, limits: ServerLimits, close: Callable[[Live], None], clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.limits = limits
        self._close = close
        self._clock = clock
        self._live: OrderedDict[str, Live] = OrderedDict()
        self._used: dict[str, float] = {}
        self._opening = 0
        self._closed: OrderedDict[str, BaseException | None] = OrderedDict()
        self.queued_bytes = 0

    # -- lookup ---------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._live)

    def __iter__(self) -> Iterator[Live]:
        return iter(list(self._live.values()))

    def get(self, session_id: str) -> Live | None:
        """The live session, marked as just used."""
        live = self._live.get(session_id)
        if live is not None:
            self.touch(live)
        return live

    def touch(self, live: Live) -> None:
        """Mark ``live`` as just used: it moves to the back of the eviction order and its idle clock restarts.

        A no-op for a session no longer registered (closed meanwhile).
        """
        sid = live.session.id
        if sid in self._live:
            self._live.move_to_end(sid)
            self._used[sid] = self._clock()

    def was_closed(self, session_id: str) -> bool:
        """Whether this server held the session and closed it to make room (or for idleness)."""
        return session_id in self._closed

    def closed_failure(self, session_id: str) -> BaseException | None:
        """The last turn's failure of a session closed for room or idleness (``None``: it succeeded, or is unknown).

        Lets ``session/wait`` report a failed turn even though its session was closed since.
        """
        return self._closed.get(session_id)

    # -- opening and closing --------------------------------------------------------

    @contextmanager
    def slot(self) -> Iterator[None]:
        """Room for one more live session while the caller opens it and :meth:`add`\\ s it.

        Closes the least recently used idle sessions as needed; raises -32007 when
        every live session is busy.
        """
        self.sweep()
        limit = self.limits.max_live_sessions
        if len(self._live) + self._opening >= limit:
            for live in list(self._live.values()):
                if not live.busy:
                    self.evict(live)
                    if len(self._live) + self._opening < limit:
                        break
            else:
                raise limit_error(
                    f"all {limit} live sessions are busy (running or queued turns, or being opened); "
                    "retry when one finishes",
                    "liveSessions",
                    limit,
                )
        self._opening += 1
        try:
            yield
        finally:
            self._opening -= 1

    def add(self, live: Live) -> None:
        """Register a session opened inside :meth:`slot`; it inherits the failure remembered from before it closed."""
        sid = live.session.id
        self._live[sid] = live
        self._used[sid] = self._clock()
        failure = self._closed.pop(sid, None)
        if live.failure is None:
            live.failure = failure

    def remove(self, live: Live) -> None:
        """Forget ``live`` (deleted, or the server is closing): it is not remembered as closed."""
        sid = live.session.id
        if self._live.get(sid) is live:
            del self._live[sid]
            self._used.pop(sid, None)

    def forget(self, session_id: str) -> None:
        """Drop what is remembered about a closed session (it was deleted).

        Otherwise a new session created under the same id would inherit the old one's
        failure and be reopened without dsh's resume marker.
        """
        self._closed.pop(session_id, None)

    def evict(self, live: Live) -> None:
        """Close an idle session, remembering it so that it reopens as if it had stayed open."""
        sid = live.session.id
        self.remove(live)
        self._closed[sid] = live.failure
        self._closed.move_to_end(sid)
        while len(self._closed) > _REMEMBERED:
            self._closed.popitem(last=False)
        self._close(live)

    def sweep(self) -> int:
        """Close the sessions idle longer than ``idle_seconds``; returns how many."""
        cutoff = self._clock() - self.limits.idle_seconds
        stale = [live for sid, live in self._live.items() if self._used[sid] <= cutoff and not live.busy]
        for live in stale:
            self.evict(live)
        return len(stale)

    # -- prompt queues --------------------------------------------------------------

    def push(self, live: Live, item: Queued) -> None:
        """Queue ``item`` on ``live``, or raise -32007 if a queue limit would be passed."""
        limits = self.limits
        sid = live.session.id
        if len(live.queue) >= limits.max_queued_prompts:
            raise limit_error(
                f'session "{sid}" already has {len(live.queue)} prompts waiting (the limit is '
                f"{limits.max_queued_prompts}); retry when its turns finish",
                "queuedPrompts",
                limits.max_queued_prompts,
                sid,
            )
        self.check_bytes(item.size, sid)
        live.queue.append(item)
        self.queued_bytes += item.size

    def check_bytes(self, size: int, session_id: str) -> None:
        """Raise -32007 if a ``size``-byte prompt would pass the queued-bytes limit (checked before opening too)."""
        limit = self.limits.max_queued_bytes
        if self.queued_bytes + size > limit:
            raise limit_error(
                f"queued prompts already hold {self.queued_bytes} bytes; this {size}-byte prompt would pass the "
                f"server's limit of {limit} bytes; retry when turns finish",
                "queuedBytes",
                limit,
                session_id,
            )

    def pop(self, live: Live) -> Queued:
        """Take the next prompt off ``live``'s queue, releasing its bytes from the server-wide total."""
        item = live.queue.popleft()
        self.queued_bytes -= item.size
        return item
