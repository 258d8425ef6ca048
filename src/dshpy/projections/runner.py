"""Keeping projections current on a live session: fold each committed event once.

A :class:`ProjectionRunner` attaches to one :class:`~dshpy.Session`. On attach it
brings every definition to the end of the log — from a cached row when the caller
has a usable one (only the later events are folded), from ``init()`` otherwise —
then subscribes to the session and folds each committed event exactly once. The
cost of an event does not depend on the log's length.

*When* an event is folded depends on who is watching:

* projections with a ``check`` are folded as each event commits, because the next
  append is checked against them;
* the others are folded when somebody reads (``state_of``, :func:`snapshot`, a cache
  checkpoint), in one tight loop over the events committed since the last read —
  unless a change listener is registered, in which case the runner subscribes to the
  session and folds every projection per event, so that listeners hear each change
  as it happens.

Why lazily: a live session's appends are on the durable write path, and folding
six built-ins per append, interleaved with admission and storage code, cost about
as much again as the append itself; the same folds run back to back on a batch
cost roughly half, and nobody reads most states between two appends. Reading is
never stale: every read first folds what it has not seen.

States are published as one immutable ``(as_of_seq, states)`` pair, so
:func:`snapshot` never mixes two positions even while another thread appends.
Change listeners hear ``(session, key, state, seq)`` only when a state is a new
object.

Projections with a ``check`` become an append guard (:meth:`Session.add_guard`):
the candidate is checked against the state as of the events before it, so the
runner can refuse an event it would otherwise fold (the lifecycle's illegal
transitions, appends to an archived session).

Stores do this for every session they create, open or fork
(:mod:`dshpy.storage.live_session`): ``attach(session, cached=rows)`` with the
rows that match the session's identity — ``runner.seeding`` says which rows were used
and which were stale (re-folded) — and, after a flush (never before: the cache must
not lead the durable log), ``runner.checkpoint()`` is written back.

A session has at most one runner, kept in the session's own slot
(``Session.projection_runner``): :func:`attach` creates it, :func:`runner_of` finds it,
and it goes when the session goes.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple, TypedDict, overload

from dshpy.core.events import SessionEvent
from dshpy.core.json import JsonValue
from dshpy.errors import ProjectionError
from dshpy.log.session import Session, read_projections_with
from dshpy.projections.checkpoint import CachedState, SeedOutcome, restore
from dshpy.projections.definition import ProjectionDefinition, ProjectionState, S, window
from dshpy.projections.names import canonical_key
from dshpy.projections.registry import ProjectionRegistry, default_registry

__all__ = [
    "ChangeListener",
    "ProjectionRunner",
    "Seeding",
    "Snapshot",
    "attach",
    "detach",
    "on_change",
    "runner_of",
    "snapshot",
    "state_of",
]

log = logging.getLogger("dshpy.projections")

ChangeListener = Callable[[Session, str, Any, int], None]
"""``listener(session, key, state, seq)``: ``key``'s state became ``state`` at event ``seq``."""


class Snapshot(TypedDict):
    """Dumped states of several projections, all as of the same event."""

    as_of_seq: int
    """Last seq folded into every value (``-1`` for an empty log)."""
    values: dict[str, JsonValue]


class Seeding(NamedTuple):
    """How a runner started one projection: ``outcome`` and the first seq it folded."""

    outcome: SeedOutcome
    from_seq: int


