"""Semantic and hybrid search as the query service runs them: the same request, scope and pages as full-text.

A semantic page ranks the events in scope by cosine with the query
(:class:`~dshpy.query.semantic.SemanticIndex`); a hybrid page fuses that list with the
store's bm25 list (:func:`~dshpy.query.semantic.reciprocal_rank_fusion`), so an exact
identifier or error message still comes first when the words match, and a paraphrase
is found when they do not. Both lists are cut at :data:`FUSION_DEPTH` (or deeper, for a
later page), and pages go by offset with the cursors full-text search uses.
"""

from __future__ import annotations

from typing import Any

from dshpy.query.cursors import encode_cursor
from dshpy.query.filters import check_limit
from dshpy.query.results import SearchHit, SearchPage
from dshpy.query.search import SEARCH_DEFAULT_LIMIT, SEARCH_MAX_LIMIT, SearchRequest, cursor_position
from dshpy.query.semantic import SemanticIndex, reciprocal_rank_fusion
from dshpy.query.snippets import make_snippet
from dshpy.storage.search_records import TextQuery

__all__ = ["FUSION_DEPTH", "run_semantic_search"]

FUSION_DEPTH = 100
"""How many hits of each list a fused ranking looks at (at least)."""

_Hit = tuple[str, int, str, int, str]
"""(session, seq, type, time, text) of a ranked event."""


def run_semantic_search(index: SemanticIndex, request: SearchRequest, *, limit: Any, cursor: Any) -> SearchPage:
    """One page of ``request`` ranked by meaning (``mode`` ``semantic``) or fused with bm25 (``hybrid``)."""
    size = check_limit(limit, SEARCH_MAX_LIMIT, default=SEARCH_DEFAULT_LIMIT)
    offset, _ = cursor_position(cursor, request.fingerprint)
    scoped = request.scoped_filters()
    sessions = None if scoped.empty else request.session_ids(index.store)
    if sessions == ():
        return SearchPage([], None)
    depth = max(FUSION_DEPTH, offset + size + 1)
    found = index.rank(
        request.text,
        sessions,
        types=request.types,
        time_from=request.time_from,
        time_to=request.time_to,
        limit=depth,
    )
    meaning: list[tuple[_Hit, float]] = [
        ((r.chunk.session_id, r.chunk.seq, r.chunk.type, r.chunk.time, r.chunk.text), r.score) for r in found
    ]
    if request.mode == "hybrid":
        meaning = _fused(index, request, sessions, meaning, depth)
    hits = [
        SearchHit(session, seq, kind, time, score, make_snippet(text, request.expr))
        for (session, seq, kind, time, text), score in meaning[offset : offset + size]
    ]
    more = len(meaning) > offset + size
    next_cursor = encode_cursor("search", request.fingerprint, [offset + size, 0]) if more else None
    return SearchPage(hits, next_cursor)


def _fused(
    index: SemanticIndex,
    request: SearchRequest,
    sessions: tuple[str, ...] | None,
    meaning: list[tuple[_Hit, float]],
    depth: int,
) -> list[tuple[_Hit, float]]:
    words = index.store.search_text(
        TextQuery(
            request.expr,
            sessions=sessions,
            types=request.types,
            time_from=request.time_from,
            time_to=request.time_to,
            limit=depth,
        )
    )
    by_key: dict[tuple[str, int], _Hit] = {}
    lexical: list[tuple[str, int]] = []
    for hit in words.hits:
        by_key[(hit.session_id, hit.seq)] = (hit.session_id, hit.seq, hit.type, hit.time, hit.text)
        lexical.append((hit.session_id, hit.seq))
    semantic: list[tuple[str, int]] = []
    for item, _ in meaning:
        by_key.setdefault((item[0], item[1]), item)
        semantic.append((item[0], item[1]))
    return [(by_key[key], score) for key, score in reciprocal_rank_fusion(lexical, semantic)]
