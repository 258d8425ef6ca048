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

The file carries ``application_id`` ("DSHP") and ``user_version`` = the number of
schema migrations applied; a foreign or newer database is refused, never modified.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson

from dshpy.core.events import SessionEvent, encode_event
from dshpy.core.json import MAX_SAFE_INTEGER, dumps, loads
from dshpy.errors import (
    ConflictError,
    CorruptSessionError,
    FormatVersionError,
    SessionExistsError,
    SessionNotFound,
    StoreError,
)
from dshpy.log.header import SessionHeader
from dshpy.storage.base import (
    BaseStore,
    SessionInfo,
    StoredRecord,
    column_text,
    parse_stored_event,
    parse_stored_header,
)
from dshpy.storage.projection_cache import ProjectionRow, group_projection_rows

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
)
"""Schema migrations; position + 1 is the ``user_version`` a database has after applying it.

2 adds ``projection_cache``: one row per (session, projection), see
:mod:`dshpy.storage.projection_cache`."""

_SAVE_ROW = """INSERT INTO projection_cache (session_id, key, state_version, seq, state, identity)
VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (session_id, key) DO UPDATE SET
    state_version = excluded.state_version, seq = excluded.seq, state = excluded.state, identity = excluded.identity"""
"""Upsert one cache row (the last write wins: every row written is valid, an older one only folds a longer tail)."""

_INSERT_EVENTS = "INSERT INTO events VALUES (?, ?, ?, ?, ?)"

_NEXT_SEQ = "SELECT (SELECT max(seq) FROM events WHERE session_id = s.id), s.base_count FROM sessions s WHERE s.id = ?"
"""One past the last stored seq (an index seek on the events primary key) and the session's inherited count."""

_READ_CHUNK = 4096
_DAMAGED = object()


def _normalized_schema(connection: sqlite3.Connection) -> list[tuple[str, str, str]]:
    rows = connection.execute(
        "SELECT type, name, sql FROM sqlite_schema WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name"
    ).fetchall()
    return [(kind, name, " ".join((sql or "").split())) for kind, name, sql in rows]


def _reference_schema(version: int) -> list[tuple[str, str, str]]:
    reference = sqlite3.connect(":memory:")
    try:
        for migration in SCHEMA_MIGRATIONS[:version]:
            for statement in migration:
                reference.execute(statement)
        return _normalized_schema(reference)
    finally:
        reference.close()


