"""``lifecycle``: the session state machine, kept in the log like everything else.

The states (DESIGN.md §5, the seed's session lifecycle)::

    created ──► active ◄──► paused
                  │            │
                  └──► completed | failed ──► archived

* ``created`` — a new session; nothing has run yet.
* ``active`` — running, or ready to run the next turn.
* ``paused`` — a user or the runtime stopped it; no turn may start until it resumes.
* ``completed`` / ``failed`` — done, successfully or not; no turn may start (fork the
  session to go on from it).
* ``archived`` — put away: read-only, every append is refused.

A turn whose ``turn/end`` reason is ``error`` — a model failure the agent's retries
did not get past, or a turn the runtime could not finish — makes an ``active`` or
``paused`` session ``failed`` by itself (the seed's "交互失败": the interaction
failed), with the error's message as the reason; no record is written for it, so
every reader of the log, CLI and server alike, agrees. An aborted, interrupted or
cut (``max-tokens``) turn is not a failure. A new turn on a ``failed`` session makes it
``active`` again — the user tried again, as dsh lets one do after an error, and as
logs dsh wrote do — while ``completed`` starts no new turn (fork it to go on).

A transition is recorded by appending ``plugin:dshpy/session-state`` with ``{state,
reason?}`` (the write command :func:`~dshpy.projections.commands.set_lifecycle`);
dshpy's plugin records are ``ignorable``, so dsh still reads the session. A session
also becomes ``active`` by itself at a
``turn/start`` while it is ``created`` (the first turn, when nothing recorded a
state), so sessions written without these records read as one would expect.

The state machine is enforced at append, by the runner's guard: a record asking for
an illegal transition, a ``turn/start`` while the session is ``paused``,
``completed`` or ``archived``, archiving while a turn is open (its closers could then never be
written), and anything at all after ``archived`` raise
:class:`~dshpy.errors.LifecycleError` (:class:`~dshpy.errors.SessionArchivedError`
for the last) and commit nothing. The fold agrees with the guard: an event the guard
refuses is a no-op for ``apply``, so a log written without the guard (another tool,
an older build) still folds deterministically. The guard lives with the session's
projection runner: it is in place once anything attached one
(:func:`~dshpy.projections.attach`, ``set_lifecycle``, ``state_of``), which is
why a store's sessions get theirs when they are created, opened or forked.

A fork's child is a new session: at its inherited ``session/end-seed`` marker the
state starts over at ``created`` (a fork of an archived session can be continued).
"""

from __future__ import annotations

from typing import Any, Final, Literal, get_args

from dshpy.core.events import SessionEvent
from dshpy.errors import LifecycleError, SessionArchivedError
from dshpy.projections.definition import ProjectionDefinition, ProjectionState

__all__ = [
    "LIFECYCLE",
    "SESSION_STATES",
    "SESSION_STATE_TYPE",
    "TRANSITIONS",
    "LifecycleState",
    "SessionState",
]

SESSION_STATE_TYPE: Final = "plugin:dshpy/session-state"
"""The plugin record that moves the state machine: data ``{"state": ..., "reason"?: str}``."""

SessionState = Literal["created", "active", "paused", "completed", "failed", "archived"]

SESSION_STATES: Final[tuple[SessionState, ...]] = get_args(SessionState)

TRANSITIONS: Final[dict[SessionState, frozenset[SessionState]]] = {
    "created": frozenset({"active"}),
    "active": frozenset({"paused", "completed", "failed"}),
    "paused": frozenset({"active", "completed", "failed"}),
    "completed": frozenset({"archived"}),
    "failed": frozenset({"archived"}),
    "archived": frozenset(),
}
"""Legal ``from → to`` moves. ``paused → completed | failed`` is read from the seed's
``active ⇄ paused → completed | failed``; staying in the same state is not a move."""

_RUNNABLE: Final = frozenset({"created", "active", "failed"})
"""States a ``turn/start`` may follow (``created`` and ``failed`` become ``active`` at it)."""


class LifecycleState(ProjectionState):
    """The session's lifecycle state, why and since when."""

    state: SessionState = "created"
    reason: str | None = None
    """The ``reason`` of the record that set the state, if it gave one."""
    since_seq: int | None = None
    """The event that set the state (``None``: the initial ``created``)."""
    since_time: int | None = None
    turn_open: bool = False
    """Internal: whether a turn is open (archiving is refused while one is)."""


