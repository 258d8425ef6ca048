"""What a store reports about one stored session without reading its events: :class:`SessionInfo`.

A module of its own because both the store (``list``, ``stat``) and the projection
cache's listing (:class:`~dshpy.storage.projection_cache.SessionProjections`) speak of
it, and the store builds on the cache: kept in the store's module, it tied the two
into an import circle.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dshpy.log.header import SessionHeader

__all__ = ["SessionInfo"]


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
        return {
            "id": self.id,
            "createdAt": self.header.created_at,
            "updatedAt": self.updated_at,
            "cwd": self.header.cwd,
            "parentSession": self.header.parent_session,
            "isSeeded": self.header.is_seeded,
            "eventCount": self.event_count,
            "forks": list(self.forks),
        }