class SqliteStore(BaseStore):
    """Sessions in one SQLite file (WAL, ``synchronous=FULL``, STRICT tables)."""

    zero_copy_fork = True

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout_ms: int = 10_000) -> None:
        self.path = Path(path)
        self.url = f"sqlite:///{self.path}"
        self._lock = threading.RLock()
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not self.path.exists():
            with contextlib.suppress(FileExistsError):  # create it private before SQLite opens it
                os.close(os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        try:
            self._db = sqlite3.connect(
                self.path, timeout=busy_timeout_ms / 1000, isolation_level=None, check_same_thread=False
            )
            self._cursor = self._db.cursor()
            """The write paths' cursor (used under ``_lock`` only): no cursor object is built per statement."""
            self._db.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            self._prepare_schema()
            mode = self._db.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise StoreError(f"{self.path}: could not switch the database to WAL mode (got {mode})")
            self._db.execute("PRAGMA synchronous = FULL")
            self._db.execute("PRAGMA foreign_keys = ON")
            self._db.execute("PRAGMA trusted_schema = OFF")
        except sqlite3.DatabaseError as error:
            raise CorruptSessionError(f"{self.path} is not a usable SQLite database: {error}") from None

    # -- schema -------------------------------------------------------------------------

    def _prepare_schema(self) -> None:
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            application_id = db.execute("PRAGMA application_id").fetchone()[0]
            version = db.execute("PRAGMA user_version").fetchone()[0]
            has_objects = db.execute("SELECT count(*) FROM sqlite_schema WHERE name NOT LIKE 'sqlite_%'").fetchone()[0]
            if application_id == 0 and version == 0 and not has_objects:
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
            for index in range(version, latest):
                for statement in SCHEMA_MIGRATIONS[index]:
                    db.execute(statement)
                db.execute(f"PRAGMA user_version = {index + 1}")
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    @property
    def schema_version(self) -> int:
        with self._lock:
            version: int = self._db.execute("PRAGMA user_version").fetchone()[0]
            return version

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction: the write lock is taken before anything is read."""
        with self._lock:
            db = self._db
            self._begin()
            try:
                yield db
                db.execute("COMMIT")
            except BaseException:
                self._rollback()
                raise

    def _begin(self) -> None:
        """``BEGIN IMMEDIATE`` (the caller holds ``_lock``): a busy database is a StoreError naming the file."""
        try:
            self._cursor.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as error:
            raise StoreError(f"{self.path}: cannot start a write transaction: {error}") from None

    def _rollback(self) -> None:
        """End a failed write transaction (unless SQLite already rolled it back), keeping the original error."""
        db = self._db
        if db.in_transaction:
            self._cursor.execute("ROLLBACK")

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # -- primitives -----------------------------------------------------------------------

    @staticmethod
    def _rows(session_id: str, events: Sequence[SessionEvent]) -> list[tuple[str, int, str, int, bytes]]:
        return [(session_id, e.seq, column_text(e.type), e.time, encode_event(e, seq_ranges=False)) for e in events]

    def _insert(self, record: StoredRecord) -> None:
        header = record.header
        base_id, base_count = record.base if record.base is not None else (None, 0)
        events = record.events
        try:
            with self._write() as db:
                if db.execute("SELECT 1 FROM sessions WHERE id = ?", (header.id,)).fetchone():
                    raise SessionExistsError(f'session "{header.id}" already exists')
                db.execute(
                    "INSERT INTO sessions (id, header, created_at, cwd, parent_session, base_id, base_count) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (
                        header.id,
                        dumps(header.to_record()).decode(),
                        header.created_at,
                        None if header.cwd is None else column_text(header.cwd),
                        header.parent_session,
                        base_id,
                        base_count,
                    ),
                )
                db.executemany(_INSERT_EVENTS, self._rows(header.id, events))
        except sqlite3.IntegrityError as error:
            raise SessionExistsError(f'session "{header.id}" already exists ({error})') from None

    def _session_row(self, session_id: str, columns: str) -> Any:
        with self._lock:
            row = self._db.execute(f"SELECT {columns} FROM sessions WHERE id = ?", (session_id,)).fetchone()
        if row is None:
            raise SessionNotFound(f'session "{session_id}" not found')
        return row

    def _header(self, session_id: str) -> SessionHeader:
        (raw,) = self._session_row(session_id, "header")
        return parse_stored_header(session_id, raw)

    def _base(self, session_id: str) -> tuple[str, int] | None:
        base_id, base_count = self._session_row(session_id, "base_id, base_count")
        return None if base_id is None else (base_id, base_count)

    def _length(self, session_id: str) -> int:
        with self._lock:
            return self._next_seq(self._db, session_id)

    @staticmethod
    def _next_seq(db: sqlite3.Connection | sqlite3.Cursor, session_id: str) -> int:
        """One past the last stored seq (an index seek), or the inherited count of an empty fork."""
        row = db.execute(_NEXT_SEQ, (session_id,)).fetchone()
        if row is None:
            raise SessionNotFound(f'session "{session_id}" not found')
        last, base_count = row
        return int(base_count) if last is None else int(last) + 1

    def _own_events(self, session_id: str, from_seq: int) -> Iterator[SessionEvent]:
        expected = from_seq
        while True:
            with self._lock:
                rows = self._db.execute(
                    "SELECT seq, body FROM events WHERE session_id = ? AND seq >= ? ORDER BY seq LIMIT ?",
                    (session_id, expected, _READ_CHUNK),
                ).fetchall()
            for seq, body in rows:
                if seq != expected:
                    raise CorruptSessionError(
                        f'session "{session_id}" is missing event {expected} (next stored: {seq})'
                    )
                yield parse_stored_event(session_id, seq, body)
                expected += 1
            if len(rows) < _READ_CHUNK:
                return

    def _append(self, session_id: str, expected_seq: int, events: Sequence[SessionEvent]) -> None:
        """The live write path: one ``BEGIN IMMEDIATE`` transaction per flush, the stored next seq re-read inside it.

        What :meth:`_write` does, written out (this runs once per flush): the rows are
        encoded before the write lock is taken, so the lock is held for the database
        work only, and every statement goes through one long-lived cursor.
        """
        rows = self._rows(session_id, events)
        with self._lock:
            cursor = self._cursor
            self._begin()
            try:
                stored = self._next_seq(cursor, session_id)
                if stored != expected_seq:
                    raise ConflictError(
                        f'session "{session_id}" ends at seq {stored}, not {expected_seq}: '
                        "another writer appended first",
                        expected_seq=expected_seq,
                        actual_seq=stored,
                    )
                cursor.executemany(_INSERT_EVENTS, rows)
                cursor.execute("COMMIT")
            except sqlite3.IntegrityError as error:
                self._rollback()
                raise ConflictError(
                    f'session "{session_id}": seq already taken ({error})', expected_seq=expected_seq
                ) from None
            except BaseException:
                self._rollback()
                raise

    def _remove(self, session_id: str) -> None:
        with self._write() as db:
            db.execute("DELETE FROM sessions WHERE id = ?", (session_id,))

    def _ids(self) -> list[str]:
        with self._lock:
            return [row[0] for row in self._db.execute("SELECT id FROM sessions ORDER BY id")]

    def _children(self, session_id: str) -> list[str]:
        with self._lock:
            rows = self._db.execute("SELECT id FROM sessions WHERE base_id = ? ORDER BY id", (session_id,))
            return [row[0] for row in rows]

    def _rebase(self, session_id: str, prefix: Sequence[SessionEvent]) -> None:
        with self._write() as db:
            db.executemany(_INSERT_EVENTS, self._rows(session_id, prefix))
            db.execute("UPDATE sessions SET base_id = NULL, base_count = 0 WHERE id = ?", (session_id,))

    def _turn_window(self, session_id: str, boundary: int) -> list[SessionEvent]:
        """Seek to the last turn boundary at or before ``boundary`` instead of reading the prefix."""
        start = self._last_turn_mark(session_id, boundary)
        return list(itertools.takewhile(lambda e: e.seq <= boundary, self._read_chain(session_id, start)))

    def _last_turn_mark(self, session_id: str, at: int) -> int:
        with self._lock:
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
        """Filtered in SQL (see :meth:`BaseStore.read_types`)."""
        marks = ", ".join("?" * len(types))
        chunk = 16  # small first: a caller looking for the first match stops early and pays for one short scan
        while until is None or from_seq < until:
            with self._lock:
                rows = self._db.execute(
                    f"SELECT seq, body FROM events WHERE session_id = ? AND seq >= ? AND seq < ? AND type IN ({marks}) "
                    "ORDER BY seq LIMIT ?",
                    (session_id, from_seq, MAX_SAFE_INTEGER if until is None else until, *types, chunk),
                ).fetchall()
            for seq, body in rows:
                event = parse_stored_event(session_id, seq, body)
                if event.type not in types:
                    raise CorruptSessionError(f'session "{session_id}" row {seq} does not hold its indexed event')
                yield event
            if len(rows) < chunk:
                return
            from_seq = rows[-1][0] + 1
            chunk = min(chunk * 8, _READ_CHUNK)

    _INFO_COLUMNS = (
        "SELECT s.id, s.header, s.base_count, s.created_at, "
        "(SELECT seq FROM events e WHERE e.session_id = s.id ORDER BY seq DESC LIMIT 1), "
        "(SELECT time FROM events e WHERE e.session_id = s.id ORDER BY seq DESC LIMIT 1), "
        "(SELECT group_concat(c.id, char(10)) FROM sessions c WHERE c.parent_session = s.id)"
    )

    def _info(
        self,
        session_id: str,
        raw: str,
        base_count: int,
        created_at: int,
        last_seq: int | None,
        last_time: int | None,
        forks: str | None,
    ) -> SessionInfo:
        header = parse_stored_header(session_id, raw)
        next_seq = base_count if last_seq is None else last_seq + 1
        updated_at = created_at if last_time is None else max(created_at, last_time)
        children = tuple(sorted(forks.split("\n"))) if forks else ()
        return SessionInfo(session_id, header, next_seq, updated_at, children)

    def _infos(self, where: str, params: tuple[Any, ...]) -> list[SessionInfo]:
        with self._lock:
            rows = self._db.execute(f"{self._INFO_COLUMNS} FROM sessions s {where}", params).fetchall()
        return [self._info(*row) for row in rows]

    # -- projection cache -------------------------------------------------------------------

    @staticmethod
    def _projection_row(key: str, version: int, seq: int, state: str, identity: str) -> ProjectionRow | None:
        try:
            return ProjectionRow(key, version, seq, loads(state), identity)
        except orjson.JSONDecodeError:
            return None  # a damaged row is no row: the projection is folded from the log

    def _load_projection_rows(self, session_id: str) -> list[ProjectionRow]:
        try:
            with self._lock:
                raw = self._db.execute(
                    "SELECT key, state_version, seq, state, identity FROM projection_cache WHERE session_id = ?",
                    (session_id,),
                ).fetchall()
        except sqlite3.Error as error:
            raise StoreError(f"{self.path}: cannot read the projection cache: {error}") from None
        return [row for values in raw if (row := self._projection_row(*values)) is not None]

    def _save_projection_rows(self, session_id: str, rows: Sequence[ProjectionRow]) -> None:
        params = [
            (session_id, row.key, row.state_version, row.seq, dumps(row.state).decode(), row.identity) for row in rows
        ]
        if not params:
            return
        with self._lock:
            db = self._db
            try:
                # The cache is a shortcut, not data: its commit need not wait for an fsync. WAL keeps commits in
                # order, so these rows can never outlive the (FULL-synchronous) events they were folded from.
                db.execute("PRAGMA synchronous = NORMAL")
                try:
                    with self._write() as tx:
                        tx.executemany(_SAVE_ROW, params)
                finally:
                    db.execute("PRAGMA synchronous = FULL")
            except sqlite3.IntegrityError:
                return  # the session was deleted meanwhile
            except sqlite3.Error as error:
                raise StoreError(f"{self.path}: cannot write the projection cache: {error}") from None

    def _list_projection_rows(self, keys: Sequence[str]) -> dict[str, dict[str, ProjectionRow]]:
        wanted = tuple(dict.fromkeys(keys))
        if not wanted:
            return {}
        marks = ", ".join("?" * len(wanted))
        with self._lock:
            raw = self._db.execute(
                f"SELECT session_id, key, state_version, seq, state, identity FROM projection_cache "
                f"WHERE key IN ({marks})",
                wanted,
            ).fetchall()
        return group_projection_rows(raw)

    def _infos_and_projection_rows(
        self, keys: Sequence[str]
    ) -> tuple[list[SessionInfo], dict[str, dict[str, ProjectionRow]]]:
        """Sessions and their cache rows of ``keys`` in one query (one snapshot; a primary-key seek per row)."""
        wanted = tuple(dict.fromkeys(keys))
        columns = "".join(f", p{i}.state_version, p{i}.seq, p{i}.state, p{i}.identity" for i in range(len(wanted)))
        joins = "".join(
            f" LEFT JOIN projection_cache p{i} ON p{i}.session_id = s.id AND p{i}.key = ?" for i in range(len(wanted))
        )
        with self._lock:
            raw = self._db.execute(f"{self._INFO_COLUMNS}{columns} FROM sessions s{joins}", wanted).fetchall()
        infos: list[SessionInfo] = []
        found: dict[str, dict[str, ProjectionRow]] = {}
        parse, make_info = loads, self._info
        for values in raw:  # one tight loop: a big store lists tens of thousands of these
            session_id = values[0]
            infos.append(make_info(session_id, values[1], values[2], values[3], values[4], values[5], values[6]))
            rows: dict[str, ProjectionRow] = {}
            column = 7
            for key in wanted:
                state = values[column + 2]
                if state is not None:
                    try:
                        parsed = parse(state)
                    except orjson.JSONDecodeError:  # a damaged row is no row: that projection is folded from the log
                        parsed = _DAMAGED
                    if parsed is not _DAMAGED:
                        rows[key] = ProjectionRow(key, values[column], values[column + 1], parsed, values[column + 3])
                column += 4
            if rows:
                found[session_id] = rows
        infos.sort(key=lambda info: (info.updated_at, info.id), reverse=True)
        return infos, found

    def _query_infos(self, session_id: str | None) -> list[SessionInfo]:
        return self._infos("", ()) if session_id is None else self._infos("WHERE s.id = ?", (session_id,))