class ProjectionRunner:
    """Incremental folding of a set of projections over one live session.

    Create it with :func:`attach` (one runner per session); reading functions
    (:func:`state_of`, :func:`snapshot`) attach one with the default registry on
    first use.
    """

    def __init__(
        self,
        session: Session,
        definitions: Iterable[ProjectionDefinition[Any]],
        *,
        cached: Mapping[str, CachedState] | None = None,
    ) -> None:
        self._session = weakref.ref(session)
        self._lock = threading.RLock()
        self._defs: list[ProjectionDefinition[Any]] = []
        self._index: dict[str, int] = {}
        self._applies: list[Callable[[Any, SessionEvent], Any]] = []
        self._routes: dict[str, tuple[int, ...]] = {}
        self._checks: tuple[int, ...] = ()
        self._listeners: list[ChangeListener] = []
        self._dumps: dict[int, tuple[Any, JsonValue]] = {}
        self._seeding: dict[str, Seeding] = {}
        self._remove_guard: Callable[[], None] | None = None
        self._unsubscribe: Callable[[], None] | None = None
        """Removes the subscription: :meth:`_on_commit` while the runner has checks, :meth:`_on_event` while it has
        change listeners, none otherwise."""
        self._check_types: frozenset[str] | None = frozenset()
        self._check_calls: tuple[tuple[int, Callable[[Any, SessionEvent], None]], ...] = ()
        self._trial: tuple[weakref.ref[Session], int, tuple[Any, ...]] | None = None
        """The check states a batch trial reached at its last candidate, so that a batch costs O(n), not O(n²)."""
        rows = cached or {}
        with self._lock:
            events = session.events
            states: list[Any] = []
            for definition in definitions:
                if definition.key in self._index:
                    raise ProjectionError(f'projection "{definition.key}" given twice')
                restored = restore(definition, rows.get(definition.key), events)
                self._seeding[definition.key] = Seeding(restored.outcome, restored.from_seq)
                self._install(definition)
                states.append(restored.state)
            self._view: tuple[int, tuple[Any, ...]] = (len(events) - 1, tuple(states))
            self._checked: tuple[int, tuple[Any, ...]] = self._checked_from_view()
            """The states of the projections with a check (in ``_checks`` order) as of a committed seq, normally the
            last: any correct ``(seq, states)`` pair will do, older ones are folded forward where they are used."""
            self._update_guard(session)
            self._resubscribe(session)

    # -- reading ------------------------------------------------------------------

    @property
    def session(self) -> Session | None:
        """The session (``None`` once it has been garbage-collected)."""
        return self._session()

    @property
    def as_of_seq(self) -> int:
        """The last seq folded into every state (``-1`` for an empty log)."""
        return self._current()[0]

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(d.key for d in self._defs)

    @property
    def seeding(self) -> Mapping[str, Seeding]:
        """Per key, how the state was started at attach (``cached`` rows vs re-folds)."""
        return dict(self._seeding)

    def definition(self, key: str) -> ProjectionDefinition[Any]:
        return self._defs[self._position(key)]

    def __contains__(self, key: object) -> bool:
        return (canonical_key(key) if isinstance(key, str) else key) in self._index

    @overload
    def state(self, key: ProjectionDefinition[S]) -> S: ...
    @overload
    def state(self, key: str) -> ProjectionState: ...
    def state(self, key: str | ProjectionDefinition[Any]) -> Any:
        """The current state of ``key`` (a key or the definition itself, for a typed result)."""
        name = key.key if isinstance(key, ProjectionDefinition) else key
        return self._current()[1][self._position(name)]

    def snapshot(self, keys: Iterable[str] | None = None) -> Snapshot:
        """``{"as_of_seq", "values": {key: dumped state}}`` for ``keys`` (default: all), one position."""
        seq, states = self._current()
        names = self.keys if keys is None else tuple(keys)
        values: dict[str, JsonValue] = {}
        for name in names:
            index = self._position(name)
            values[name] = self._dump(index, states[index])
        return {"as_of_seq": seq, "values": values}

    def checkpoint(self, keys: Iterable[str] | None = None) -> dict[str, CachedState]:
        """Cache rows for ``keys`` (default: all), all at :attr:`as_of_seq`.

        Write them only once the session's log is flushed through that seq.
        """
        seq, states = self._current()
        names = self.keys if keys is None else tuple(keys)
        rows: dict[str, CachedState] = {}
        for name in names:
            index = self._position(name)
            rows[name] = CachedState(self._defs[index].state_version, seq, self._dump(index, states[index]))
        return rows

    # -- changing what is folded -----------------------------------------------------

    def add(self, definition: ProjectionDefinition[Any]) -> None:
        """Start folding ``definition`` too (its state is folded from the whole log once)."""
        session = self._live_session()
        with self._lock:
            existing = self._index.get(definition.key)
            if existing is not None:
                if self._defs[existing] != definition:
                    raise ProjectionError(
                        f'projection "{definition.key}" is already folded by this runner with a different definition'
                    )
                return
            self._catch_up(session)
            seq, states = self._view
            state = definition.fold(window(session.events, 0, seq + 1))
            self._seeding[definition.key] = Seeding("fresh", 0)
            self._view = (seq, (*states, state))  # the state exists before any index or guard points at it
            self._install(definition)
            self._checked = self._checked_from_view()
            self._update_guard(session)
            self._resubscribe(session)

    def on_change(self, listener: ChangeListener) -> Callable[[], None]:
        """Call ``listener(session, key, state, seq)`` whenever a state becomes a new object; returns a remover.

        While any listener is registered every projection is folded as each event
        commits (see the module docstring); the listener hears changes from events
        committed after it was added.
        """
        session = self._live_session()
        with self._lock:
            self._catch_up(session)
            self._listeners.append(listener)
            self._resubscribe(session)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def sync(self) -> None:
        """Fold every committed event this runner has not folded yet (reads do this themselves)."""
        self._current()

    def detach(self) -> None:
        """Stop following the session: no more folding, no more guard."""
        with self._lock:
            if self._unsubscribe is not None:
                self._unsubscribe()
                self._unsubscribe = None
            if self._remove_guard is not None:
                self._remove_guard()
                self._remove_guard = None
            session = self._session()
            with _attach_lock:
                if session is not None and session.projection_runner is self:
                    session.projection_runner = None

    # -- internals ----------------------------------------------------------------

    def _position(self, key: str) -> int:
        index = self._index.get(canonical_key(key))  # dsh's names (``turnBoundary``) are aliases
        if index is None:
            known = ", ".join(self._index) or "none"
            raise ProjectionError(f'projection "{key}" is not folded for this session (folded: {known})')
        return index

    def _live_session(self) -> Session:
        session = self._session()
        if session is None:
            raise ProjectionError("the session of this projection runner no longer exists")
        return session

    def _install(self, definition: ProjectionDefinition[Any]) -> None:
        self._index[definition.key] = len(self._defs)
        self._defs.append(definition)
        self._applies.append(definition.apply)
        self._routes = {}
        self._checks = tuple(i for i, d in enumerate(self._defs) if d.check is not None)
        self._check_calls = tuple(
            (position, check) for position, index in enumerate(self._checks) if (check := self._defs[index].check)
        )
        types = [self._defs[index].types for index in self._checks]
        self._check_types = None if any(t is None for t in types) else frozenset().union(*types)  # type: ignore[arg-type]

    def _resubscribe(self, session: Session) -> None:
        """Follow the session the cheapest way that keeps checks current (and listeners served, if any)."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        if self._listeners:
            self._unsubscribe = session.subscribe(self._on_event)
        elif self._checks:
            self._unsubscribe = session.subscribe(self._on_commit)

    def _checked_from_view(self) -> tuple[int, tuple[Any, ...]]:
        seq, states = self._view
        return seq, tuple(states[index] for index in self._checks)

    def _current(self) -> tuple[int, tuple[Any, ...]]:
        """The view, after folding whatever the session committed since it was last brought up to date."""
        session = self._session()
        if session is not None and len(session) - 1 > self._view[0]:
            with self._lock:
                self._catch_up(session)
        return self._view

    def _update_guard(self, session: Session) -> None:
        if self._checks and self._remove_guard is None:
            self._remove_guard = session.add_guard(self._guard)

    def _route(self, event_type: str) -> tuple[int, ...]:
        targets = tuple(i for i, d in enumerate(self._defs) if d.concerns(event_type))
        self._routes[event_type] = targets
        return targets

    def _dump(self, index: int, state: Any) -> JsonValue:
        cached = self._dumps.get(index)
        if cached is not None and cached[0] is state:
            return cached[1]
        dumped = self._defs[index].dump(state)
        self._dumps[index] = (state, dumped)
        return dumped

    def _on_event(self, session: Session, event: SessionEvent) -> None:
        """Subscribed only while change listeners exist: fold every projection as each event commits."""
        with self._lock:
            expected = self._view[0] + 1
            if event.seq == expected:
                self._fold(session, event)
                if self._checks:
                    self._checked = self._checked_from_view()
            elif event.seq > expected:
                self._catch_up(session)

    def _fold_checks(self, events: Sequence[SessionEvent], states: tuple[Any, ...]) -> tuple[Any, ...]:
        """The check projections' ``states`` after ``events``."""
        return tuple(self._defs[index].fold(events, states[position]) for position, index in enumerate(self._checks))

    def _on_commit(self, session: Session, event: SessionEvent) -> None:
        """Subscribed while there are checks and no change listeners: fold the check projections only.

        Called by the appending thread in commit order, so no lock: a reader catching up
        concurrently may store an older pair, which is folded forward next time.
        """
        seq, states = self._checked
        if event.seq != seq + 1:
            with self._lock:
                self._advance_checks(session)
            return
        types = self._check_types
        if types is None or event.type in types:
            states = self._fold_checks((event,), states)
        self._checked = (event.seq, states)

    def _advance_checks(self, session: Session) -> tuple[int, tuple[Any, ...]]:
        """Bring the check projections to the end of ``session``'s committed log (caller holds the lock)."""
        seq, states = self._checked
        end = len(session) - 1
        if end > seq:
            states = self._fold_checks(session.events[seq + 1 : end + 1], states)
            self._checked = (end, states)
            seq = end
        return seq, states

    def _catch_up(self, session: Session) -> None:
        """Fold every committed event after the view into every state (caller holds the lock)."""
        seq = self._view[0]
        end = len(session) - 1
        if end <= seq:
            return
        if self._listeners:
            for event in window(session.events, seq + 1, end + 1):
                self._fold(session, event)
            self._checked = self._checked_from_view()
            return
        if self._checks:
            checked_seq, checked = self._advance_checks(session)
            end = checked_seq  # (a concurrent append may have landed since len() above; fold what the checks saw)
            skip = frozenset(self._checks)
        else:
            checked, skip = (), frozenset()
        states = list(self._view[1])
        run = session.events[seq + 1 : end + 1]  # a view's slice copies only the slice
        for index, definition in enumerate(self._defs):
            if index not in skip:
                states[index] = definition.fold(run, states[index])
        for position, index in enumerate(self._checks):
            states[index] = checked[position]
        self._view = (end, tuple(states))

    def _fold(self, session: Session, event: SessionEvent) -> None:
        states = self._view[1]
        targets = self._routes.get(event.type)
        if targets is None:
            targets = self._route(event.type)
        if not targets:
            self._view = (event.seq, states)
            return
        changed: list[int] = []
        new_states: list[Any] | None = None
        applies = self._applies
        for index in targets:
            old = states[index]
            new = applies[index](old, event)
            if new is not old:
                if new_states is None:
                    new_states = list(states)
                new_states[index] = new
                changed.append(index)
        if new_states is None:
            self._view = (event.seq, states)
            return
        states = tuple(new_states)
        self._view = (event.seq, states)
        for index in changed:
            self._notify(session, self._defs[index].key, states[index], event.seq)

    def _notify(self, session: Session, key: str, state: Any, seq: int) -> None:
        for listener in tuple(self._listeners):
            try:
                listener(session, key, state, seq)
            except Exception:
                log.exception("projection listener failed on %s at seq %d of %s", key, seq, session.id)

    def _guard(self, session: Session, event: SessionEvent) -> None:
        seq, states = self._checked
        if event.seq > seq + 1:  # a batch trial (or a pair a reader left behind): fold up to the candidate
            trial = self._trial
            if trial is not None and trial[0]() is session and seq <= trial[1] < event.seq:
                seq, states = trial[1], trial[2]  # this trial's earlier candidates, folded at its last call
            run = list(window(session.events, seq + 1, event.seq))  # a trial's log does not slice
            states = self._fold_checks(run, states)
            self._trial = (weakref.ref(session), event.seq - 1, states)
        for position, check in self._check_calls:
            check(states[position], event)

    def __repr__(self) -> str:
        return f"<ProjectionRunner {list(self._index)} as_of_seq={self._view[0]}>"


