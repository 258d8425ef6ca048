"""The live session: one append-only log, its surface, and the messages derived from it.

Every append runs the same admission pipeline whether the event is new, restored
from storage or synthesized by repair: lossless-JSON snapshot, per-type data
checks, surface plan, lifecycle check — and only then commit. A refused event
leaves the log, the surface and the derived history exactly as they were.

Layers above the log may add *append guards* (:meth:`Session.add_guard`): checks
that run last in the pipeline, after every structural rule and before commit, and
refuse a candidate by raising :class:`~dshpy.errors.EventError`. The ``lifecycle``
projection uses one to refuse illegal state transitions and appends to an archived
session; the log itself stays ignorant of what the guards enforce.

Appends buffer in memory; :meth:`Session.flush` hands the unflushed tail to the
store as one conditional batch. A session is a single writer: a second handle on
the same id that flushes from a stale position gets :class:`ConflictError`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from types import TracebackType
from typing import Any, Protocol, cast

from dshpy.core.events import SessionEvent, SurfaceOp, assemble_event, checked_event, is_seq, parse_surface_op
from dshpy.core.ids import check_session_id, new_session_id
from dshpy.core.json import NotJsonError, freeze_json, joined_text
from dshpy.core.validation import validate_event_data
from dshpy.core.vocabulary import KNOWN_EVENT_TYPES, is_plugin_type, unknown_type_error
from dshpy.errors import EventError, ReadOnlySessionError, SurfaceError
from dshpy.log.header import SessionHeader
from dshpy.log.history import DerivedHistory
from dshpy.log.invariants import Lifecycle, orphan_compactions
from dshpy.log.messages import LogView, Message
from dshpy.log.resume import ResumePoint, event_fingerprint, nodes_with_messages
from dshpy.log.stored_log import StoredLog
from dshpy.log.surface import Surface

__all__ = ["AppendGuard", "EventListener", "ProjectionReader", "Session", "SessionWriter", "read_projections_with"]

log = logging.getLogger("dshpy.session")

EventListener = Callable[["Session", SessionEvent], None]

AppendGuard = Callable[["Session", SessionEvent], None]
"""``guard(session, candidate)``: raise an :class:`EventError` to refuse ``candidate``.

``session`` holds exactly the events before the candidate. Inside
:meth:`Session.append_events` that is a throwaway trial copy which already holds
the batch's earlier events, so a guard must read the log from the session it is
given, never from a session it captured."""


class SessionWriter(Protocol):
    """What a store gives a live session: a conditional batch write and a release."""

    def write(self, session_id: str, expected_seq: int, events: Sequence[SessionEvent]) -> None:
        """Durably store ``events`` iff the stored log's next seq is ``expected_seq``."""

    def close(self) -> None:
        """Release whatever the writer holds (locks, connections)."""


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class _TrialLog:
    """The log plus trial candidates, without copying the log (admission reads earlier events by seq)."""

    __slots__ = ("_base", "_base_length", "_extra")

    def __init__(self, base: list[SessionEvent]) -> None:
        self._base = base
        self._base_length = len(base)
        self._extra: list[SessionEvent] = []

    def __len__(self) -> int:
        return self._base_length + len(self._extra)

    def __getitem__(self, seq: int) -> SessionEvent:
        return self._base[seq] if seq < self._base_length else self._extra[seq - self._base_length]

    def append(self, event: SessionEvent) -> None:
        self._extra.append(event)


class ProjectionReader(Protocol):
    """How :meth:`Session.state_of` and :meth:`Session.snapshot` reach the projection layer (above the log)."""

    def state_of(self, session: Session, key: Any) -> Any: ...

    def snapshot(self, session: Session, keys: Iterable[str] | None = None) -> Any: ...


_projections: list[ProjectionReader] = []


def read_projections_with(reader: ProjectionReader) -> None:
    """Install the projection layer's reader (:mod:`dshpy.projections.runner` does, when it is imported).

    The log cannot import projections (they are built on it), so the layer above
    registers itself here instead: the arrow still points down.
    """
    _projections[:] = [reader]


