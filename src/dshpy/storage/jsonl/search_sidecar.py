"""The JSONL store's full-text index: a derived SQLite FTS5 file under the root, caught up before each search.

A JSONL log is written one frame and one fsync at a time by its session's writer, with
no database to share a transaction with, so its index is *derived*: the file
``<root>/.dshpy-search.db`` (dsh lists only directories under a root, so it never
sees it) holds the same FTS5 tables as the SQLite store (:mod:`dshpy.storage.sqlite_search`)
and, per session, how far it indexed: the log's revision (file name, inode, size,
times), the next seq, the digest of the last indexed event and the header's identity.

Before answering, :meth:`SearchSidecar.sync` brings it in step with the logs: a
session whose file did not change is skipped on a ``stat``; one that grew is indexed
from the seq it last indexed; one whose log no longer holds the event last indexed
(a tail lost to a crash, then rewritten), that got shorter, or whose id now belongs to
another session is indexed again from 0; a session gone from the root loses its rows.
So the index is never behind the log when it answers, and never ahead of it for long:
a crash between a flush and the index costs nothing but the next search's catch-up.
Each session's update is one transaction, so concurrent searchers in several
processes never index an event twice.

The file is only a cache: one this build cannot use (another version, not a database)
is replaced, and :meth:`SearchSidecar.rebuild` indexes everything from scratch.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from dshpy.core.events import SessionEvent
from dshpy.errors import CorruptSessionError, FormatVersionError, SessionNotFound
from dshpy.log.header import SessionHeader
from dshpy.storage.base import column_text, events_digest
from dshpy.storage.jsonl.index_keys import id_of_key, index_key, optional_key
from dshpy.storage.projection_cache import session_identity
from dshpy.storage.search_records import SearchIndexStatus, TextHits, TextQuery
from dshpy.storage.sqlite_errors import store_error
from dshpy.storage.sqlite_search import (
    SEARCH_SCHEMA,
    add_docs,
    doc_rows,
    document_count,
    drop_all_docs,
    drop_session_docs,
    generation,
    search,
)

__all__ = ["SEARCH_INDEX_FILENAME", "SIDECAR_VERSION", "SearchSidecar"]

log = logging.getLogger("dshpy.storage.jsonl")

SEARCH_INDEX_FILENAME = ".dshpy-search.db"
SIDECAR_VERSION = 1
"""``PRAGMA user_version`` of the sidecar; a file of another version is replaced (it is only derived data)."""
_APPLICATION_ID = 0x44534849
"""``PRAGMA application_id`` of the sidecar: ASCII "DSHI"."""

_UNUSABLE = (11, 26)
"""SQLite's ``SQLITE_CORRUPT`` and ``SQLITE_NOTADB``: a sidecar that fails so is replaced."""

_SCHEMA = (
    """CREATE TABLE sessions (
        id TEXT PRIMARY KEY,
        base_id TEXT,
        base_count INTEGER NOT NULL DEFAULT 0,
        cwd TEXT,
        parent_session TEXT,
        created_at INTEGER NOT NULL,
        identity TEXT NOT NULL,
        revision TEXT NOT NULL,
        next_seq INTEGER NOT NULL,
        last_digest TEXT
    ) STRICT""",
    *SEARCH_SCHEMA,
)
"""``sessions`` has the columns the shared search query reads (the header's cwd, parent and creation time; JSONL
forks copy their prefix, so no bases)."""

_UPSERT = """INSERT INTO sessions (id, cwd, parent_session, created_at, identity, revision, next_seq, last_digest)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (id) DO UPDATE SET cwd = excluded.cwd, parent_session = excluded.parent_session,
    created_at = excluded.created_at, identity = excluded.identity, revision = excluded.revision,
    next_seq = excluded.next_seq, last_digest = excluded.last_digest"""

Listing = Callable[[], list[tuple[str, str]]]
"""Every session of the root with its log's revision string."""
Loader = Callable[[str], tuple[SessionHeader, Sequence[SessionEvent]]]
"""A session's header and whole log."""


def _digest(events: Sequence[SessionEvent], count: int) -> str | None:
    return events_digest(events[count - 1 : count]) if count else None


