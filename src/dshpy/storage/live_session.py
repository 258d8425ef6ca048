"""What a store's session is made of, and the one function that puts it together.

A :class:`~dshpy.log.session.Session` a store hands out is more than its log:

* the **log**, restored from the stored events and validated one by one — with the
  closers of a turn a crash left open appended (crash repair: balance, never rewrite);
* the **projection runner**, seeded from the store's cache rows; its checks (the
  lifecycle) are the session's **append guards**, in place before the first append;
* for a live session, the backend's **writer** (conditional batches, under the
  session's lease) and the **cache checkpoints** that write the runner's states back
  to the store, never ahead of what the store acknowledged.

:func:`assemble_session` builds exactly that, for ``create``, ``open``, ``inspect``
and ``fork`` (which opens) alike; :func:`resume_session` and :func:`assemble_resumed`
do the same for a session restored from its resume point and the tail after it
(:mod:`dshpy.storage.resume_cache`), whose older events stay in the store. The parts of a live session are held by one
:class:`SessionOwner`, which the session writes through: it lives exactly as long as
the session does, and holds nothing that points back at it.

Layers above storage may watch the writes (:func:`observe_writers`): telemetry times
each flush that way without the backends knowing. With no observer registered (the
default) the backend's writer is used as it is.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from dshpy.core.events import SessionEvent
from dshpy.log.header import SessionHeader
from dshpy.log.repair import interrupted_turn_closers
from dshpy.log.resume import ResumePoint
from dshpy.log.session import Session, SessionWriter
from dshpy.log.stored_log import StoredLog
from dshpy.projections.checkpoint import CachedState
from dshpy.projections.runner import ProjectionRunner, attach
from dshpy.storage.projection_cache import CacheCheckpoints, SaveRows

__all__ = [
    "RestoreSession",
    "SessionOwner",
    "WriterObserver",
    "assemble_resumed",
    "assemble_session",
    "observe_writers",
    "resume_session",
]

WriterObserver = Callable[[Session, SessionWriter, str], SessionWriter]
"""``observer(session, writer, backend)``: the writer ``session`` should flush through — ``writer``, or one wrapping it.

``backend`` names the store's backend (its URL scheme: ``sqlite``, ``jsonl``, …). The
observer runs once per live session, before its first flush (the repair closers'
included); a wrapper must pass every call on to ``writer`` unchanged."""

_observers: list[WriterObserver] = []


def observe_writers(observer: WriterObserver) -> Callable[[], None]:
    """Give ``observer`` the writer of every live session assembled from now on; returns a function that stops it."""
    _observers.append(observer)
    return lambda: _observers.remove(observer) if observer in _observers else None


class RestoreSession(Protocol):
    """How a store turns stored events into a :class:`Session` (a log that fails validation is corrupt)."""

    def __call__(self, header: SessionHeader, events: list[SessionEvent], **options: Any) -> Session: ...


class SessionOwner:
    """The store side of one live session: the backend's writer, the projection runner, the cache checkpoints.

    The session flushes into it (it is the session's :class:`SessionWriter`): each
    batch goes to the backend's writer unchanged, and once the store has acknowledged
    it the checkpoints may write the runner's states to the cache. Closing writes the
    last rows (after the session's last flush, before the backend's writer lets go of
    its lease), then closes the backend's writer.
    """

    __slots__ = ("_checkpoints", "_inner", "_runner")

    def __init__(self, inner: SessionWriter, runner: ProjectionRunner, checkpoints: CacheCheckpoints) -> None:
        self._inner = inner
        self._runner = runner
        self._checkpoints = checkpoints

    @property
    def inner(self) -> SessionWriter:
        """The backend's writer (conditional appends under the session's lease)."""
        return self._inner

    @property
    def runner(self) -> ProjectionRunner:
        return self._runner

    @property
    def durable_length(self) -> int:
        """How many events the store holds for this session, as far as the owner knows."""
        return self._checkpoints.durable_length

    def write(self, session_id: str, expected_seq: int, events: Sequence[SessionEvent]) -> None:
        self._inner.write(session_id, expected_seq, events)
        self._checkpoints.stored(expected_seq, events, self._runner)

    def close(self) -> None:
        try:
            self._checkpoints.save(self._runner)
        finally:
            self._inner.close()

    def checkpoint(self) -> bool:
        """Write the runner's states to the cache now, if that is safe; returns whether rows were written."""
        return self._checkpoints.save(self._runner)