# -- one runner per session ---------------------------------------------------------------
#
# A session's runner is kept in the session's own slot (Session.projection_runner), so it lives as long as the
# session and no longer; the lock only makes "find or create" one step when two threads attach at once.

_attach_lock = threading.Lock()


def attach(
    session: Session,
    registry: ProjectionRegistry | None = None,
    *,
    cached: Mapping[str, CachedState] | None = None,
) -> ProjectionRunner:
    """The session's runner, created on first call with ``registry``'s definitions (default: built-ins).

    ``cached`` seeds a new runner from cache rows (key → :class:`CachedState`); stale
    rows are discarded and those states re-folded (see ``runner.seeding``). Seeding
    is only possible when the runner is created: passing ``cached`` for a session
    that already has one raises :class:`~dshpy.errors.ProjectionError`. Calling
    again with another ``registry`` adds its missing definitions.
    """
    chosen = default_registry() if registry is None else registry
    with _attach_lock:
        runner = runner_of(session)
        if runner is None:
            runner = ProjectionRunner(session, chosen, cached=cached)
            session.projection_runner = runner
            return runner
    if cached is not None:
        raise ProjectionError(
            f'session "{session.id}" already has a projection runner; seed it from the cache when the session is '
            "opened, before anything reads its projections"
        )
    if registry is not None:
        for definition in registry:
            runner.add(definition)
    return runner