def _record(data: Any) -> tuple[SessionState, str | None] | str:
    """``(state, reason)`` from a session-state record, or a description of what is wrong with it."""
    if not isinstance(data, dict):
        return "data must be an object {state, reason?}"
    extra = set(data) - {"state", "reason"}
    if extra:
        return f"unexpected keys {sorted(extra)} (only state and reason)"
    state = data.get("state")
    if state not in SESSION_STATES:
        return f"state must be one of {', '.join(SESSION_STATES)}, got {state!r}"
    reason = data.get("reason")
    if reason is not None and not isinstance(reason, str):
        return "reason must be a string"
    return state, reason


def _refusal(state: LifecycleState, event: SessionEvent) -> LifecycleError | None:
    """Why ``event`` may not follow ``state``, or ``None`` if it may (the guard and the fold share it)."""
    current = state.state
    kind = event.type
    if current == "archived":
        return SessionArchivedError(
            f'session is archived (at seq {state.since_seq}) and read-only: "{kind}" refused',
            state=current,
            event_type=kind,
            seq=event.seq,
        )
    if kind == SESSION_STATE_TYPE:
        parsed = _record(event.data)
        if isinstance(parsed, str):
            return LifecycleError(
                f"invalid {SESSION_STATE_TYPE} record at seq {event.seq}: {parsed}",
                state=current,
                event_type=kind,
                seq=event.seq,
            )
        target = parsed[0]
        if target not in TRANSITIONS[current]:
            allowed = ", ".join(sorted(TRANSITIONS[current])) or "none"
            return LifecycleError(
                f"illegal session lifecycle transition {current} → {target} at seq {event.seq} "
                f"(from {current}: {allowed})",
                state=current,
                target=target,
                event_type=kind,
                seq=event.seq,
            )
        if target == "archived" and state.turn_open:
            return LifecycleError(
                f"cannot archive at seq {event.seq} while a turn is open; end the turn first",
                state=current,
                target=target,
                event_type=kind,
                seq=event.seq,
            )
    elif kind == "turn/start" and current not in _RUNNABLE:
        hint = "resume it first" if current == "paused" else "fork it to continue"  # completed
        return LifecycleError(
            f"cannot start a turn at seq {event.seq}: the session is {current}; {hint}",
            state=current,
            event_type=kind,
            seq=event.seq,
        )
    return None


def _turn_failure(data: Any) -> str | None:
    """The error message of a ``turn/end`` that ended in ``error`` (``None`` for every other ending)."""
    reason = data.get("reason") if isinstance(data, dict) else None
    if not isinstance(reason, dict) or reason.get("kind") != "error":
        return None
    error = reason.get("error")
    message = error.get("message") if isinstance(error, dict) else None
    return message if isinstance(message, str) and message else "the turn ended in an error"


def check_lifecycle(state: LifecycleState, event: SessionEvent) -> None:
    """The append guard: raise the refusal, if there is one."""
    kind = event.type
    if kind != "turn/start" and kind != SESSION_STATE_TYPE and state.state != "archived":  # noqa: PLR1714
        return  # nothing else is ever refused (this runs before every append)
    refusal = _refusal(state, event)
    if refusal is not None:
        raise refusal


def apply_lifecycle(state: LifecycleState, event: SessionEvent) -> LifecycleState:
    kind = event.type
    if kind == "session/end-seed":
        inherited = isinstance(event.data, dict) and event.data.get("inherited") is True
        if not inherited or (state.state == "created" and state.since_seq is None):
            return state
        return LifecycleState(turn_open=state.turn_open)  # a fork's child starts its own life
    if _refusal(state, event) is not None:  # what the guard refuses, the fold ignores
        return state
    if kind == "turn/end":
        failure = _turn_failure(event.data)
        if failure is not None and state.state in ("active", "paused"):
            return LifecycleState(state="failed", reason=failure, since_seq=event.seq, since_time=event.time)
        return state.evolve(turn_open=False) if state.turn_open else state
    if kind == "turn/start":
        if state.state in ("created", "failed"):
            return LifecycleState(state="active", since_seq=event.seq, since_time=event.time, turn_open=True)
        return state.evolve(turn_open=True)
    parsed = _record(event.data)
    if isinstance(parsed, str):  # unreachable: _refusal accepted the record
        return state
    target, reason = parsed
    return LifecycleState(
        state=target, reason=reason, since_seq=event.seq, since_time=event.time, turn_open=state.turn_open
    )


LIFECYCLE: ProjectionDefinition[LifecycleState] = ProjectionDefinition(
    key="lifecycle",
    state_version=2,
    state_schema=LifecycleState,
    init=LifecycleState,
    apply=apply_lifecycle,
    types=frozenset({SESSION_STATE_TYPE, "turn/start", "turn/end", "session/end-seed"}),
    check=check_lifecycle,
)
"""created → active ⇄ paused → completed | failed → archived, enforced at append."""