def assemble_session(
    header: SessionHeader,
    stored: list[SessionEvent],
    *,
    writer: SessionWriter | None,
    seeds: Mapping[str, CachedState] | None,
    save_rows: SaveRows,
    restore: RestoreSession,
    backend: str = "",
) -> Session:
    """The session over ``stored`` with everything it is made of: live through ``writer``, a read-only view without.

    ``seeds`` are the cache rows recorded under the session's identity (``None`` for
    a session just created: there can be none). An interrupted turn is closed by
    appending its closers: a live session writes them before it is returned, a view
    shows them without writing. The runner is attached after the closers, so they are
    folded like any tail, and before the caller can append, so its guards see every
    new event. The caller owns ``writer`` until this returns (and closes it if this
    raises). ``backend`` names the store's backend to the :func:`observe_writers` observers.
    """
    if writer is None:
        closers = interrupted_turn_closers(stored)
        session = restore(header, [*stored, *closers], flushed=len(stored), read_only=True)
        attach(session, cached=seeds)
        return session
    checkpoints = CacheCheckpoints(header, len(stored), save_rows)  # their clock starts with the log as read
    session = restore(header, stored)
    closers = interrupted_turn_closers(stored)  # only for a log that validated
    return _go_live(session, closers, writer, seeds, checkpoints, backend)


def resume_session(
    header: SessionHeader,
    point: ResumePoint,
    older: Callable[[], StoredLog],
    tail: list[SessionEvent],
    *,
    writer: SessionWriter | None,
) -> tuple[Session, list[SessionEvent]]:
    """The session over ``point`` plus ``tail`` (validated), and the closers its crash repair needs.

    ``older()`` makes a fresh reader of the events before the point. A view (no
    ``writer``) shows the closers without writing them: it is restored again with them
    as unflushed events, which happens only when a turn was left open. Raises what
    validating the tail raises; the caller then reads the whole log instead.
    """
    session = Session.resumed(header, point, older(), tail, read_only=writer is None)
    closers = interrupted_turn_closers(session.events[session.repair_window_start :])
    if writer is None and closers:
        stored = point.length + len(tail)
        session = Session.resumed(header, point, older(), [*tail, *closers], flushed=stored, read_only=True)
    return session, closers


def assemble_resumed(
    session: Session,
    closers: list[SessionEvent],
    *,
    writer: SessionWriter | None,
    seeds: Mapping[str, CachedState] | None,
    save_rows: SaveRows,
    backend: str = "",
) -> Session:
    """:func:`assemble_session` for a session :func:`resume_session` restored (``closers``: its repair)."""
    if writer is None:
        attach(session, cached=seeds)
        return session
    checkpoints = CacheCheckpoints(session.header, len(session), save_rows)
    return _go_live(session, closers, writer, seeds, checkpoints, backend)


def _go_live(
    session: Session,
    closers: list[SessionEvent],
    writer: SessionWriter,
    seeds: Mapping[str, CachedState] | None,
    checkpoints: CacheCheckpoints,
    backend: str,
) -> Session:
    """Append the repair, put the owner (writer, runner, checkpoints) in place, and make the repair durable."""
    if closers:
        session.append_events(closers)
    for observer in tuple(_observers):
        writer = observer(session, writer, backend)
    owner = SessionOwner(writer, attach(session, cached=seeds), checkpoints)
    session.attach_writer(owner)
    if closers:
        session.flush()  # the repair is durable before anyone sees the session
        owner.checkpoint()  # ... and it ended a turn: checkpoint as a turn end would
    return session