class Session:
    """A session's log with its derived state. Create through a store, or :meth:`new` for a detached one."""

    def __init__(
        self,
        header: SessionHeader,
        events: Iterable[SessionEvent] = (),
        *,
        writer: SessionWriter | None = None,
        flushed: int | None = None,
        read_only: bool = False,
        clock: Callable[[], int] = _now_ms,
    ) -> None:
        """Restore a session from ``events`` (validated one by one).

        ``flushed`` is how many of ``events`` are already durable (default: all of
        them); the rest are pending until :meth:`flush`.
        """
        self._setup(header, [], writer=writer, read_only=read_only, clock=clock)
        restored = list(events)
        self._lifecycle.orphans = orphan_compactions(restored)
        for event in restored:
            self._admit(event, restoring=True)
        self._finish_restore(flushed)

    def _setup(
        self,
        header: SessionHeader,
        log: list[SessionEvent],
        *,
        writer: SessionWriter | None,
        read_only: bool,
        clock: Callable[[], int],
        point: ResumePoint | None = None,
    ) -> None:
        """The empty state every session starts from (``point``: the state after the events ``log`` holds)."""
        self._header = header
        self._events: list[SessionEvent] = log
        self._surface = Surface()
        self._lifecycle = Lifecycle()
        self._request_header_seq: int | None = None
        self._turn_start: int | None = None
        """Seq of the open turn's ``turn/start`` (``None`` between turns): where repair and checkpoints look back to."""
        self._inherited = 0
        self._seeded = False
        self._resumed_at: tuple[int, str] | None = None if point is None else (point.length, point.last_event)
        """The length and last event fingerprint of the point this session was resumed from (known without a read)."""
        if point is None:
            self._history = DerivedHistory(self._surface, self._events)
        else:
            self._surface.nodes = list(point.nodes)
            self._surface.protected_head = point.protected_head
            self._lifecycle = point.lifecycle.copy()
            self._request_header_seq = point.request_header_seq
            self._turn_start = point.turn_start
            self._inherited = point.inherited
            self._seeded = point.seeded
            messages = nodes_with_messages(point.nodes, point.silent)
            self._history = DerivedHistory.resumed(self._surface, self._events, messages, point.silent)
        self._listeners: list[EventListener] = []
        self._guards: list[AppendGuard] = []
        self.projection_runner: object | None = None
        """The slot where the projection layer keeps this session's runner (:func:`dshpy.projections.runner_of`).

        The log never reads it and does not know its type (projections sit above the
        log). It is kept on the session rather than in a process-wide table so that the
        runner lives exactly as long as its session."""
        self._clock = clock
        self._writer = writer
        self._read_only = read_only
        self._closed = False
        self._io = threading.RLock()
        self._write_behind_s: float | None = None
        self._timer: threading.Timer | None = None

    def _finish_restore(self, flushed: int | None) -> None:
        self._flushed = len(self._events) if flushed is None else flushed
        if self._header.is_seeded != self._seeded:
            raise EventError(
                f'session "{self._header.id}": header isSeeded={self._header.is_seeded} disagrees with its '
                "inherited end-seed marker"
            )

    @classmethod
    def resumed(
        cls,
        header: SessionHeader,
        point: ResumePoint,
        older: StoredLog,
        tail: Iterable[SessionEvent],
        *,
        writer: SessionWriter | None = None,
        flushed: int | None = None,
        read_only: bool = False,
        clock: Callable[[], int] = _now_ms,
    ) -> Session:
        """A session restored from ``point`` plus the ``tail`` of events after it, validated one by one.

        ``older`` reads the events before the point from the store, on demand (it holds
        exactly ``point.length`` of them); the session appends to it. The result behaves
        exactly as ``Session(header, every event)`` would, provided ``point`` is that
        session's :meth:`resume_point` at ``point.length`` — which the caller must have
        checked (a store ties it to the log's identity and last event).
        """
        if len(older) != point.length:
            raise ValueError(f"the stored log holds {len(older)} events, the resume point {point.length}")
        session = cls.__new__(cls)
        session._setup(
            header, cast("list[SessionEvent]", older), writer=writer, read_only=read_only, clock=clock, point=point
        )
        restored = list(tail)
        compaction = session._lifecycle.compaction
        session._lifecycle.orphans |= orphan_compactions(restored, None if compaction is None else compaction.seq)
        for event in restored:
            session._admit(event, restoring=True)
        session._finish_restore(flushed)
        return session

    def resume_point(self) -> ResumePoint | None:
        """This session's state as a :class:`ResumePoint` (``None`` for an empty log), for a store to keep."""
        with self._io:
            length = len(self._events)
            if length == 0:
                return None
            self._history.derive()  # brings the derived prefix to the whole surface
            known = self._resumed_at  # nothing appended since the point: the stored last event need not be read
            last = known[1] if known is not None and known[0] == length else event_fingerprint(self._events[-1])
            return ResumePoint(
                length=length,
                last_event=last,
                lifecycle=self._lifecycle.copy(),
                nodes=list(self._surface.nodes),
                silent=self._history.silent,
                protected_head=self._surface.protected_head,
                request_header_seq=self._request_header_seq,
                inherited=self._inherited,
                seeded=self._seeded,
                turn_start=self._turn_start,
            )

    @property
    def repair_window_start(self) -> int:
        """The first seq crash repair has to read: the open turn's ``turn/start`` or open compaction's start.

        Before it the log is balanced, so closers computed from the events from here on
        are the closers of the whole log. The log's length when nothing is open.
        """
        starts = [len(self._events)]
        if self._turn_start is not None:
            starts.append(self._turn_start)
        if self._lifecycle.compaction is not None:
            starts.append(self._lifecycle.compaction.seq)
        return min(starts)

    @classmethod
    def new(
        cls, *, session_id: str | None = None, cwd: str | None = None, clock: Callable[[], int] = _now_ms
    ) -> Session:
        """A detached in-memory session (no store; :meth:`flush` is a no-op)."""
        sid = check_session_id(session_id) if session_id is not None else new_session_id()
        return cls(SessionHeader.new(sid, cwd=cwd, created_at=clock()), clock=clock)

    # -- reading ------------------------------------------------------------------

    @property
    def id(self) -> str:
        return self._header.id

    @property
    def header(self) -> SessionHeader:
        return self._header

    @property
    def events(self) -> Sequence[SessionEvent]:
        """All events, as an immutable snapshot (O(1); later appends do not show in it).

        A session a store resumed from its resume point (:attr:`resumed_from`) reads the
        events before the point from the store when they are indexed, sliced or iterated;
        they are the same events either way.
        """
        return LogView(self._events)

    def __len__(self) -> int:
        return len(self._events)

    @property
    def next_seq(self) -> int:
        return len(self._events)

    @property
    def resumed_from(self) -> int | None:
        """How many events came from the resume point this session was restored from (``None``: its whole log
        was read). Those events stay in the store until read; ``events`` fetches them on demand."""
        point = self._resumed_at
        return None if point is None else point[0]

    @property
    def inherited_event_count(self) -> int:
        """Events inherited from a fork parent (the seq of the last inherited end-seed marker)."""
        return self._inherited

    @property
    def lifecycle(self) -> Lifecycle:
        """A copy of the turn/step/tool-call state after the last event."""
        return self._lifecycle.copy()

    @property
    def open_turn(self) -> int | None:
        return self._lifecycle.open_turn

    @property
    def next_turn(self) -> int:
        return self._lifecycle.next_turn

    @property
    def pending_count(self) -> int:
        """Appended events not yet handed to the store by :meth:`flush`."""
        return len(self._events) - self._flushed

    @property
    def read_only(self) -> bool:
        return self._read_only or self._closed

    @property
    def surface_nodes(self) -> Sequence[int]:
        """Seqs of the model-visible events, in model order."""
        return tuple(self._surface.nodes)

    def derive_messages(self) -> Sequence[Message]:
        """The model's message history, folded from the surface.

        Incremental: appends extend the cached history and a replace edits it in
        place (the shadowed messages out, the replacement in), so a call costs what
        changed since the last one. The result is an immutable snapshot sharing the
        stored message objects.
        """
        return self._history.derive()

    def request_header(self) -> Any:
        """The ``header`` of the latest ``request/header`` event, or ``None`` before the first."""
        seq = self._request_header_seq
        return None if seq is None else self._events[seq].data["header"]

    # -- writing ------------------------------------------------------------------

    def append(
        self,
        type: str,
        data: Any,
        *,
        surface_op: SurfaceOp | dict[str, Any] | None = None,
        source_event_seqs: Sequence[int] | None = None,
        ignorable: bool = False,
    ) -> SessionEvent:
        """Append one event stamped with the next seq and the current time; returns it.

        ``plugin:<namespace>/<name>`` types are plugin records: always ignorable,
        never on the surface. Any other type must be one dsh v4 knows, unless it is
        explicitly ``ignorable``. Raises :class:`EventError` (or a subclass) and
        commits nothing when the event is refused.
        """
        with self._io:
            if self._closed or self._read_only:
                self._check_writable()
            if type.__class__ is not str or type not in KNOWN_EVENT_TYPES:  # the common case skips these checks
                if not isinstance(type, str) or not type:
                    raise EventError("event type must be a non-empty string")
                if not type.isascii():
                    type = joined_text(type)  # as the data's strings: a split pair is stored as its character
                if type.startswith("plugin:"):
                    if not is_plugin_type(type):
                        raise EventError(
                            f'invalid plugin record type "{type}": use plugin:<namespace>/<name> in lower case',
                            event_type=type,
                        )
                    ignorable = True
                elif type not in KNOWN_EVENT_TYPES and not ignorable:
                    raise EventError(
                        f'unknown event type "{type}": dsh readers would refuse it; mark it ignorable=True or use a '
                        "plugin:<namespace>/<name> record",
                        event_type=type,
                    )
            seq = len(self._events)
            try:
                frozen = freeze_json(data)
            except NotJsonError as error:
                raise EventError(
                    f'session event "{type}" carries non-JSON-serializable data: {error}', event_type=type, seq=seq
                ) from None
            op = None if surface_op is None else parse_surface_op(surface_op, type, seq)
            sources: tuple[int, ...] | None = None
            if source_event_seqs is not None:
                if isinstance(source_event_seqs, (str, bytes)) or not all(map(is_seq, source_event_seqs)):
                    raise SurfaceError(
                        f'session event "{type}" sourceEventSeqs must densely contain non-negative safe integers',
                        event_type=type,
                        seq=seq,
                    )
                sources = tuple(source_event_seqs)
            event = assemble_event(type, seq, self._clock(), frozen, op, sources, bool(ignorable))
            self._admit(event, built=True)
            if self._write_behind_s is not None:
                self._arm_write_behind()
            return event

    def append_events(self, events: Iterable[SessionEvent]) -> list[SessionEvent]:
        """Append prebuilt events (repair closers, imports), keeping their times.

        Each must carry the next seq. All are checked first; if one is refused,
        none is appended.
        """
        with self._io:
            self._check_writable()
            trial = self._fork_state()
            start = len(trial._events)
            for event in events:
                trial._admit(event)  # raises before anything reaches self
            admitted = [trial._events[seq] for seq in range(start, len(trial._events))]  # the sealed copies
            for event in admitted:
                self._admit(event, built=True)
            self._arm_write_behind()
            return admitted

    def flush(self) -> int:
        """Hand the pending events to the store as one conditional batch; returns their count.

        Raises :class:`~dshpy.errors.ConflictError` if another writer appended first;
        the pending events then stay pending (reopen the session to continue).
        """
        with self._io:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            pending = len(self._events) - self._flushed
            if pending == 0 or self._writer is None:
                if self._writer is None:
                    self._flushed = len(self._events)
                return 0
            end = len(self._events)
            self._writer.write(self.id, self._flushed, self._events[self._flushed : end])
            self._flushed = end
            return pending

    def set_write_behind(self, delay_ms: int | None) -> None:
        """Flush automatically ``delay_ms`` after the first unflushed append (``None``: only on :meth:`flush`).

        The window is fixed, not a debounce: later appends do not push it back, so no
        event waits longer than ``delay_ms`` plus one write. A failed background flush
        keeps the events pending and is retried after the next append.
        """
        if delay_ms is not None and (type(delay_ms) is not int or delay_ms < 0):
            raise ValueError(f"write_behind_ms must be a non-negative integer or None, got {delay_ms!r}")
        with self._io:
            self._write_behind_s = None if delay_ms is None else delay_ms / 1000

    def _arm_write_behind(self) -> None:
        if self._write_behind_s is None or self._timer is not None or self._writer is None:
            return
        timer = threading.Timer(self._write_behind_s, self._flush_behind)
        timer.daemon = True
        self._timer = timer
        timer.start()

    def _flush_behind(self) -> None:
        with self._io:
            if self._timer is None or self._closed:
                return
            self._timer = None
            try:
                self.flush()
            except Exception:
                log.warning("background flush of session %s failed; events stay pending", self.id, exc_info=True)

    def close(self) -> None:
        """Flush, then release the writer; the handle becomes read-only."""
        with self._io:
            if self._closed:
                return
            try:
                if not self._read_only:
                    self.flush()
            finally:
                self._closed = True
                if self._writer is not None:
                    self._writer.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc is None:
            self.close()
            return
        try:
            self.close()
        except Exception:  # the original error matters more than a failed flush on the way out
            log.exception("flush on exit failed for session %s", self.id)

    def attach_writer(self, writer: SessionWriter) -> None:
        """Give a detached session its store writer (a store's session assembly does, once the rest is in place)."""
        if self._writer is not None:
            raise ReadOnlySessionError(f'session "{self.id}" already has a writer')
        self._writer = writer

    def subscribe(self, listener: EventListener) -> Callable[[], None]:
        """Call ``listener(session, event)`` after each committed append; returns an unsubscribe.

        The unsubscribe holds the listener list, not the session, so keeping it does not
        keep the session alive.
        """
        listeners = self._listeners
        listeners.append(listener)
        return lambda: listeners.remove(listener) if listener in listeners else None

    def add_guard(self, guard: AppendGuard) -> Callable[[], None]:
        """Check every later append with ``guard(session, candidate)`` before it commits; returns a remover.

        Guards run after the log's own rules, in the order they were added, for
        :meth:`append` and :meth:`append_events` alike (never for the events a
        session is restored from: a stored log is what it is). A guard refuses by
        raising :class:`~dshpy.errors.EventError` (or a subclass); nothing is then
        committed. Guards must not append.
        """
        guards = self._guards
        guards.append(guard)
        return lambda: guards.remove(guard) if guard in guards else None  # holds the list, not the session

    # -- projections --------------------------------------------------------------

    def _reader(self) -> ProjectionReader:
        if not _projections:  # only when dshpy.log is used without the package that folds projections
            raise RuntimeError("no projection layer loaded: import dshpy (or dshpy.projections) first")
        return _projections[0]

    def state_of(self, key: Any) -> Any:
        """The current state of projection ``key`` (the seed's ``stateOf``; dsh's ``"turnBoundary"`` works too).

        Same as :func:`dshpy.state_of` ``(session, key)``; pass the definition for a typed result.
        """
        return self._reader().state_of(self, key)

    def snapshot(self, keys: Iterable[str] | None = None) -> Any:
        """``{"as_of_seq", "values"}`` for ``keys`` (default: all), one position (the seed's ``snapshot([...])``)."""
        return self._reader().snapshot(self, keys)

    # -- admission ----------------------------------------------------------------

    def _check_writable(self) -> None:
        if self._closed:
            raise ReadOnlySessionError(f'session "{self.id}" is closed')
        if self._read_only:
            raise ReadOnlySessionError(f'session "{self.id}" is a read-only view')

    def _fork_state(self) -> Session:
        """A throwaway copy of the admission state (shares immutable events)."""
        trial = Session.__new__(Session)
        trial._header = self._header
        trial._events = cast("list[SessionEvent]", _TrialLog(self._events))
        trial._surface = self._surface.copy()
        trial._lifecycle = self._lifecycle.copy()
        trial._inherited = self._inherited
        trial._seeded = self._seeded
        trial._request_header_seq = None
        trial._turn_start = self._turn_start
        trial._resumed_at = None
        trial._listeners = []
        trial._guards = list(self._guards)
        trial.projection_runner = None  # a trial is nobody's live session
        return trial

    def _admit(self, event: SessionEvent, *, restoring: bool = False, built: bool = False) -> None:
        seq = len(self._events)
        if not built:  # append() assembles its event from checked parts; anything else is checked here
            event = checked_event(event)
        if event.seq != seq:
            raise EventError(
                f"session event seq {event.seq} is not contiguous; expected {seq}", event_type=event.type, seq=event.seq
            )
        kind = event.type
        known = kind in KNOWN_EVENT_TYPES
        if known:
            validate_event_data(kind, event.data, seq)
            if kind == "session/end-seed" and event.data.get("inherited") is True and not restoring:
                raise EventError(
                    "only a fork's starting log may carry session/end-seed {inherited: true}", event_type=kind, seq=seq
                )
        elif not event.ignorable:
            raise unknown_type_error(kind, seq)
        elif not restoring and (event.surface_op is not None or event.source_event_seqs is not None):
            # dsh readers skip an unknown ignorable record's metadata, but we never write a
            # plugin record that claims a place on the surface.
            raise SurfaceError(
                f'session event "{kind}" is not surface-eligible and cannot carry surfaceOp or sourceEventSeqs',
                event_type=kind,
                seq=seq,
            )
        plan = self._surface.plan(event, self._events)
        self._lifecycle.check(event, self._events, self._surface)
        if self._guards and not restoring:
            for guard in tuple(self._guards):
                guard(self, event)
        # commit: nothing below may raise
        self._events.append(event)
        if plan is not None:
            self._surface.commit(plan)
        self._lifecycle.apply(event)
        if known:
            if kind == "request/header":
                self._request_header_seq = seq
            elif kind == "turn/start":
                self._turn_start = seq
            elif kind == "turn/end":
                self._turn_start = None
            elif kind == "session/end-seed" and event.data.get("inherited") is True:
                self._inherited = seq
                self._seeded = True
        if self._listeners:
            for listener in tuple(self._listeners):
                try:
                    listener(self, event)
                except Exception:
                    log.exception("session listener failed on seq %d of %s", seq, self.id)

    def __repr__(self) -> str:
        return f"<Session {self.id} events={len(self._events)} pending={self.pending_count}>"