class SearchSidecar:
    """The derived index of one JSONL root (opened on first use; thread-safe)."""

    def __init__(self, root: Path, listing: Listing, load: Loader) -> None:
        self.path = root / SEARCH_INDEX_FILENAME
        self._root = root
        self._listing = listing
        self._load = load
        self._db: sqlite3.Connection | None = None
        self._lock = threading.RLock()

    # -- the file -----------------------------------------------------------------------

    def writable(self) -> bool:
        """Whether the index can be kept here at all (a read-only root is searched by a scan instead)."""
        if not os.access(self._root, os.W_OK | os.X_OK):
            return False
        return not self.path.exists() or os.access(self.path, os.W_OK)

    def _connection(self) -> sqlite3.Connection:
        if self._db is None:
            try:
                self._db = self._open()
            except sqlite3.DatabaseError as error:
                code = getattr(error, "sqlite_errorcode", None)
                if code is not None and code & 0xFF not in _UNUSABLE:
                    raise  # busy, locked, I/O: the file may be fine, and another process may be using it
                self._discard()  # not a database, damaged, or another version: it is derived, start again
                self._db = self._open()
        return self._db

    def _open(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=10, isolation_level=None, check_same_thread=False)
        try:
            db.execute("PRAGMA journal_mode = WAL")
            db.execute("PRAGMA synchronous = NORMAL")  # a lost commit is re-indexed at the next catch-up
            db.execute("BEGIN IMMEDIATE")
            try:
                version = db.execute("PRAGMA user_version").fetchone()[0]
                application_id = db.execute("PRAGMA application_id").fetchone()[0]
                if version == 0 and application_id == 0:
                    for statement in _SCHEMA:
                        db.execute(statement)
                    db.execute(f"PRAGMA application_id = {_APPLICATION_ID}")
                    db.execute(f"PRAGMA user_version = {SIDECAR_VERSION}")
                elif version != SIDECAR_VERSION or application_id != _APPLICATION_ID:
                    raise sqlite3.DatabaseError(f"search sidecar of version {version}, not {SIDECAR_VERSION}")
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
        except BaseException:
            db.close()
            raise
        return db

    def _discard(self) -> None:
        log.warning("replacing the unusable search index %s", self.path)
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{self.path}{suffix}")

    @contextmanager
    def _transaction(self, doing: str, *, write: bool) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                db = self._connection()
                db.execute("BEGIN IMMEDIATE" if write else "BEGIN")
                try:
                    yield db
                    db.execute("COMMIT")
                except BaseException:
                    if db.in_transaction:
                        db.execute("ROLLBACK")
                    raise
            except (sqlite3.Error, OSError) as error:
                raise store_error(error, self.path, doing) from None

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    # -- keeping up with the logs --------------------------------------------------------

    def sync(self) -> None:
        """Index what the logs hold and the sidecar does not; forget sessions that are gone."""
        current = self._listing()
        with self._transaction("reading the search index", write=False) as db:
            known = {row[0]: row[1] for row in db.execute("SELECT id, revision FROM sessions")}
        for session_id, revision in current:
            if known.get(index_key(session_id)) != revision:
                self._sync_session(session_id, revision)
        gone = set(known) - {index_key(session_id) for session_id, _ in current}
        for key in sorted(gone):
            with self._transaction(f'dropping session "{id_of_key(key)}" from the search index', write=True) as db:
                drop_session_docs(db, key)
                db.execute("DELETE FROM sessions WHERE id = ?", (key,))

    def _sync_session(self, session_id: str, revision: str) -> None:
        try:
            header, events = self._load(session_id)
        except SessionNotFound:
            return  # deleted since the listing: the next catch-up drops its rows
        except (CorruptSessionError, FormatVersionError) as error:
            log.warning("not indexing session %s: %s", session_id, error)
            return
        identity = session_identity(header)
        key = index_key(session_id)
        with self._transaction(f'indexing session "{session_id}"', write=True) as db:
            row = db.execute(
                "SELECT identity, revision, next_seq, last_digest FROM sessions WHERE id = ?", (key,)
            ).fetchone()
            start = 0
            if row is not None:
                if row[1] == revision:
                    return  # another searcher indexed it meanwhile
                known_identity, _, indexed, digest = row
                if known_identity == identity and indexed <= len(events) and digest == _digest(events, indexed):
                    start = indexed
                else:  # another session under this id, or the indexed tail is not the log's any more
                    drop_session_docs(db, key)
            cwd = None if header.cwd is None else column_text(header.cwd)
            db.execute(
                _UPSERT,
                (
                    key,
                    cwd,
                    optional_key(header.parent_session),
                    header.created_at,
                    identity,
                    revision,
                    len(events),
                    _digest(events, len(events)),
                ),
            )
            add_docs(db, key, doc_rows(key, events[start:]))

    # -- answering ----------------------------------------------------------------------

    def search(self, query: TextQuery) -> TextHits:
        """Catch up, then answer from the index."""
        if not self._root.is_dir():
            return TextHits([], 0)
        self.sync()
        keyed = replace(
            query,
            sessions=None if query.sessions is None else tuple(map(index_key, query.sessions)),
            exclude_sessions=tuple(map(index_key, query.exclude_sessions)),
            parents=None if query.parents is None else tuple(map(optional_key, query.parents)),
        )
        with self._transaction("searching", write=False) as db:
            hits = search(db, keyed) if query.expr.groups else []
            return TextHits([replace(hit, session_id=id_of_key(hit.session_id)) for hit in hits], generation(db))

    def rebuild(self) -> SearchIndexStatus:
        """Forget everything indexed and index every log again."""
        if self._root.is_dir():
            with self._transaction("rebuilding the search index", write=True) as db:
                drop_all_docs(db)
                db.execute("DELETE FROM sessions")
            self.sync()
        return self.status()

    def status(self) -> SearchIndexStatus:
        """What the sidecar holds, and how many sessions it has yet to catch up with (nothing is indexed here)."""
        if not self._root.is_dir():
            return SearchIndexStatus("jsonl-fts5-sidecar", 0, 0, 0, str(self.path))
        current = {index_key(session_id): revision for session_id, revision in self._listing()}
        with self._transaction("reading the search index", write=False) as db:
            known = {row[0]: row[1] for row in db.execute("SELECT id, revision FROM sessions")}
            pending = sum(1 for sid, rev in current.items() if known.get(sid) != rev) + len(set(known) - set(current))
            return SearchIndexStatus("jsonl-fts5-sidecar", document_count(db), generation(db), pending, str(self.path))
