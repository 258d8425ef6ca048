"""Continuing a stored session: dsh's resume marker, and the system prompt the session last ran with.

These read (and, for the marker, append to) a whole :class:`~dshpy.log.session.Session`,
where :mod:`dshpy.log.records` builds and reads the data of single events. They are
kept apart because the session's own invariants reach the records module (the repair
closers are built there), so that module must not need the session.
"""

from __future__ import annotations

from dshpy.core.events import SessionEvent
from dshpy.log.records import message_text
from dshpy.log.session import Session

__all__ = ["RESUME_MARKER", "append_resume_marker", "needs_resume_marker", "system_head", "system_prompt_text"]

RESUME_MARKER = "session/end-seed"
"""The type dsh appends (data ``{}``) when a session is continued by a new process."""


def needs_resume_marker(session: Session) -> bool:
    """A session with events that does not already end in a marker needs one before new work."""
    return bool(len(session)) and session.events[-1].type != RESUME_MARKER


def append_resume_marker(session: Session) -> SessionEvent | None:
    """Append and flush dsh's resume marker if the session needs one (see :func:`needs_resume_marker`)."""
    if not needs_resume_marker(session):
        return None
    event = session.append(RESUME_MARKER, {})
    session.flush()
    return event


def system_head(session: Session) -> SessionEvent | None:
    """The ``system/message`` holding surface node 0, if the surface starts with one."""
    nodes = session.surface_nodes
    if not nodes:
        return None
    event = session.events[nodes[0]]
    return event if event.type == "system/message" else None


def system_prompt_text(session: Session) -> str:
    """The system prompt the session's model last saw (``""`` when it has none)."""
    head = system_head(session)
    return message_text(head) if head is not None else ""
