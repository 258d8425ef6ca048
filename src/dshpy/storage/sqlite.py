"""``sqlite:///path.db`` — the embedded default store.

One file holds every session: a ``sessions`` row per session and an ``events`` row per
event, keyed by ``(session_id, seq)``. The database runs in WAL mode with
``synchronous=FULL``, so a batch is durable when its transaction commits, and every
flush is one ``BEGIN IMMEDIATE`` transaction that re-reads the stored next seq before
writing: a stale writer in any process gets :class:`ConflictError` and nothing
interleaves.

Forks are zero-copy: a child row points at its parent (``base_id``) and the number of
events it inherits (``base_count``) and stores only its own events, so forking costs
the same for a 10-event and a 100,000-event parent. Deleting a parent is refused while
children read through it, unless they are detached first (their prefix is copied in).

A live session holds its session's single-writer lease, an ``flock``'d file in
``<database>-leases/`` (see :mod:`dshpy.storage.lease`): no schema change, and the
kernel releases it the moment its holder's process dies.

The file carries ``application_id`` ("DSHP") and ``user_version`` = the number of
schema migrations applied; a foreign or newer database is refused, never modified.

Event bodies are stored compressed (:mod:`dshpy.storage.sqlite_bodies`: zstd with a
dictionary the store trains from its own first events, kept in the same file): reads,
export and search see exactly the JSON that was appended.

Damage is detected, never served: every row carries a CRC-32 of exactly what it
holds (:mod:`dshpy.storage.checksum`; an event row's covers its JSON, which a
compressed body must decompress to), checked on every read, and each session row
records its ``next_seq``, so rows lost from the end of a log are an error, not a
shorter session. Every ``sqlite3``/OS error becomes a :class:`~dshpy.StoreError`
branch in one place (:mod:`dshpy.storage.sqlite_errors`). A database on a read-only
filesystem (or a file this user cannot write) is opened read-only: reads work, and a
write raises :class:`~dshpy.ReadOnlyStoreError`.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import sqlite3
import threading
import time
import urllib.parse
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson

from dshpy.core.events import SessionEvent, encode_event
from dshpy.core.json import MAX_SAFE_INTEGER, dumps, loads
from dshpy.core.vocabulary import KNOWN_EVENT_TYPES
from dshpy.errors import (
    ConflictError,
    CorruptSessionError,
    FormatVersionError,
    ReadOnlyStoreError,
    SessionExistsError,
    SessionNotFound,
    StoreError,
)
from dshpy.log.header import SessionHeader
from dshpy.storage.backend import (
    IndexedReads,
    MetadataQueries,
    PagedListing,
    ProjectionCache,
    SearchIndex,
    SessionLengths,
    WriterLeases,
    ZeroCopyForks,
)
from dshpy.storage.base import BaseStore, cleared_row, cleared_rows, column_text, parse_stored_header
from dshpy.storage.checksum import (
    cache_row_crc,
    check_session_row,
    decoded_body,
    event_row_crc,
    event_verifier,
    lost_rows,
    session_row_crc,
)
from dshpy.storage.flush_report import record_durable, reporting
from dshpy.storage.lease import FileLease, Lease
from dshpy.storage.listing_page import PageRequest
from dshpy.storage.page_sql import SQLITE, page_ids_sql
from dshpy.storage.projection_cache import ProjectionRow
from dshpy.storage.records import SessionInfo, StoredRecord
from dshpy.storage.search_records import SearchIndexStatus, TextHits, TextQuery
from dshpy.storage.sqlite_bodies import (
    DICTIONARY_SCHEMA,
    TRAIN_AFTER_EVENTS,
    BodyError,
    EventBodies,
    UnknownDictionary,
    packed_body,
)
from dshpy.storage.sqlite_errors import SqliteErrors, store_error
from dshpy.storage.sqlite_fts import (
    KEYED_INDEX_MIGRATION,
    document_count,
    index_rows,
    new_session_key,
    rebuild,
    search,
    session_key,
    text_rows,
    unindex_session,
)
from dshpy.storage.sqlite_search import FILL_FROM_EVENTS, SEARCH_SCHEMA, event_text_sql, generation

__all__ = ["APPLICATION_ID", "SCHEMA_MIGRATIONS", "SqliteStore"]

APPLICATION_ID = 0x44534850
"""``PRAGMA application_id`` of dshpy databases: ASCII "DSHP" (the value dsh uses too)."""

SCHEMA_MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """CREATE TABLE sessions (
            id TEXT PRIMARY KEY,
            header TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            cwd TEXT,
            parent_session TEXT,
            base_id TEXT REFERENCES sessions(id),
            base_count INTEGER NOT NULL DEFAULT 0
        ) STRICT""",
        """CREATE TABLE events (
            session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            type TEXT NOT NULL,
            time INTEGER NOT NULL,
            body BLOB NOT NULL,
            PRIMARY KEY (session_id, seq)
        ) STRICT, WITHOUT ROWID""",
        "CREATE INDEX sessions_by_base ON sessions(base_id) WHERE base_id IS NOT NULL",
        "CREATE INDEX sessions_by_parent ON sessions(parent_session) WHERE parent_session IS NOT NULL",
    ),
    (
        """CREATE TABLE projection_cache (
            session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            key TEXT NOT NULL,
            state_version INTEGER NOT NULL,
            seq INTEGER NOT NULL,
            state TEXT NOT NULL,
            identity TEXT NOT NULL,
            PRIMARY KEY (session_id, key)
        ) STRICT, WITHOUT ROWID""",
    ),
    (
        "ALTER TABLE sessions ADD COLUMN next_seq INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE sessions ADD COLUMN crc INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE events ADD COLUMN crc INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE projection_cache ADD COLUMN crc INTEGER NOT NULL DEFAULT 0",
        "UPDATE sessions SET "
        "next_seq = coalesce((SELECT max(seq) + 1 FROM events WHERE session_id = sessions.id), base_count), "
        "crc = dshpy_session_crc(id, header, created_at, cwd, parent_session, base_id, base_count)",
        "UPDATE events SET crc = dshpy_event_crc(session_id, seq, body)",
        "UPDATE projection_cache SET crc = dshpy_cache_crc(CAST(session_id AS BLOB), CAST(key AS BLOB), "
        "state_version, seq, CAST(state AS BLOB), CAST(identity AS BLOB))",
    ),
    (*SEARCH_SCHEMA, *FILL_FROM_EVENTS),
    KEYED_INDEX_MIGRATION,
    (
        "ALTER TABLE events RENAME TO events_v5",
        """CREATE TABLE events (
            session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            type TEXT NOT NULL,
            time INTEGER NOT NULL,
            body BLOB NOT NULL,
            crc INTEGER NOT NULL,
            PRIMARY KEY (session_id, seq)
        ) STRICT""",
        "INSERT INTO events (session_id, seq, type, time, body, crc) "
        "SELECT session_id, seq, type, time, dshpy_packed_body(body), crc FROM events_v5 ORDER BY session_id, seq",
        "DROP TABLE events_v5",
        DICTIONARY_SCHEMA,
    ),
)
"""Schema migrations; position + 1 is the ``user_version`` a database has after applying it.

