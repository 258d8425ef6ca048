"""Semantic search: keep every event's text embedded, rank by cosine, and fuse with bm25 for hybrid.

The vectors are derived data, caught up on demand: before a search, :meth:`SemanticIndex.sync`
reads each session in scope that changed since (by its event count, from
:meth:`~dshpy.storage.contract.SessionStore.lengths`, which reads no header) from the
last seq it embedded (forks read through their inherited prefix, whose texts hash the
same and so are not embedded again), embeds
only texts whose (model, content hash) has no vector yet, and forgets sessions that
were deleted. :meth:`SemanticIndex.sync_in_background` does the same on a thread, so a
caller can warm the index before anyone searches.

Ranking is the cosine of the query's vector with each event's, computed with numpy
over the chunks in scope (a plain table, not an ANN index: exact, and fast enough for
a million events). Hybrid is reciprocal-rank fusion (``1/(60 + rank)`` summed over
the bm25 list and the cosine list), which needs no calibration between the two scores.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dshpy.errors import CorruptSessionError, FormatVersionError, SessionNotFound
from dshpy.log.event_text import event_text, indexable_text
from dshpy.query.embedding import Embedder, require_numpy
from dshpy.query.vector_store import Chunk, VectorStore
from dshpy.storage.contract import SessionStore

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["RRF_K", "Ranked", "SemanticIndex", "reciprocal_rank_fusion"]

log = logging.getLogger("dshpy.query.semantic")

RRF_K = 60
"""Reciprocal-rank fusion's constant (Cormack et al.): damps the head so one list cannot dominate."""
_EMBED_BATCH = 2048
_MAX_EMBED_CHARS = 2000
"""Texts are cut to this many characters before embedding: a tool's 100 kB output says what it is about early."""


@dataclass(frozen=True, slots=True)
class Ranked:
    """One event ranked by meaning: the chunk and its cosine with the query."""

    chunk: Chunk
    score: float


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


