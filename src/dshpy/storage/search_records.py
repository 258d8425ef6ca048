"""The values that cross the storage contract for full-text search: one request, its hits, the index's state.

A store answers :class:`TextQuery` with :class:`TextHits` whether it keeps an index
(:class:`~dshpy.storage.backend.SearchIndex`) or scans its logs; the query layer
(:mod:`dshpy.query`) turns them into pages with snippets and cursors.
"""

from __future__ import annotations

from dataclasses import dataclass

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
    types: tuple[str, ...] | None = None
    """Only events of these types; ``None``: any type."""
    time_from: int | None = None
    """Only events at or after this time (epoch ms)."""
    time_to: int | None = None
    """Only events at or before this time (epoch ms)."""
    limit: int = 20
    offset: int = 0


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