2 adds ``projection_cache``: one row per (session, projection), see
:mod:`dshpy.storage.projection_cache`. 3 adds a CRC-32 to every row and each session's
``next_seq`` (rows lost from a log's end are detectable), computed for the rows already
stored (one pass over the file, once). 4 adds the full-text index (:mod:`dshpy.storage.sqlite_search`) and
indexes every event already stored. 5 replaces it with a contentless index keyed by (session, seq)
(:mod:`dshpy.storage.sqlite_fts`): a third of the pages an append's index rows wrote, and no text stored twice.
6 stores bodies compressed (:mod:`dshpy.storage.sqlite_bodies`: zstd, with a dictionary the store trains from its
own first events, kept in ``body_dictionaries``) in a rowid table: a ``WITHOUT ROWID`` table keeps at most ~1 KB of
a row in its leaf and spills the rest into an overflow page of its own, mostly empty, where a rowid table keeps up to
~4 KB in the leaf. Every row is copied once, compressed alone, with its checksum (over the JSON) unchanged."""

_CRC_FUNCTIONS = (
    ("dshpy_session_crc", 7, session_row_crc),
    ("dshpy_event_crc", 3, event_row_crc),
    ("dshpy_cache_crc", 6, cache_row_crc),
)
"""The checksums as SQL functions, for migration 3's backfill of existing rows."""


def _body_functions(bodies: EventBodies) -> tuple[tuple[str, int, Any], ...]:
    """An event's searchable text as an SQL function, for migration 4's (and a rebuild's, and a deletion's) reading
    of stored bodies, and migration 6's compression of them."""

    def event_text(body: bytes) -> str | None:
        try:
            return event_text_sql(bodies.decode(body))
        except BodyError:
            return None  # a damaged row holds no text here; reading it reports it

    return (("dshpy_event_text", 1, event_text), ("dshpy_packed_body", 1, packed_body))


_SAVE_ROW = """INSERT INTO projection_cache (session_id, key, state_version, seq, state, identity, crc)
VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (session_id, key) DO UPDATE SET
    state_version = excluded.state_version, seq = excluded.seq, state = excluded.state, identity = excluded.identity,
    crc = excluded.crc"""
"""Upsert one cache row (the last write wins: every row written is valid, an older one only folds a longer tail)."""

_INSERT_EVENTS = "INSERT INTO events (session_id, seq, type, time, body, crc) VALUES (?, ?, ?, ?, ?, ?)"

_NEXT_SEQ = (
    "SELECT (SELECT max(seq) FROM events WHERE session_id = s.id), s.base_count, s.next_seq, "
    "(SELECT key FROM search_keys WHERE session_id = s.id) FROM sessions s WHERE s.id = ?"
)
"""The last stored seq (an index seek on the events primary key), the inherited count, the recorded next seq,
and the session's search number (read here so that an append's index rows cost no statement of their own)."""

_SESSION_COLUMNS = "header, created_at, cwd, parent_session, base_id, base_count, crc"

_COUNT_SESSIONS = "SELECT count(*) FROM sessions INDEXED BY sqlite_autoindex_sessions_1"
"""Counted on the primary key's index, not the table a listing scans (see ``SqliteStore._check_session_count``)."""

_CACHE_COLUMNS = "CAST(key AS BLOB), state_version, seq, CAST(state AS BLOB), CAST(identity AS BLOB), crc"
"""A cache row's columns, text as stored bytes (see :func:`dshpy.storage.checksum.cache_row_crc`)."""

_READ_CHUNK = 4096

_NONE = type(None)
_INFO_TAIL_TYPES = ((int,), (int, _NONE), (int, _NONE), (str, _NONE))
"""Python types of an info row's values after the session row's own (next_seq, last seq, last time, forks): a
STRICT table is only checked as it is written, so a damaged record header can hand back any storage class (a
text column read as an integer). :func:`~dshpy.storage.checksum.check_session_row` checks the rest."""
_CACHE_TYPES = ((bytes,), (int,), (int,), (bytes,), (bytes,), (int,))


def _typed(values: Sequence[object], kinds: Sequence[tuple[type, ...]]) -> bool:
    """Whether each value is of one of its column's types (see :data:`_INFO_TAIL_TYPES`)."""
    return all(type(value) in allowed for value, allowed in zip(values, kinds, strict=True))


_KNOWN_TYPES = tuple(sorted(KNOWN_EVENT_TYPES))

EventRow = tuple[str, int, str, int, bytes, int]


def _register_functions(connection: sqlite3.Connection, bodies: EventBodies | None = None) -> None:
    for name, arity, function in (*_CRC_FUNCTIONS, *_body_functions(bodies or EventBodies())):
        connection.create_function(name, arity, function, deterministic=True)


def _normalized_schema(connection: sqlite3.Connection) -> list[tuple[str, str, str]]:
    rows = connection.execute(
        "SELECT type, name, sql FROM sqlite_schema WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name"
    ).fetchall()
    return [(kind, name, " ".join((sql or "").split())) for kind, name, sql in rows]


def _reference_schema(version: int) -> list[tuple[str, str, str]]:
    reference = sqlite3.connect(":memory:")
    _register_functions(reference, EventBodies())
    try:
        for migration in SCHEMA_MIGRATIONS[:version]:
            for statement in migration:
                reference.execute(statement)
        return _normalized_schema(reference)
    finally:
        reference.close()


def _cache_row(
    session_id: bytes, key: bytes, version: int, seq: int, state: bytes, identity: bytes, crc: int
) -> ProjectionRow | None:
    """A verified cache row (its text columns fetched as blobs), or ``None`` for a damaged one: the projection is
    then folded from the log."""
    if not _typed((key, version, seq, state, identity, crc), _CACHE_TYPES):
        return None
    if cache_row_crc(session_id, key, version, seq, state, identity) != crc:
        return None
    try:
        return ProjectionRow(key.decode(), version, seq, loads(state), identity.decode())
    except (orjson.JSONDecodeError, UnicodeDecodeError):
        return None


def _writable(path: Path) -> bool:
    """Whether this process may write the database and create its WAL files beside it (``access`` sees a
    read-only mount too, which file modes alone do not show to root)."""
    return os.access(path, os.W_OK) and os.access(path.parent, os.W_OK | os.X_OK)


class SqliteStore(
    BaseStore,
    ZeroCopyForks,
    MetadataQueries,
    ProjectionCache,
    IndexedReads,
    SearchIndex,
    SessionLengths,
    PagedListing,
    WriterLeases,
):
    """Sessions in one SQLite file (WAL, ``synchronous=FULL``, STRICT tables, a CRC-32 on every row, an FTS5 index)."""

    text_column_ids = True

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout_ms: int = 10_000) -> None:
        self.path = Path(path)
        self.url = f"sqlite:///{self.path}"
        self._lock = threading.RLock()
        self._bodies = EventBodies()
        self._untrained = 0
        """Events stored since the store last looked for (or tried to train) a dictionary: it looks every
        :data:`TRAIN_AFTER_EVENTS` events (counting those it found stored when it opened) until it has one."""
        with SqliteErrors(self.path, "creating the database"):
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            if not self.path.exists():
                with contextlib.suppress(FileExistsError):  # create it private before SQLite opens it
                    os.close(os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        self.read_only = not _writable(self.path)
        """Opened read-only (read-only filesystem or no write permission): reads work, writes raise
        :class:`~dshpy.ReadOnlyStoreError`."""
        try:
            self._db = self._connect(busy_timeout_ms)
        except (sqlite3.Error, OSError) as error:
            raise self._open_error(error) from None
        try:
            self._cursor = self._db.cursor()
            """The write paths' cursor (used under ``_lock`` only): no cursor object is built per statement."""
            self._db.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            self._prepare_schema()
            self._bodies.load(self._db)
            if not self._bodies.has_dictionary:  # events stored already count towards training one
                (self._untrained,) = self._db.execute(
                    "SELECT count(*) FROM (SELECT 1 FROM events LIMIT ?)", (TRAIN_AFTER_EVENTS,)
                ).fetchone()
            if not self.read_only:
                mode = self._db.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                if str(mode).lower() != "wal":
                    raise StoreError(f"{self.path}: could not switch the database to WAL mode (got {mode})")
            self._db.execute("PRAGMA synchronous = FULL")
            self._db.execute("PRAGMA foreign_keys = ON")
            self._db.execute("PRAGMA trusted_schema = OFF")
        except BaseException as error:
            self._db.close()
            if isinstance(error, sqlite3.Error | OSError | UnicodeDecodeError):
                raise self._open_error(error) from None
            if isinstance(error, BodyError):
                raise CorruptSessionError(f"{self.path} is damaged: {error}") from None
            raise

    def _open_error(self, error: BaseException) -> StoreError:
        """What failed while opening: a full disk, a read-only file, a busy database say so; anything else
        our own fixed statements trip over means the file is not (any longer) a database we can use."""
        translated = store_error(error, self.path, "opening the database")
        if type(translated) in (StoreError, CorruptSessionError):
            return CorruptSessionError(f"{self.path} is not a usable SQLite database: {error}")
        return translated

    def _connect(self, busy_timeout_ms: int) -> sqlite3.Connection:
        """A read-write connection, or a read-only one when the file or its directory cannot be written.

        On a read-only filesystem SQLite cannot create the WAL index (``-shm``), so a
        cleanly closed database is opened ``immutable`` (nothing can change it there);
        if a WAL was left behind it is read with ``mode=ro``, which sees its commits.
        """
        if self.read_only:
            quoted = urllib.parse.quote(str(self.path.resolve()))
            wal_left = self.path.with_name(self.path.name + "-wal").exists()
            frozen = not wal_left and not os.access(self.path.parent, os.W_OK)
            uri = f"file:{quoted}?mode=ro&immutable=1" if frozen else f"file:{quoted}?mode=ro"
            db = sqlite3.connect(
                uri, uri=True, timeout=busy_timeout_ms / 1000, isolation_level=None, check_same_thread=False
            )
        else:
            db = sqlite3.connect(
                self.path, timeout=busy_timeout_ms / 1000, isolation_level=None, check_same_thread=False
            )
        _register_functions(db, self._bodies)
        return db

    # -- schema -------------------------------------------------------------------------

    def _prepare_schema(self) -> None:
        db = self._db
        db.execute("BEGIN" if self.read_only else "BEGIN IMMEDIATE")
        try:
            application_id = db.execute("PRAGMA application_id").fetchone()[0]
            version = db.execute("PRAGMA user_version").fetchone()[0]
            has_objects = db.execute("SELECT count(*) FROM sqlite_schema WHERE name NOT LIKE 'sqlite_%'").fetchone()[0]
            if application_id == 0 and version == 0 and not has_objects:
                if self.read_only:
                    raise ReadOnlyStoreError(f"{self.path} is empty and read-only: no dshpy store can be made there")
                db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            elif application_id != APPLICATION_ID:
                raise StoreError(
                    f"{self.path} is not a dshpy session database (application_id {application_id}); "
                    "refusing to touch it"
                )
            latest = len(SCHEMA_MIGRATIONS)
            if version > latest:
                raise FormatVersionError(
                    f"{self.path} uses dshpy schema v{version}, newer than this build's v{latest}: "
                    "it was written by a newer dshpy — upgrade dshpy to open it"
                )
            if _normalized_schema(db) != _reference_schema(version):
                raise CorruptSessionError(
                    f"{self.path} does not contain the expected dshpy schema v{version}; refusing to use it"
                )
            if version < latest and self.read_only:
                raise ReadOnlyStoreError(
                    f"{self.path} uses dshpy schema v{version} and must be upgraded to v{latest} "
                    "before this build reads it, which needs write access: open it once where it is writable"
                )
            for index in range(version, latest):
                for statement in SCHEMA_MIGRATIONS[index]:
                    db.execute(statement)
                db.execute(f"PRAGMA user_version = {index + 1}")
            if version < latest:  # a later migration's schema change dropped the index's loaded configuration
                db.execute("SELECT rowid FROM search_text WHERE rowid = 0").fetchall()
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise

    @property
    def schema_version(self) -> int:
        with self._lock, SqliteErrors(self.path, "reading the schema version"):
            version: int = self._db.execute("PRAGMA user_version").fetchone()[0]
            return version

    @contextmanager
    def _write(self, doing: str = "writing") -> Iterator[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction: the write lock is taken before anything is read."""
        with self._lock:
            db = self._db
            self._begin(doing)
            try:
                yield db
                db.execute("COMMIT")
            except sqlite3.IntegrityError:
                self._rollback()
                raise  # the caller knows what a broken constraint means for its write
            except BaseException as error:
                self._rollback()
                if isinstance(error, sqlite3.Error | UnicodeDecodeError):
                    raise store_error(error, self.path, doing) from None
                raise

    def _begin(self, doing: str) -> None:
        """``BEGIN IMMEDIATE`` (the caller holds ``_lock``); refused at once on a read-only store."""
        if self.read_only:
            raise ReadOnlyStoreError(
                f"{self.path} is read-only (read-only filesystem or no write permission); {doing} needs write access"
            )
        try:
            self._cursor.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as error:
            raise store_error(error, self.path, f"cannot start a write transaction for {doing}") from None

    def _rollback(self) -> None:
        """End a failed write transaction (unless SQLite already rolled it back), keeping the original error."""
        db = self._db
        if db.in_transaction:
            with contextlib.suppress(sqlite3.Error):  # the first error is the one worth reporting
                self._cursor.execute("ROLLBACK")

    def close(self) -> None:
        with self._lock, SqliteErrors(self.path, "closing the database"):
            self._db.close()

    # -- primitives -----------------------------------------------------------------------

    def _lease(self, session_id: str) -> Lease:
        return FileLease.acquire(self.path.with_name(f"{self.path.name}-leases"), session_id)

    def _rows(self, session_id: str, events: Sequence[SessionEvent]) -> list[EventRow]:
        """The rows of ``events``: each body stored as :mod:`~dshpy.storage.sqlite_bodies` packs it, its checksum
        over the event's JSON."""
        rows: list[EventRow] = []
        encode = self._bodies.encode
        for e in events:
            body = encode_event(e, seq_ranges=False)
            crc = event_row_crc(session_id, e.seq, body)
            rows.append((session_id, e.seq, column_text(e.type), e.time, encode(body), crc))
        return rows

    def _decode_body(self, stored: bytes) -> bytes:
        """A stored body's JSON; a dictionary another connection trained since this one last looked is read first."""
        try:
            return self._bodies.decode(stored)
        except UnknownDictionary:
            with self._lock, SqliteErrors(self.path, "reading the compression dictionaries"):
                self._bodies.load(self._db)
            return self._bodies.decode(stored)

    def _load_dictionaries(self, db: sqlite3.Connection | sqlite3.Cursor) -> None:
        """Before a statement whose SQL reads bodies (``dshpy_event_text``): that function cannot query the database
        itself, so every dictionary stored must already be known."""
        try:
            self._bodies.load(db)
        except BodyError as error:
            raise CorruptSessionError(f"{self.path} is damaged: {error}") from None

    def _train_dictionary(self, appended: int) -> None:
        """After an append: until the store has a dictionary, look for one (or train it) every so many events.

        Its own ``FULL``-synchronous transaction, committed before any body uses it (bodies are
        encoded with a dictionary only once it is stored); a failure leaves bodies compressed alone.
        """
        if self._bodies.has_dictionary or self.read_only:
            return
        self._untrained += appended
        if self._untrained < TRAIN_AFTER_EVENTS:
            return
        self._untrained = 0
        with contextlib.suppress(StoreError):  # a busy or full store: the next look tries again
            with self._write("training the compression dictionary") as db:
                self._bodies.train(db)
            with self._lock, SqliteErrors(self.path, "reading the compression dictionaries"):
                self._load_dictionaries(self._db)

    def _insert(self, record: StoredRecord) -> None:
        header = record.header
        base_id, base_count = record.base if record.base is not None else (None, 0)
        events = record.events
        raw = dumps(header.to_record()).decode()
        cwd = None if header.cwd is None else column_text(header.cwd)
        columns = (header.id, raw, header.created_at, cwd, header.parent_session, base_id, base_count)
        next_seq = base_count + len(events)
        rows = self._rows(header.id, events)
        texts = text_rows(events)
        try:
            with self._write(f'creating session "{header.id}"') as db:
                if db.execute("SELECT 1 FROM sessions WHERE id = ?", (header.id,)).fetchone():
                    raise SessionExistsError(f'session "{header.id}" already exists')
                db.execute(
                    "INSERT INTO sessions (id, header, created_at, cwd, parent_session, base_id, base_count, "
                    "next_seq, crc) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (*columns, next_seq, session_row_crc(*columns)),
                )
                db.executemany(_INSERT_EVENTS, rows)
                index_rows(db, new_session_key(db, header.id), texts)
        except sqlite3.IntegrityError as error:
            raise SessionExistsError(f'session "{header.id}" already exists ({error})') from None
        self._train_dictionary(len(rows))

    def _session_row(self, session_id: str) -> tuple[str, str | None, int]:
        """The verified ``(header, base_id, base_count)`` of a session row."""
        with self._lock, SqliteErrors(self.path, f'reading session "{session_id}"'):
            row = self._db.execute(f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE id = ?", (session_id,)).fetchone()
        if row is None:
            raise SessionNotFound(f'session "{session_id}" not found')
        check_session_row(session_id, *row)
        raw, _created_at, _cwd, _parent, base_id, base_count, _crc = row
        return raw, base_id, base_count

    def _header(self, session_id: str) -> SessionHeader:
        raw, _base_id, _base_count = self._session_row(session_id)
        return parse_stored_header(session_id, raw)

    def _base(self, session_id: str) -> tuple[str, int] | None:
        _raw, base_id, base_count = self._session_row(session_id)
        return None if base_id is None else (base_id, base_count)

    def _length(self, session_id: str) -> int:
        with self._lock, SqliteErrors(self.path, f'reading session "{session_id}"'):
            return self._next_seq(self._db, session_id)

    @staticmethod
    def _next_seq(db: sqlite3.Connection | sqlite3.Cursor, session_id: str) -> int:
        """One past the last stored seq (an index seek), or the inherited count of an empty fork."""
        return SqliteStore._tail(db, session_id)[0]

    @staticmethod
    def _tail(db: sqlite3.Connection | sqlite3.Cursor, session_id: str) -> tuple[int, int | None]:
        """:meth:`_next_seq` and the session's search number (``None``: it has none yet).

        The next seq must agree with the ``next_seq`` the session row recorded at its last
        append: otherwise rows were lost from the log's end (or the row is damaged).
        """
        row = db.execute(_NEXT_SEQ, (session_id,)).fetchone()
        if row is None:
            raise SessionNotFound(f'session "{session_id}" not found')
        last, base_count, recorded, key = row
        stored = int(base_count) if last is None else int(last) + 1
        if stored != recorded:
            raise CorruptSessionError(lost_rows(session_id, stored, recorded))
        return stored, key

    def _own_events(self, session_id: str, from_seq: int) -> Iterator[SessionEvent]:
        expected = from_seq
        doing = f'reading session "{session_id}"'
        verified = event_verifier(session_id)
        with self._lock, SqliteErrors(self.path, doing):
            recorded = self._db.execute("SELECT next_seq FROM sessions WHERE id = ?", (session_id,)).fetchone()
        if recorded is None:
            raise SessionNotFound(f'session "{session_id}" not found')
        while True:
            with self._lock, SqliteErrors(self.path, doing):
                rows = self._db.execute(
                    "SELECT seq, body, crc FROM events WHERE session_id = ? AND seq >= ? ORDER BY seq LIMIT ?",
                    (session_id, expected, _READ_CHUNK),
                ).fetchall()
            decode = self._decode_body
            bodies = [decoded_body(session_id, seq, body, decode) for seq, body, _ in rows]
            cleared = cleared_rows(bodies)  # one scan of the chunk for numbers to refuse
            for (seq, _, crc), body in zip(rows, bodies, strict=True):
                if seq != expected:
                    raise CorruptSessionError(
                        f'session "{session_id}" is missing event {expected} (next stored: {seq})'
                    )
                yield verified(seq, body, crc, cleared or cleared_row(body))
                expected += 1
            if len(rows) < _READ_CHUNK:
                break
        if expected == recorded[0]:
            return
        # Rows committed while we read are fine; fewer rows than recorded at the start, or more than recorded
        # now (next_seq moves in the same transaction as the rows), are damage.
        with self._lock, SqliteErrors(self.path, doing):
            now = self._db.execute("SELECT next_seq FROM sessions WHERE id = ?", (session_id,)).fetchone()
        if now is None:
            raise SessionNotFound(f'session "{session_id}" was deleted while it was read')
        if expected < recorded[0] or (expected > from_seq and expected > now[0]):
            raise CorruptSessionError(lost_rows(session_id, expected, now[0]))

    def _append(self, session_id: str, expected_seq: int, events: Sequence[SessionEvent]) -> None:
        """The live write path: one ``BEGIN IMMEDIATE`` transaction per flush, the stored next seq re-read inside it.

        What :meth:`_write` does, written out (this runs once per flush): the rows are
        encoded before the write lock is taken, so the lock is held for the database
        work only, and every statement goes through one long-lived cursor.
        """
        rows = self._rows(session_id, events)
        texts = text_rows(events)  # indexed in the same transaction: search is never behind or ahead
        doing = f'appending to session "{session_id}"'
        report = reporting()
        if report is not None:
            report.written = sum(len(row[4]) for row in rows)  # as stored: compressed
        with self._lock:
            cursor = self._cursor
            self._begin(doing)
            try:
                stored, key = self._tail(cursor, session_id)
                if stored != expected_seq:
                    raise ConflictError(
                        f'session "{session_id}" ends at seq {stored}, not {expected_seq}: '
                        "another writer appended first",
                        expected_seq=expected_seq,
                        actual_seq=stored,
                    )
                cursor.executemany(_INSERT_EVENTS, rows)
                if texts:
                    index_rows(cursor, session_key(cursor, session_id) if key is None else key, texts)
                cursor.execute("UPDATE sessions SET next_seq = ? WHERE id = ?", (expected_seq + len(rows), session_id))
                committed = time.perf_counter_ns()
                cursor.execute("COMMIT")  # synchronous=FULL: the WAL's fsync happens here
                record_durable(committed)
            except sqlite3.IntegrityError as error:
                self._rollback()
                raise ConflictError(
                    f'session "{session_id}": seq already taken ({error})', expected_seq=expected_seq
                ) from None
            except sqlite3.Error as error:
                self._rollback()
                raise store_error(error, self.path, doing) from None
            except BaseException:
                self._rollback()
                raise
        self._train_dictionary(len(rows))

    def _remove(self, session_id: str) -> None:
        try:
            with self._write(f'deleting session "{session_id}"') as db:
                self._load_dictionaries(db)
                unindex_session(db, session_id)
                db.execute("DELETE FROM sessions WHERE id = ?", (session_id,))
        except sqlite3.IntegrityError as error:  # a fork was made meanwhile and reads through it
            raise ConflictError(f'session "{session_id}" gained a fork while being deleted ({error})') from None

    def _ids(self) -> list[str]:
        with self._lock, SqliteErrors(self.path, "listing sessions"):
            return [row[0] for row in self._db.execute("SELECT id FROM sessions ORDER BY id")]

    def _children(self, session_id: str) -> list[str]:
        with self._lock, SqliteErrors(self.path, f'listing the forks of session "{session_id}"'):
            rows = self._db.execute("SELECT id FROM sessions WHERE base_id = ? ORDER BY id", (session_id,))
            return [row[0] for row in rows]

    def _rebase(self, session_id: str, prefix: Sequence[SessionEvent]) -> None:
        raw, _base_id, _base_count = self._session_row(session_id)
        header = parse_stored_header(session_id, raw)
        cwd = None if header.cwd is None else column_text(header.cwd)
        crc = session_row_crc(session_id, raw, header.created_at, cwd, header.parent_session, None, 0)
        try:
            with self._write(f'detaching fork "{session_id}"') as db:
                db.executemany(_INSERT_EVENTS, self._rows(session_id, prefix))
                index_rows(db, session_key(db, session_id), text_rows(prefix))
                db.execute(
                    "UPDATE sessions SET base_id = NULL, base_count = 0, crc = ? WHERE id = ?", (crc, session_id)
                )
        except sqlite3.IntegrityError as error:
            raise CorruptSessionError(
                f'fork "{session_id}" already holds rows of its inherited prefix ({error})'
            ) from None

    def _turn_window(self, session_id: str, boundary: int) -> list[SessionEvent]:
        """Seek to the last turn boundary at or before ``boundary`` instead of reading the prefix."""
        start = self._last_turn_mark(session_id, boundary)
        window = list(itertools.takewhile(lambda e: e.seq <= boundary, self._read_chain(session_id, start)))
        if start > 0 and window and window[0].type not in ("turn/start", "turn/end"):  # the type column lied
            raise CorruptSessionError(f'session "{session_id}" row {start} does not hold its indexed event')
        return window

    def _last_turn_mark(self, session_id: str, at: int) -> int:
        with self._lock, SqliteErrors(self.path, f'reading session "{session_id}"'):
            row = self._db.execute(
                "SELECT seq FROM events WHERE session_id = ? AND seq <= ? AND type IN ('turn/start', 'turn/end') "
                "ORDER BY seq DESC LIMIT 1",
                (session_id, at),
            ).fetchone()
        if row is not None:
            return int(row[0])
        base = self._base(session_id)
        if base is not None and base[1] > 0:
            return self._last_turn_mark(base[0], min(at, base[1] - 1))
        return 0

    # -- fast metadata ----------------------------------------------------------------------

    def _own_typed_events(
        self, session_id: str, types: tuple[str, ...], from_seq: int, until: int | None
    ) -> Iterator[SessionEvent]:
        """Filtered in SQL (see :meth:`BaseStore.read_types`), every row returned checked against its checksum.

        The type column is a copy of the checked body's type, for filtering. Rows whose
        column names no type this build knows are fetched as well (and skipped once
        checked): a column damaged into a misspelt type would otherwise hide its event
        from this read, and no two known types are one byte apart.
        """
        marks = ", ".join("?" * len(types))
        columns = [column_text(kind) for kind in types]  # as the type column holds them
        known_marks = ", ".join("?" * len(_KNOWN_TYPES))
        end = MAX_SAFE_INTEGER if until is None else until
        chunk = 16  # small first: a caller looking for the first match stops early and pays for one short scan
        doing = f'reading session "{session_id}"'
        verified = event_verifier(session_id)
        decode = self._decode_body
        while until is None or from_seq < until:
            with self._lock, SqliteErrors(self.path, doing):
                rows = self._db.execute(
                    f"SELECT seq, type, body, crc FROM events WHERE session_id = ? AND seq >= ? AND seq < ? "
                    f"AND (type IN ({marks}) OR type NOT IN ({known_marks})) ORDER BY seq LIMIT ?",
                    (session_id, from_seq, end, *columns, *_KNOWN_TYPES, chunk),
                ).fetchall()
            for seq, kind, body, crc in rows:
                event = verified(seq, decoded_body(session_id, seq, body, decode), crc, False)
                if column_text(event.type) != kind:
                    raise CorruptSessionError(f'session "{session_id}" row {seq} does not hold its indexed event')
                if event.type in types:
                    yield event
            if len(rows) < chunk:
                return
            from_seq = rows[-1][0] + 1
            chunk = min(chunk * 8, _READ_CHUNK)

    _INFO_COLUMNS = (
        "SELECT s.id, s.header, s.created_at, s.cwd, s.parent_session, s.base_id, s.base_count, s.crc, s.next_seq, "
        "(SELECT seq FROM events e WHERE e.session_id = s.id ORDER BY seq DESC LIMIT 1), "
        "(SELECT time FROM events e WHERE e.session_id = s.id ORDER BY seq DESC LIMIT 1), "
        "(SELECT group_concat(c.id, char(10)) FROM sessions c WHERE c.parent_session = s.id)"
    )
    _INFO_WIDTH = 12

    @staticmethod
    def _info(values: Sequence[Any], *, lenient: bool = False) -> tuple[SessionInfo, bool]:
        """A session's info from an :attr:`_INFO_COLUMNS` row, and whether its rows are intact.

        A damaged session row is always an error. Rows lost from the end of its log are an
        error too, unless ``lenient`` (a listing): then the flag is False and the info
        reports the larger of the two counts, so the caller reads the log (never an empty
        one), and that read names the damage.
        """
        session_id, raw, created_at, cwd, parent, base_id, base_count, crc, recorded, last_seq, last_time, forks = (
            values[:12]
        )
        check_session_row(session_id, raw, created_at, cwd, parent, base_id, base_count, crc)
        if not _typed(values[8:12], _INFO_TAIL_TYPES):
            raise CorruptSessionError(f'stored session "{session_id}" is damaged (a column of the wrong type)')
        header = parse_stored_header(session_id, raw)
        next_seq = base_count if last_seq is None else last_seq + 1
        intact = next_seq == recorded
        if not intact:
            if not lenient:
                raise CorruptSessionError(lost_rows(session_id, next_seq, recorded))
            next_seq = max(next_seq, recorded)
        updated_at = created_at if last_time is None else max(created_at, last_time)
        children = tuple(sorted(forks.split("\n"))) if forks else ()
        return SessionInfo(session_id, header, next_seq, updated_at, children), intact

    def _infos(self, where: str, params: tuple[Any, ...]) -> list[SessionInfo]:
        with self._lock, SqliteErrors(self.path, "listing sessions"):
            rows = self._db.execute(f"{self._INFO_COLUMNS} FROM sessions s {where}", params).fetchall()
            if not where:
                self._check_session_count(len(rows))
        return [self._info(row)[0] for row in rows]

    def _list_page(self, request: PageRequest) -> list[SessionInfo]:
        """The page's ids chosen over the sessions table's columns, their infos built in the same statement.

        The table is scanned for the choice (a few ms per 10k sessions) but no header is
        parsed outside the page. Whether the scan saw every row is checked as a full
        listing checks it, in the same snapshot.
        """
        choose, params = page_ids_sql(request, SQLITE, "sessions", "events")
        statement = (
            f"{self._INFO_COLUMNS} FROM ({choose}) p CROSS JOIN sessions s ON s.id = p.id "
            f"ORDER BY p.page_key {'DESC' if request.descending else 'ASC'}, p.id"
        )
        with self._lock, SqliteErrors(self.path, "listing sessions"):
            db = self._db
            db.execute("BEGIN")
            try:
                rows = db.execute(statement, params).fetchall()
                (scanned,) = db.execute("SELECT count(*) FROM sessions NOT INDEXED").fetchone()
                self._check_session_count(scanned)
            finally:
                db.execute("COMMIT")
        return [self._info(row)[0] for row in rows]

    def _check_session_count(self, listed: int) -> None:
        """A listing scans the sessions table; its primary-key index must count as many rows.

        A damaged table page can drop rows from a scan without SQLite noticing, and a
        session missing from a listing is as lost as a missing event: counting the index
        (a separate b-tree, a few KB read per thousand sessions) catches it.
        """
        (indexed,) = self._db.execute(_COUNT_SESSIONS).fetchone()
        if indexed != listed:
            raise CorruptSessionError(
                f"{self.path} is damaged: its sessions table lists {listed} sessions but its index holds {indexed}"
            )

    # -- projection cache -------------------------------------------------------------------

    def _load_projection_rows(self, session_id: str) -> list[ProjectionRow]:
        with self._lock, SqliteErrors(self.path, f'reading the projection cache of session "{session_id}"'):
            raw = self._db.execute(
                f"SELECT {_CACHE_COLUMNS} FROM projection_cache WHERE session_id = ?", (session_id,)
            ).fetchall()
        sid = session_id.encode()
        return [row for values in raw if (row := _cache_row(sid, *values)) is not None]

    def _save_projection_rows(self, session_id: str, rows: Sequence[ProjectionRow]) -> None:
        if self.read_only:
            return  # the cache is a shortcut: a read-only store is folded from its log, and nothing is lost
        params = []
        for row in rows:
            state = dumps(row.state)
            crc = cache_row_crc(
                session_id.encode(), row.key.encode(), row.state_version, row.seq, state, row.identity.encode()
            )
            params.append((session_id, row.key, row.state_version, row.seq, state.decode(), row.identity, crc))
        if not params:
            return
        with self._lock:
            db = self._db
            try:
                # The cache is a shortcut, not data: its commit need not wait for an fsync. WAL keeps commits in
                # order, so these rows can never outlive the (FULL-synchronous) events they were folded from.
                db.execute("PRAGMA synchronous = NORMAL")
                try:
                    with self._write(f'writing the projection cache of session "{session_id}"') as tx:
                        tx.executemany(_SAVE_ROW, params)
                finally:
                    db.execute("PRAGMA synchronous = FULL")
            except sqlite3.IntegrityError:
                return  # the session was deleted meanwhile
            except sqlite3.Error as error:
                raise store_error(error, self.path, "writing the projection cache") from None

    def _list_projection_rows(self, keys: Sequence[str]) -> dict[str, dict[str, ProjectionRow]]:
        wanted = tuple(dict.fromkeys(keys))
        if not wanted:
            return {}
        marks = ", ".join("?" * len(wanted))
        with self._lock, SqliteErrors(self.path, "reading the projection cache"):
            raw = self._db.execute(
                f"SELECT CAST(session_id AS BLOB), {_CACHE_COLUMNS} FROM projection_cache WHERE key IN ({marks})",
                wanted,
            ).fetchall()
        found: dict[str, dict[str, ProjectionRow]] = {}
        for session_id, *values in raw:
            row = _cache_row(session_id, *values)
            if row is not None:
                found.setdefault(session_id.decode(), {})[row.key] = row
        return found

    def _infos_and_projection_rows(
        self, keys: Sequence[str]
    ) -> tuple[list[SessionInfo], dict[str, dict[str, ProjectionRow]]]:
        """Sessions and their cache rows of ``keys`` in one query (one snapshot; a primary-key seek per row).

        A session whose log lost rows is listed with no cache rows, so the caller folds its
        log, and that read reports the damage for that session alone.
        """
        wanted = tuple(dict.fromkeys(keys))
        columns = "".join(
            f", p{i}.state_version, p{i}.seq, CAST(p{i}.state AS BLOB), CAST(p{i}.identity AS BLOB), p{i}.crc"
            for i in range(len(wanted))
        )
        joins = "".join(
            f" LEFT JOIN projection_cache p{i} ON p{i}.session_id = s.id AND p{i}.key = ?" for i in range(len(wanted))
        )
        with self._lock, SqliteErrors(self.path, "listing sessions"):
            raw = self._db.execute(f"{self._INFO_COLUMNS}{columns} FROM sessions s{joins}", wanted).fetchall()
            self._check_session_count(len(raw))
        infos: list[SessionInfo] = []
        found: dict[str, dict[str, ProjectionRow]] = {}
        make_info, make_row, width = self._info, _cache_row, self._INFO_WIDTH
        encoded = [key.encode() for key in wanted]
        for values in raw:  # one tight loop: a big store lists tens of thousands of these
            session_id = values[0]
            info, intact = make_info(values, lenient=True)
            infos.append(info)
            if not intact:
                continue
            rows: dict[str, ProjectionRow] = {}
            column = width
            sid = session_id.encode()
            for key, key_bytes in zip(wanted, encoded, strict=True):
                state = values[column + 2]
                if state is not None:
                    row = make_row(
                        sid,
                        key_bytes,
                        values[column],
                        values[column + 1],
                        state,
                        values[column + 3],
                        values[column + 4],
                    )
                    if row is not None:  # a damaged row is no row: that projection is folded from the log
                        rows[key] = row
                column += 5
            if rows:
                found[session_id] = rows
        infos.sort(key=lambda info: (info.updated_at, info.id), reverse=True)
        return infos, found

    def _list_infos(self) -> list[SessionInfo]:
        return self._infos("", ())

    def _session_info(self, session_id: str) -> SessionInfo | None:
        found = self._infos("WHERE s.id = ?", (session_id,))
        return found[0] if found else None

    def _lengths(self) -> dict[str, int]:
        """The ``next_seq`` each append moves in its own transaction: one pass over the sessions table."""
        with self._lock, SqliteErrors(self.path, "listing sessions"):
            return dict(self._db.execute("SELECT id, next_seq FROM sessions").fetchall())

    # -- full-text search ---------------------------------------------------------------------

    def _search_text(self, query: TextQuery) -> TextHits:
        """From the FTS5 index, which every write keeps in its own transaction (one snapshot: hits and generation)."""
        with self._lock, SqliteErrors(self.path, "searching"):
            db = self._db
            db.execute("BEGIN")
            try:
                self._load_dictionaries(db)
                return TextHits(search(db, query), generation(db))
            finally:
                db.execute("COMMIT")

    def _rebuild_search_index(self) -> SearchIndexStatus:
        with self._write("rebuilding the search index") as db:
            self._load_dictionaries(db)
            rebuild(db)
        return self._search_index_status()

    def _search_index_status(self) -> SearchIndexStatus:
        with self._lock, SqliteErrors(self.path, "reading the search index"):
            db = self._db
            db.execute("BEGIN")
            try:
                return SearchIndexStatus("sqlite-fts5", document_count(db), generation(db))
            finally:
                db.execute("COMMIT")
