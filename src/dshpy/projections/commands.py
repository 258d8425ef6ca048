"""Commands that write to a session and rely on a projection's append guard: :func:`set_lifecycle`.

A command is not a projection: it appends through the session API, and what makes it
safe is the guard the session's runner installs (the ``lifecycle`` projection's
check). It therefore sits beside the runner's reading functions (``state_of``,
``snapshot``), above the built-in definitions, which stay pure folds that import
nothing of the runner.
"""

from __future__ import annotations

from typing import Any

from dshpy.core.events import SessionEvent
from dshpy.log.session import Session
from dshpy.projections.builtins.lifecycle import LIFECYCLE, SESSION_STATE_TYPE, SessionState
from dshpy.projections.runner import attach

__all__ = ["set_lifecycle"]


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
