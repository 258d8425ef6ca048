"""The values that cross the storage contract: what a backend stores for a session, and what listing reports.

They sit in a module of their own so the caller's protocol (:mod:`dshpy.storage.contract`),
the backend's protocols (:mod:`dshpy.storage.backend`) and the projection cache can all
name them without importing the shared store logic.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dshpy.core.events import SessionEvent
from dshpy.log.header import FORMAT_VERSION, SessionHeader

__all__ = ["SessionInfo", "StoredRecord"]


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """What ``list``/``stat`` report about one stored session."""

    id: str
    header: SessionHeader
    event_count: int
    updated_at: int
    """Time of the last event (epoch ms), or ``createdAt`` for an empty log."""
    forks: tuple[str, ...] = ()
    """Ids of sessions forked from this one that this store knows."""
    stored_version: int = FORMAT_VERSION
    """The format generation on disk. Older than the current one, the session reads as its in-memory
    upgrade (``header`` and ``event_count`` are the upgraded log's) until a writer or an upgrade stores it."""

    @property
    def format_status(self) -> str:
        """dsh's ``formatStatus``: ``"current"``, or ``"migration-required"`` for an older stored generation."""
        return "current" if self.stored_version >= FORMAT_VERSION else "migration-required"

    @property
    def created_at(self) -> int:
        return self.header.created_at

    @property
    def cwd(self) -> str | None:
        return self.header.cwd

    @property
    def parent_session(self) -> str | None:
        return self.header.parent_session

    def to_dict(self) -> dict[str, Any]:
        """The JSON form; an old generation adds ``formatStatus`` and ``storedVersion`` (current ones are unchanged)."""
        record: dict[str, Any] = {
            "id": self.id,
            "createdAt": self.header.created_at,
            "updatedAt": self.updated_at,
            "cwd": self.header.cwd,
            "parentSession": self.header.parent_session,
            "isSeeded": self.header.is_seeded,
            "eventCount": self.event_count,
            "forks": list(self.forks),
        }
        if self.stored_version < FORMAT_VERSION:
            record["formatStatus"] = self.format_status
            record["storedVersion"] = self.stored_version
        return record


@dataclass(slots=True)
class StoredRecord:
    """A backend's view of one session: header, lineage base, and its own events."""

    header: SessionHeader
    base: tuple[str, int] | None = None
    """``(parent id, inherited count)`` when the prefix is read from the parent (zero-copy fork)."""
    events: list[SessionEvent] = field(default_factory=list)
