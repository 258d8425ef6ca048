"""Where semantic search keeps its vectors: a plain SQLite table of float32 blobs (a file, or in memory).

Two tables, so that nothing is embedded twice: ``vectors`` holds one vector per
(model, content hash) — the same text said in a hundred sessions, or inherited by a
hundred forks, is embedded once — and ``chunks`` maps each event, keyed by
(session, seq, content hash), to its vector, with the type and time the filters
need. ``synced`` remembers the last seq read of each session, so catching up reads
only what was appended since. The file is derived data beside the store's own
(never inside its schema): deleting it only costs embedding again.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Chunk", "VectorStore"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS vectors (model TEXT NOT NULL, hash TEXT NOT NULL, vector BLOB NOT NULL,
    PRIMARY KEY (model, hash));
CREATE TABLE IF NOT EXISTS chunks (session TEXT NOT NULL, seq INTEGER NOT NULL, hash TEXT NOT NULL,
    type TEXT NOT NULL, time INTEGER NOT NULL, text TEXT NOT NULL, PRIMARY KEY (session, seq, hash));
CREATE TABLE IF NOT EXISTS synced (session TEXT PRIMARY KEY, last_seq INTEGER NOT NULL);
"""


@dataclass(frozen=True, slots=True)
class Chunk:
    """One event's searchable text, where it is, and the hash its vector is stored under."""

    session_id: str
    seq: int
    hash: str
    type: str
    time: int
    text: str


class VectorStore:
    """Vectors and chunks in one SQLite database: ``path`` a file, or ``None`` for memory only."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.location = None if path is None else str(path)
        self._db = sqlite3.connect(self.location or ":memory:", check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL" if self.location else "PRAGMA journal_mode=MEMORY")
            self._db.executescript(_SCHEMA)

    def synced(self) -> dict[str, int]:
        """The last seq read of every session caught up so far."""
        with self._lock:
            return dict(self._db.execute("SELECT session, last_seq FROM synced").fetchall())

    def missing(self, model: str, hashes: Iterable[str]) -> set[str]:
        """Which of ``hashes`` have no vector of ``model`` yet."""
        wanted = list(set(hashes))
        have: set[str] = set()
        with self._lock:
            for start in range(0, len(wanted), 500):
                batch = wanted[start : start + 500]
                marks = ",".join("?" * len(batch))
                sql = f"SELECT hash FROM vectors WHERE model = ? AND hash IN ({marks})"
                have.update(row[0] for row in self._db.execute(sql, (model, *batch)))
        return set(wanted) - have

    def add(self, model: str, vectors: dict[str, bytes], chunks: Sequence[Chunk], synced: dict[str, int]) -> None:
        """Store new vectors (float32 blobs by hash), chunks and sync marks in one transaction."""
        with self._lock:
            self._db.execute("BEGIN")
            try:
                self._db.executemany(
                    "INSERT OR IGNORE INTO vectors VALUES (?, ?, ?)", [(model, h, v) for h, v in vectors.items()]
                )
                self._db.executemany(
                    "INSERT OR IGNORE INTO chunks VALUES (?, ?, ?, ?, ?, ?)",
                    [(c.session_id, c.seq, c.hash, c.type, c.time, c.text) for c in chunks],
                )
                self._db.executemany("INSERT OR REPLACE INTO synced VALUES (?, ?)", list(synced.items()))
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def forget(self, sessions: Iterable[str]) -> None:
        """Drop the chunks and sync marks of sessions that are gone (their vectors may serve others)."""
        gone = [(s,) for s in sessions]
        with self._lock:
            self._db.executemany("DELETE FROM chunks WHERE session = ?", gone)
            self._db.executemany("DELETE FROM synced WHERE session = ?", gone)

    def chunks(self, model: str, sessions: Sequence[str] | None) -> list[tuple[Chunk, bytes]]:
        """Every chunk of ``sessions`` (``None``: of every session) with its vector of ``model``."""
        join = "JOIN vectors v ON v.model = ? AND v.hash = c.hash"
        with self._lock:
            if sessions is None:
                sql = f"SELECT c.session, c.seq, c.hash, c.type, c.time, c.text, v.vector FROM chunks c {join}"
            else:
                self._db.execute("CREATE TEMP TABLE IF NOT EXISTS scope (session TEXT PRIMARY KEY)")
                self._db.execute("DELETE FROM scope")
                self._db.executemany("INSERT OR IGNORE INTO scope VALUES (?)", [(s,) for s in sessions])
                sql = (
                    "SELECT c.session, c.seq, c.hash, c.type, c.time, c.text, v.vector FROM chunks c"
                    f" JOIN scope s ON s.session = c.session {join}"
                )
            rows = self._db.execute(sql, (model,)).fetchall()
        return [
            (Chunk(session, seq, digest, kind, time, text), blob)
            for session, seq, digest, kind, time, text, blob in rows
        ]

    def count(self) -> tuple[int, int]:
        """(chunks, vectors) held."""
        with self._lock:
            chunks = self._db.execute("SELECT count(*) FROM chunks").fetchone()[0]
            vectors = self._db.execute("SELECT count(*) FROM vectors").fetchone()[0]
        return int(chunks), int(vectors)

    def close(self) -> None:
        with self._lock:
            self._db.close()
