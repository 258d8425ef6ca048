"""Commands that write to a session and rely on a projection's append guard: :func:`set_lifecycle`,
and :func:`turn_refusal`, the same guard asked before a runtime writes anything for a turn.

A command is not a projection: it appends through the session API, and what makes it
safe is the guard the session's runner installs (the ``lifecycle`` projection's
check). It therefore sits beside the runner's reading functions (``state_of``,
``snapshot``), above the built-in definitions, which stay pure folds that import
nothing of the runner.
"""

from __future__ import annotations

from typing import Any

from dshpy.core.events import SessionEvent
from dshpy.errors import LifecycleError, SessionArchivedError
from dshpy.log.session import Session
from dshpy.projections.builtins.lifecycle import LIFECYCLE, SESSION_STATE_TYPE, SessionState
from dshpy.projections.runner import attach, state_of

__all__ = ["set_lifecycle", "turn_refusal"]


def set_lifecycle(session: Session, state: SessionState, reason: str | None = None) -> SessionEvent:
    """Move ``session`` to ``state`` by appending a ``plugin:dshpy/session-state`` record; returns it.

    Attaches the session's projection runner first (so the guard is in place) and
    raises :class:`~dshpy.errors.LifecycleError` for an illegal transition, or
    :class:`~dshpy.errors.SessionArchivedError` if the session is archived; nothing
    is appended then. Like any append, the record is durable after ``session.flush()``.
    """
    attach(session).add(LIFECYCLE)
    data: dict[str, Any] = {"state": state}
    if reason is not None:
        data["reason"] = reason
    return session.append(SESSION_STATE_TYPE, data)


def turn_refusal(session: Session) -> LifecycleError | None:
    """Why no turn may start on ``session`` now, or ``None`` if one may.

    The lifecycle guard refuses a ``turn/start`` outside ``created`` and ``active``,
    but a runtime writes events before it (the inbox splice, the resume marker); a
    turn that is refused must leave nothing behind, so runtimes ask here first and
    write only when the answer is ``None``. The error names the state and the way on.
    """
    lifecycle = state_of(session, LIFECYCLE)
    current = lifecycle.state
    name = session.id
    if current in ("created", "active", "failed"):  # a failed session is tried again by a new turn
        return None
    if current == "archived":
        return SessionArchivedError(
            f'session "{name}" is archived and read-only', state=current, event_type="turn/start"
        )
    if current == "paused":
        return LifecycleError(f'session "{name}" is paused; resume it first', state=current, event_type="turn/start")
    return LifecycleError(f'session "{name}" is {current}; fork it to continue', state=current, event_type="turn/start")
