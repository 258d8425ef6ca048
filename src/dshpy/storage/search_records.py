"""The values that cross the storage contract for full-text search: one request, its hits, the index's state.

A store answers :class:`TextQuery` with :class:`TextHits` whether it keeps an index
(:class:`~dshpy.storage.backend.SearchIndex`) or scans its logs; the query layer
(:mod:`dshpy.query`) turns them into pages with snippets and cursors.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dshpy.log.header import SessionHeader
from dshpy.log.search_text import MatchExpr

__all__ = ["MAX_SEQ", "SearchIndexStatus", "TextHit", "TextHits", "TextQuery"]

MAX_SEQ = (1 << 63) - 1
"""An upper seq bound no log reaches: the open end of a fork's own rows in a segment query."""


@dataclass(frozen=True, slots=True)
class TextQuery:
    """Which events to match, and which page of the ranked matches to return."""

    expr: MatchExpr
    sessions: tuple[str, ...] | None = None
    """The (logical) sessions to search, an inherited fork prefix included; ``None``: every session."""
    exclude_sessions: tuple[str, ...] = ()
    """Sessions left out."""
    cwd: tuple[str | None, ...] | None = None
    """Only sessions whose header has one of these working directories (``None`` in it: no cwd)."""
    parents: tuple[str | None, ...] | None = None
    """Only sessions whose header names one of these parents (``None`` in it: no parent)."""
    created_from: int | None = None
    """Only sessions created at or after this time (epoch ms)."""
    created_to: int | None = None
    """Only sessions created at or before this time (epoch ms)."""
    types: tuple[str, ...] | None = None
    """Only events of these types; ``None``: any type."""
    time_from: int | None = None
    """Only events at or after this time (epoch ms)."""
    time_to: int | None = None
    """Only events at or before this time (epoch ms)."""
    limit: int = 20
    offset: int = 0

    @property
    def filters_headers(self) -> bool:
        """Whether sessions are chosen by their headers too (cwd, parent, creation time), not only by id."""
        return (
            self.cwd is not None
            or self.parents is not None
            or self.created_from is not None
            or self.created_to is not None
        )

    def admits(self, header: SessionHeader) -> bool:
        """Whether the session with ``header`` is in scope (the scan's check; indexes filter the same in SQL)."""
        if self.sessions is not None and header.id not in self.sessions:
            return False
        if header.id in self.exclude_sessions:
            return False
        if self.cwd is not None and header.cwd not in self.cwd:
            return False
        if self.parents is not None and header.parent_session not in self.parents:
            return False
        if self.created_from is not None and header.created_at < self.created_from:
            return False
        return self.created_to is None or header.created_at <= self.created_to


@dataclass(frozen=True, slots=True)
class TextHit:
    """One matching event: where it is, how well it matched (higher is better), and its indexed text."""

    session_id: str
    seq: int
    type: str
    time: int
    score: float
    text: str


@dataclass(frozen=True, slots=True)
class TextHits:
    """A page of hits, best first (score, then newer events, then session id and seq).

    ``generation`` changes whenever indexed rows are taken away (a session deleted, the
    index rebuilt), so a cursor that paged an older generation can be told it is stale.
    """

    hits: list[TextHit]
    generation: int


@dataclass(frozen=True, slots=True)
class SearchIndexStatus:
    """What a store's search index holds (``kind`` ``"scan"``: there is none, every search reads the logs)."""

    kind: str
    documents: int | None
    """Indexed events (events that hold text); ``None`` where nothing is indexed."""
    generation: int
    pending: int = 0
    """Sessions whose newest events are not indexed yet (a derived index catches up at the next search)."""
    location: str | None = None
    """Where a derived index lives (the JSONL sidecar), if it is a file of its own."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON form ``dshpy index status --json`` prints and ``index.status`` answers with."""
        return {
            "kind": self.kind,
            "documents": self.documents,
            "generation": self.generation,
            "pending": self.pending,
            "location": self.location,
        }
