"""Full-text search without an index: read every log in scope, match its events' text, rank with BM25.

The generic path of :class:`~dshpy.storage.backend.SearchIndex`: a backend without an
index (the memory store, a third-party backend of primitives) still answers every
search, exactly as the indexed backends do — the same extraction
(:mod:`dshpy.log.event_text`), the same words and phrases
(:mod:`dshpy.log.search_text`), forks searched through their inherited prefix — only
in time proportional to the logs. Ranking is Okapi BM25 (``k1`` 1.2, ``b`` 0.75,
FTS5's constants) over the events read, so the order agrees with SQLite's wherever the
corpus statistics do.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from dshpy.core.events import SessionEvent
from dshpy.errors import CorruptSessionError, FormatVersionError, SessionNotFound
from dshpy.log.event_text import event_text, indexable_text
from dshpy.log.header import SessionHeader
from dshpy.log.search_text import MatchExpr, words
from dshpy.storage.search_records import TextHit, TextHits, TextQuery

__all__ = ["hit_order", "rank_bm25", "scan_search"]

log = logging.getLogger("dshpy.storage.search")

_K1 = 1.2
_B = 0.75


@dataclass(slots=True)
class _Doc:
    session_id: str
    event: SessionEvent
    text: str
    words: list[str]


def _wanted(event: SessionEvent, query: TextQuery) -> bool:
    if query.types is not None and event.type not in query.types:
        return False
    if query.time_from is not None and event.time < query.time_from:
        return False
    return query.time_to is None or event.time <= query.time_to


def rank_bm25(expr: MatchExpr, docs: list[list[str]]) -> list[float | None]:
    """The BM25 score of each text (its words) that matches ``expr``, ``None`` for one that does not.

    Statistics (document count, frequencies, mean length) are taken over ``docs``;
    each positive term counts once however many groups name it.
    """
    terms = expr.positive_terms
    if not docs or not terms:
        return [None] * len(docs)
    counts = [[len(term.starts(doc)) for term in terms] for doc in docs]
    total = len(docs)
    mean = sum(len(doc) for doc in docs) / total or 1.0
    frequency = [sum(1 for row in counts if row[i]) for i in range(len(terms))]
    idf = [math.log((total - df + 0.5) / (df + 0.5) + 1.0) for df in frequency]
    scores: list[float | None] = []
    for doc, row in zip(docs, counts, strict=True):
        if not expr.matches(doc):
            scores.append(None)
            continue
        norm = _K1 * (1 - _B + _B * len(doc) / mean)
        scores.append(sum(idf[i] * tf * (_K1 + 1) / (tf + norm) for i, tf in enumerate(row) if tf))
    return scores


def hit_order(hit: TextHit) -> tuple[float, int, str, int]:
    """The order of hits every backend returns: best score, then newer events, then session id and seq."""
    return (-hit.score, -hit.time, hit.session_id, hit.seq)


def scan_search(
    query: TextQuery,
    session_ids: Iterable[str],
    header: Callable[[str], SessionHeader],
    read: Callable[[str], Iterable[SessionEvent]],
    generation: int,
) -> TextHits:
    """Search the logs ``read(session_id)`` returns (each a whole logical log) of the sessions in scope
    (``query.admits`` their ``header(session_id)``).

    A session deleted meanwhile is skipped; one whose log cannot be read is skipped
    with a warning, as a listing skips it.
    """
    docs: list[_Doc] = []
    for session_id in session_ids:
        try:
            if not query.admits(header(session_id)):
                continue
            events = list(read(session_id))
        except SessionNotFound:
            continue
        except (CorruptSessionError, FormatVersionError) as error:
            log.warning("not searching session %s: %s", session_id, error)
            continue
        for event in events:
            if not _wanted(event, query):
                continue
            text = event_text(event)
            if text:
                text = indexable_text(text)
                docs.append(_Doc(session_id, event, text, words(text)))
    scores = rank_bm25(query.expr, [doc.words for doc in docs])
    hits = [
        TextHit(doc.session_id, doc.event.seq, doc.event.type, doc.event.time, score, doc.text)
        for doc, score in zip(docs, scores, strict=True)
        if score is not None
    ]
    hits.sort(key=hit_order)
    return TextHits(hits[query.offset : query.offset + query.limit], generation)