def runner_of(session: Session) -> ProjectionRunner | None:
    """The session's runner, if one is attached."""
    runner = session.projection_runner
    return runner if isinstance(runner, ProjectionRunner) else None


def detach(session: Session) -> None:
    """Detach the session's runner, if any (its guards go with it)."""
    runner = runner_of(session)
    if runner is not None:
        runner.detach()


def _runner_with(session: Session, key: str | ProjectionDefinition[Any]) -> ProjectionRunner:
    runner = attach(session)
    name = key.key if isinstance(key, ProjectionDefinition) else canonical_key(key)
    if name not in runner:
        definition = key if isinstance(key, ProjectionDefinition) else default_registry().get(name)
        if definition is None:
            raise ProjectionError(
                f'no projection "{name}" for session "{session.id}" (folded: {", ".join(runner.keys) or "none"})'
            )
        runner.add(definition)
    runner.sync()
    return runner


@overload
def state_of(session: Session, key: ProjectionDefinition[S]) -> S: ...
@overload
def state_of(session: Session, key: str) -> ProjectionState: ...
def state_of(session: Session, key: str | ProjectionDefinition[Any]) -> Any:
    """The current state of projection ``key`` on ``session`` (dsh's ``stateOf``; dsh's key names work too).

    Pass the definition (e.g. ``USAGE``) instead of its key for a typed result. A
    session without a runner gets one with the default registry; a key the runner
    does not fold yet (a definition registered later) is folded from the log once.
    """
    return _runner_with(session, key).state(key)


def snapshot(session: Session, keys: Iterable[str] | None = None) -> Snapshot:
    """``{"as_of_seq": n, "values": {key: JSON}}`` for ``keys`` (default: every folded projection).

    A key may be dsh's name (``"turnBoundary"``); its value is listed under the name asked for.

    All values are as of the same event, ``as_of_seq`` (``-1`` for an empty log);
    they are frozen JSON, safe to share and to serialize.
    """
    runner = attach(session)
    names = None if keys is None else tuple(keys)
    for name in names or ():
        _runner_with(session, name)
    runner.sync()
    return runner.snapshot(names)


def on_change(session: Session, listener: ChangeListener) -> Callable[[], None]:
    """Call ``listener(session, key, state, seq)`` when one of the session's projection states changes."""
    return attach(session).on_change(listener)


class _Reader:
    """What :meth:`Session.state_of` and :meth:`Session.snapshot` call (registered below, when this module loads)."""

    state_of = staticmethod(state_of)
    snapshot = staticmethod(snapshot)


read_projections_with(_Reader())