class SemanticIndex:
    """The embeddings of a store's events under one :class:`Embedder`, kept in a :class:`VectorStore`."""

    def __init__(self, store: SessionStore, embedder: Embedder, vectors: VectorStore | None = None) -> None:
        require_numpy()
        self.store = store
        self.embedder = embedder
        self.vectors = vectors or VectorStore()
        self._sync_lock = threading.Lock()
        self._version = 0
        self._cached: tuple[int, _Table] | None = None
        self._seen: dict[str, int] = {}
        """The event count of each session when this index last read it: a log only grows, so an equal count
        means "unchanged" and costs no read."""
        self.embedded = 0
        """Texts embedded by this index so far (the rest were found already embedded)."""

    def sync(self, sessions: Iterable[str] | None = None) -> int:
        """Embed whatever the sessions (default: every session) appended since the last sync; texts embedded."""
        with self._sync_lock:
            present = self.store.lengths()  # the session rows alone: a listing parses every header
            marks = self.vectors.synced()
            gone = [s for s in marks if s not in present]
            if gone:
                self.vectors.forget(gone)
                self._version += 1
                for session_id in gone:
                    self._seen.pop(session_id, None)
            wanted = present.keys() if sessions is None else present.keys() & set(sessions)
            chunks: list[Chunk] = []
            synced: dict[str, int] = {}
            for session_id in sorted(wanted):
                if self._seen.get(session_id) == present[session_id]:
                    continue  # unchanged since this index last read it: no read at all
                last = self._read(session_id, marks.get(session_id, -1), chunks)
                if last is not None:
                    synced[session_id] = last
                self._seen[session_id] = present[session_id]
            return self._store(chunks, synced)

    def _read(self, session_id: str, after: int, into: list[Chunk]) -> int | None:
        last: int | None = None
        try:
            for event in self.store.read(session_id, after + 1):
                last = event.seq
                text = event_text(event)
                if text:
                    text = indexable_text(text)
                    into.append(Chunk(session_id, event.seq, _digest(text), event.type, event.time, text))
        except SessionNotFound:
            return None
        except (CorruptSessionError, FormatVersionError) as error:
            log.warning("not embedding session %s: %s", session_id, error)
        return last

    def _store(self, chunks: list[Chunk], synced: dict[str, int]) -> int:
        import numpy as np

        model = self.embedder.name
        texts = {c.hash: c.text for c in chunks}
        todo = sorted(self.vectors.missing(model, texts))
        blobs: dict[str, bytes] = {}
        for start in range(0, len(todo), _EMBED_BATCH):
            batch = todo[start : start + _EMBED_BATCH]
            found = self.embedder.embed([texts[h][:_MAX_EMBED_CHARS] for h in batch])
            for digest, vector in zip(batch, found, strict=True):
                blobs[digest] = _unit(np.asarray(vector, dtype=np.float32)).tobytes()
        self.vectors.add(model, blobs, chunks, synced)
        if chunks:
            self._version += 1
        self.embedded += len(blobs)
        return len(blobs)

    def sync_in_background(self) -> threading.Thread:
        """Start :meth:`sync` of every session on a daemon thread (a failure is logged, not raised)."""

        def run() -> None:
            try:
                self.sync()
            except Exception:
                log.exception("background embedding failed")

        thread = threading.Thread(target=run, name="dshpy-embed", daemon=True)
        thread.start()
        return thread

    def rank(
        self,
        query: str,
        sessions: Sequence[str] | None,
        *,
        types: tuple[str, ...] | None = None,
        time_from: int | None = None,
        time_to: int | None = None,
        limit: int = 100,
    ) -> list[Ranked]:
        """The ``limit`` events of ``sessions`` (``None``: all) nearest ``query`` in meaning, best first."""
        import numpy as np

        self.sync(sessions)
        table = self._table()
        if not table.chunks:
            return []
        wanted = np.ones(len(table.chunks), dtype=bool)
        if sessions is not None:
            wanted &= _member(table.sessions, table.session_codes, sessions)
        if types is not None:
            wanted &= _member(table.types, table.type_codes, types)
        if time_from is not None:
            wanted &= table.times >= time_from
        if time_to is not None:
            wanted &= table.times <= time_to
        rows = np.flatnonzero(wanted)
        if rows.size == 0:
            return []
        target = _unit(np.asarray(self.embedder.embed([query])[0], dtype=np.float32))
        everything = rows.size == len(table.chunks)  # no copy of the matrix (3 ms at 20k chunks)
        scores = (table.matrix if everything else table.matrix[rows]) @ target
        count = min(limit, rows.size)
        best = np.argpartition(-scores, count - 1)[:count]
        chunks = table.chunks
        order = sorted(
            best.tolist(),
            key=lambda i: (-float(scores[i]), -chunks[rows[i]].time, chunks[rows[i]].session_id, chunks[rows[i]].seq),
        )
        return [Ranked(chunks[rows[i]], float(scores[i])) for i in order]

    def _table(self) -> _Table:
        """Every chunk with its vector, as arrays, kept in memory until a sync changes them."""
        import numpy as np

        with self._sync_lock:
            if self._cached is None or self._cached[0] != self._version:
                rows = self.vectors.chunks(self.embedder.name, None)
                chunks = [chunk for chunk, _ in rows]
                blob = b"".join(vector for _, vector in rows)
                matrix = np.frombuffer(blob, dtype=np.float32).reshape(len(rows), -1) if rows else np.zeros((0, 1))
                session_codes = _codes(c.session_id for c in chunks)
                type_codes = _codes(c.type for c in chunks)
                table = _Table(
                    chunks,
                    matrix,
                    np.asarray([session_codes[c.session_id] for c in chunks], dtype=np.int64),
                    session_codes,
                    np.asarray([type_codes[c.type] for c in chunks], dtype=np.int64),
                    type_codes,
                    np.asarray([c.time for c in chunks], dtype=np.int64),
                )
                self._cached = (self._version, table)
            return self._cached[1]


@dataclass(frozen=True, slots=True)
class _Table:
    """The chunks as arrays: sessions and types as integer codes, so a scope is a lookup, not a string compare."""

    chunks: list[Chunk]
    matrix: Any
    sessions: Any
    session_codes: dict[str, int]
    types: Any
    type_codes: dict[str, int]
    times: Any


def _codes(values: Iterable[str]) -> dict[str, int]:
    codes: dict[str, int] = {}
    for value in values:
        codes.setdefault(value, len(codes))
    return codes


def _member(column: Any, codes: dict[str, int], wanted: Iterable[str]) -> Any:
    import numpy as np

    allowed = np.zeros(len(codes) + 1, dtype=bool)
    allowed[[codes[value] for value in wanted if value in codes]] = True
    return allowed[column]


def _unit(vector: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    import numpy as np

    norm = float(np.linalg.norm(vector))
    return vector / norm if norm > 0 else vector


def reciprocal_rank_fusion(*rankings: Sequence[Any], k: int = RRF_K) -> list[tuple[Any, float]]:
    """Items of several best-first rankings, by the sum of ``1/(k + rank)`` over the lists they appear in."""
    scores: dict[Any, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda pair: -pair[1])
