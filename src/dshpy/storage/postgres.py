"""``postgresql://user@host:port/db?schema=NAME`` — one store shared by agents on many machines.

Two tables in one PostgreSQL schema (see :mod:`~dshpy.storage.postgres_schema`): a
``sessions`` row per session (its header record stored as the exact JSON text dsh
writes, plus the zero-copy fork base) and an ``events`` row per event keyed by
``(session_id, seq)``, holding the event's exact wire JSON.

Every flush is one transaction, sent as one statement (the schema's ``append_events``
function, so a flush costs one round trip): lock the session row, compare the stored
next seq with the writer's expected one, insert the batch, record the new next seq and
``pg_notify`` followers, commit. Writers on any connection or host are serialized by the row lock, and the
primary key would refuse an interleaved seq even without it; the loser gets
:class:`~dshpy.errors.ConflictError`. A connection lost mid-flush rolls the whole batch
back on the server and raises :class:`~dshpy.errors.StoreUnavailableError`; if the commit
itself went through and only the reply was lost, re-sending the same batch is
recognized as already stored (see :meth:`BaseStore._append_checked`).

A live session holds its session's single-writer lease, a session-level advisory lock
(:mod:`~dshpy.storage.postgres_lease`), so ``open`` never repairs a turn another live
writer is still writing.

Forks are zero-copy, as in SQLite: a child row names its parent (``base_id``) and how
many events it inherits (``base_count``) and stores only its own events.

Damage is detected, never served: every row carries a CRC-32 of exactly what it stores
and each session row its ``next_seq`` (:mod:`~dshpy.storage.postgres_checksums`), checked
on every read, so a row altered behind dshpy's back (a manual ``UPDATE``, a buggy tool, a
partly restored backup) raises :class:`~dshpy.errors.CorruptSessionError` naming the
session and seq, and rows lost from the end of a log are an error, not a shorter session.
A damaged projection-cache row is only folded again.
"""

from __future__ import annotations

import builtins
import itertools
import re
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any
from urllib.parse import urlencode

import psycopg
import psycopg_pool

from dshpy.core.events import SessionEvent, encode_event
from dshpy.core.json import dumps
from dshpy.core.vocabulary import KNOWN_EVENT_TYPES
from dshpy.errors import (
    ConflictError,
    CorruptSessionError,
    SessionExistsError,
    SessionNotFound,
    StoreError,
    StoreUnavailableError,
)
from dshpy.log.header import SessionHeader
from dshpy.storage.backend import (
    ChangeFeed,
    IndexedReads,
    MetadataQueries,
    PagedListing,
    ProjectionCache,
    SearchIndex,
    SessionLengths,
    WriterLeases,
    ZeroCopyForks,
)
from dshpy.storage.base import BaseStore, column_text, parse_stored_header
from dshpy.storage.checksum import (
    cache_row_crc,
    check_session_row,
    event_row_crc,
    event_verifier,
    lost_rows,
    session_row_crc,
)
from dshpy.storage.flush_report import record_durable, reporting
from dshpy.storage.follow import StopSignal
from dshpy.storage.listing_page import PageRequest
from dshpy.storage.page_sql import POSTGRES, page_ids_sql
from dshpy.storage.postgres_checksums import verified_cache_rows
from dshpy.storage.postgres_connect import (
    PostgresOptions,
    StorePool,
    connect,
    quote_identifier,
    translated,
)
from dshpy.storage.postgres_follow import notify_follow
from dshpy.storage.postgres_lease import AdvisoryLease, holder_of, lease_key
from dshpy.storage.postgres_schema import MIGRATIONS, prepare_schema
from dshpy.storage.postgres_search import (
    INSERT_DOCS,
    NEXT_GENERATION,
    doc_columns,
    fill_search_docs,
    hits_of,
    postgres_dialect,
)
from dshpy.storage.projection_cache import ProjectionRow
from dshpy.storage.records import SessionInfo, StoredRecord
from dshpy.storage.search_records import SearchIndexStatus, TextHits, TextQuery
from dshpy.storage.search_statement import search_statement
from dshpy.storage.store_url import StoreURL, parse_store_url

__all__ = ["PostgresStore"]

_READ_CHUNK = 4096
_INSERT_CHUNK = 2000
_TURN_MARKS = ["turn/start", "turn/end"]


class _Sql:
    """Every statement, with the quoted schema filled in once."""

    def __init__(self, schema: str) -> None:
        s = quote_identifier(schema)
        self.session = (
            f"SELECT header, created_at, cwd, parent_session, base_id, base_count, crc FROM {s}.sessions WHERE id = %s"
        )
        # FOR NO KEY UPDATE serializes writers of one session (detaching a fork) without blocking
        # the FOR KEY SHARE locks that foreign-key checks take (forking it, appending to it).
        self.locked_session = self.session + " FOR NO KEY UPDATE"
        self.next_seq = (
            f"SELECT COALESCE((SELECT max(seq) + 1 FROM {s}.events WHERE session_id = t.id), t.base_count), "
            f"t.next_seq FROM {s}.sessions t WHERE t.id = %s"
        )
        self.recorded = f"SELECT next_seq FROM {s}.sessions WHERE id = %s"
        self.events = f"SELECT seq, body, crc FROM {s}.events WHERE session_id = %s AND seq >= %s ORDER BY seq LIMIT %s"
        # Rows whose type column names no known type are fetched too: a damaged column must not hide its row.
        self.typed_events = (
            f"SELECT seq, type, body, crc FROM {s}.events WHERE session_id = %s AND seq >= %s AND seq < %s "
            "AND (type = ANY(%s) OR NOT type = ANY(%s)) ORDER BY seq LIMIT %s"
        )
        self.insert_session = (
            f"INSERT INTO {s}.sessions (id, header, created_at, cwd, parent_session, base_id, base_count, next_seq, "
            "crc) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (id) DO NOTHING"
        )
        self.insert_events = (
            f"INSERT INTO {s}.events (session_id, seq, type, time, body, crc) "
            "SELECT %s, * FROM unnest(%b::bigint[], %b::text[], %b::bigint[], %b::text[], %b::bigint[])"
        )
        self.append = (
            f"SELECT {s}.append_events(%s, %s, %b::bigint[], %b::text[], %b::bigint[], %b::text[], %b::bigint[], %s, "
            "%b::bigint[], %b::text[], %b::bigint[], %b::text[], %b::text[])"
        )
        self.insert_docs = INSERT_DOCS.format(schema=s)
        # One statement: the session goes and the search generation moves on, or neither.
        self.remove = (
            f"WITH gone AS (DELETE FROM {s}.sessions WHERE id = %s RETURNING id) "
            f"UPDATE {s}.search_state SET generation = generation + 1 WHERE id = 1 AND EXISTS (SELECT 1 FROM gone)"
        )
        self.forks_exist = f"SELECT EXISTS (SELECT 1 FROM {s}.sessions WHERE base_id IS NOT NULL)"
        self.search_generation = f"SELECT generation FROM {s}.search_state WHERE id = 1"
        self.document_count = f"SELECT count(*) FROM {s}.search_docs"
        self.drop_docs = f"DELETE FROM {s}.search_docs"
        self.next_generation = NEXT_GENERATION.format(schema=s)
        self.lengths = f"SELECT id, next_seq FROM {s}.sessions"
        self.ids = f'SELECT id FROM {s}.sessions ORDER BY id COLLATE "C"'
        self.children = f'SELECT id FROM {s}.sessions WHERE base_id = %s ORDER BY id COLLATE "C"'
        self.detach = f"UPDATE {s}.sessions SET base_id = NULL, base_count = 0, crc = %s WHERE id = %s"
        self.last_turn_mark = (
            f"SELECT seq FROM {s}.events WHERE session_id = %s AND seq <= %s AND type = ANY(%s) "
            "ORDER BY seq DESC LIMIT 1"
        )
        self.sessions_table = f"{s}.sessions"
        self.events_table = f"{s}.events"
        info_columns = """
            SELECT t.id, t.header, t.created_at, t.cwd, t.parent_session, t.base_id, t.base_count, t.crc,
                   t.next_seq, last.seq, last.time,
                   (SELECT array_agg(c.id) FROM {s}.sessions c WHERE c.parent_session = t.id)"""
        last_event = f"""
            LEFT JOIN LATERAL (
                SELECT e.seq, e.time FROM {s}.events e WHERE e.session_id = t.id ORDER BY e.seq DESC LIMIT 1
            ) last ON true"""
        self.infos = f"{info_columns.format(s=s)} FROM {s}.sessions t{last_event}"
        self.page_infos = (
            f"{info_columns.format(s=s)} FROM ({{choose}}) p JOIN {s}.sessions t ON t.id = p.id{last_event} "
            'ORDER BY p.page_key {direction}, p.id COLLATE "C"'
        )
        self.schema_version = f"SELECT count(*) FROM {s}.schema_version"
        self.projection_rows = (
            f"SELECT session_id, key, state_version, seq, state, identity, crc FROM {s}.projection_cache "
            "WHERE session_id = %s"
        )
        self.list_projection_rows = (
            f"SELECT session_id, key, state_version, seq, state, identity, crc FROM {s}.projection_cache "
            "WHERE key = ANY(%s)"
        )
        self.save_projection_rows = f"""
            INSERT INTO {s}.projection_cache AS c (session_id, key, state_version, seq, state, identity, crc)
            SELECT %s, * FROM unnest(%b::text[], %b::integer[], %b::bigint[], %b::text[], %b::text[], %b::bigint[])
            ON CONFLICT (session_id, key) DO UPDATE SET
                state_version = excluded.state_version, seq = excluded.seq, state = excluded.state,
                identity = excluded.identity, crc = excluded.crc"""


_Columns = tuple[list[int], list[str], list[int], list[str], list[int]]


def _columns(session_id: str, events: Sequence[SessionEvent]) -> _Columns:
    """The batch as five parallel arrays (seq, type, time, body, checksum): one ``unnest`` insert, not a
    statement per row.

    They are sent in binary (``%b``): text arrays in text format would be escaped
    element by element in Python, which costs more than the insert itself.
    """
    seqs, kinds, times, bodies, crcs = [], [], [], [], []
    for e in events:
        body = encode_event(e, seq_ranges=False)
        seqs.append(e.seq)
        kinds.append(column_text(e.type))
        times.append(e.time)
        bodies.append(body.decode())
        crcs.append(event_row_crc(session_id, e.seq, body))
    return seqs, kinds, times, bodies, crcs


_KNOWN_TYPES = sorted(KNOWN_EVENT_TYPES)


class PostgresStore(
    BaseStore,
    ZeroCopyForks,
    MetadataQueries,
    PagedListing,
    ProjectionCache,
    IndexedReads,
    ChangeFeed,
    SearchIndex,
    SessionLengths,
    WriterLeases,
):
    """Sessions in a PostgreSQL schema, through a psycopg connection pool.

    ``dsn`` is a ``postgresql://`` URL; ``schema`` (default ``dshpy``), ``pool_min`` and
    ``pool_max`` may be given as arguments or as query options of the URL, and every
    other query option goes to libpq. The schema is created or migrated on first use.
    """

    text_column_ids = True

    follow_resync_s = 5.0
    """A follower re-reads at least this often even without a notification (one lost
    NOTIFY, e.g. across a reconnect, only delays events, never loses them)."""

    def __init__(
        self, dsn: str, *, schema: str | None = None, pool_min: int | None = None, pool_max: int | None = None
    ) -> None:
        parsed = parse_store_url(dsn)
        if parsed.scheme != "postgresql":
            raise StoreError(f"not a PostgreSQL URL: {parsed.raw!r} (expected postgresql://user@host:port/db)")
        options = dict(parsed.options)
        for key, value in (("schema", schema), ("pool_min", pool_min), ("pool_max", pool_max)):
            if value is not None:
                options[key] = str(value)
        self._options = PostgresOptions.parse(parsed.location, options, display=self._masked(parsed.location))
        self.schema = self._options.schema
        self.url = f"{parsed.location}?{urlencode(options)}" if options else parsed.location
        self.channel = f"dshpy:{self.schema}"
        """The NOTIFY channel of this schema; payloads are ``"<session id> <next seq>"``."""
        self._sql = _Sql(self.schema)
        self._dialect = postgres_dialect(quote_identifier(self.schema))
        setup = connect(self._options.conninfo)
        try:
            self._check_server(setup)
            self.applied_migrations: tuple[int, ...] = self._prepare(setup)
            """Schema migrations this store object applied when it opened (usually none)."""
        finally:
            setup.close()
        self._pool = StorePool(self._options)

    @classmethod
    def from_url(cls, url: StoreURL) -> PostgresStore:
        return cls(url.raw)

    @staticmethod
    def _masked(url: str) -> str:
        """``url`` with any password (``user:password@`` or ``password=``) replaced by ``***``, for messages."""
        head, sep, rest = url.partition("://")
        location, query_sep, query = rest.partition("?")
        userinfo, at, host = location.rpartition("@")
        if at and ":" in userinfo:
            location = f"{userinfo.split(':', 1)[0]}:***@{host}"
        query = re.sub(r"(^|&)password=[^&]*", r"\1password=***", query)
        return f"{head}{sep}{location}{query_sep}{query}"

    @property
    def display_url(self) -> str:
        """:attr:`url` with the password masked, for messages and logs."""
        return self._masked(self.url)

    def __repr__(self) -> str:
        return f"<PostgresStore {self.display_url}>"

    # -- connections and schema ----------------------------------------------------------

    def _check_server(self, conn: psycopg.Connection[Any]) -> None:
        with translated("check the server"):
            row = conn.execute("SHOW server_encoding").fetchone()
        if row is None or str(row[0]).upper() not in ("UTF8", "UTF-8"):
            raise StoreError(
                f"the database must use UTF8 encoding (it uses {row and row[0]}); create it WITH ENCODING 'UTF8'"
            )

    def _prepare(self, conn: psycopg.Connection[Any]) -> tuple[int, ...]:
        with translated(f'prepare schema "{self.schema}"'):
            return prepare_schema(conn, self.schema)

    def migrate(self) -> tuple[int, ...]:
        """Bring the schema to this build's version now; returns the versions applied (often none)."""
        with self._connection(f'migrate schema "{self.schema}"') as conn:
            return prepare_schema(conn, self.schema)

    @property
    def schema_version(self) -> int:
        """The number of schema migrations the database records."""
        with self._connection("read the schema version") as conn:
            row = conn.execute(self._sql.schema_version).fetchone()
        return int(row[0]) if row else 0

    @property
    def latest_schema_version(self) -> int:
        return len(MIGRATIONS)

    def _connection(self, what: str) -> AbstractContextManager[psycopg.Connection[Any]]:
        """A pooled connection; psycopg and pool errors leave as dshpy errors."""
        return self._pool.connection(what)

    def _rows(self, what: str, query: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        """Run a read. One that met a dropped connection is retried once on a fresh one (reads are idempotent)."""
        try:
            with self._connection(what) as conn:
                return conn.execute(query, params).fetchall()
        except StoreUnavailableError as error:
            if isinstance(error.__cause__, psycopg_pool.PoolTimeout):
                raise  # the server is unreachable or the pool exhausted: retrying at once would not help
        with self._connection(what) as conn:
            return conn.execute(query, params).fetchall()

    def close(self) -> None:
        self._pool.close()

    # -- primitives -------------------------------------------------------------------------

    def _lease(self, session_id: str) -> AdvisoryLease:
        """An advisory lock on a connection of its own, held for the live session's lifetime (see
        :mod:`dshpy.storage.postgres_lease` for why, and what it costs)."""
        with self._connection(f'check the writer lease of session "{session_id}"') as conn:
            busy = holder_of(conn, lease_key(self.schema, session_id), session_id)
        if busy is not None:  # held: refused without opening a connection for nothing
            raise busy
        return AdvisoryLease(self._options.conninfo, self.schema, session_id)

    def _insert_events(self, conn: psycopg.Connection[Any], session_id: str, events: Sequence[SessionEvent]) -> None:
        """Insert events and their full-text rows, in the caller's transaction."""
        for start in range(0, len(events), _INSERT_CHUNK):
            chunk = events[start : start + _INSERT_CHUNK]
            conn.execute(self._sql.insert_events, (session_id, *_columns(session_id, chunk)))
            docs = doc_columns(chunk)
            if docs[0]:
                conn.execute(self._sql.insert_docs, (session_id, *docs))

    def _insert(self, record: StoredRecord) -> None:
        header = record.header
        base_id, base_count = record.base if record.base is not None else (None, 0)
        raw = dumps(header.to_record()).decode()
        cwd = None if header.cwd is None else column_text(header.cwd)
        columns = (header.id, raw, header.created_at, cwd, header.parent_session, base_id, base_count)
        next_seq = base_count + len(record.events)
        with self._connection(f'create session "{header.id}"') as conn:
            try:
                with conn.transaction():
                    created = conn.execute(
                        self._sql.insert_session, (*columns, next_seq, session_row_crc(*columns))
                    ).rowcount
                    if not created:
                        raise SessionExistsError(f'session "{header.id}" already exists')
                    self._insert_events(conn, header.id, record.events)
            except psycopg.errors.ForeignKeyViolation:
                raise SessionNotFound(f'session "{base_id}" not found (deleted while forking)') from None

    def _session_row(self, session_id: str) -> tuple[str, str | None, int]:
        """The verified ``(header, base_id, base_count)`` of a session row."""
        rows = self._rows("read a session", self._sql.session, (session_id,))
        if not rows:
            raise SessionNotFound(f'session "{session_id}" not found')
        raw, created_at, cwd, parent, base_id, base_count, crc = rows[0]
        check_session_row(session_id, raw, created_at, cwd, parent, base_id, base_count, crc)
        return str(raw), base_id, int(base_count)

    def _header(self, session_id: str) -> SessionHeader:
        raw, _base_id, _base_count = self._session_row(session_id)
        return parse_stored_header(session_id, raw)

    def _base(self, session_id: str) -> tuple[str, int] | None:
        _raw, base_id, base_count = self._session_row(session_id)
        return None if base_id is None else (str(base_id), base_count)

    def _length(self, session_id: str) -> int:
        """One past the last stored seq, which must be the ``next_seq`` the session row recorded."""
        rows = self._rows("read a session length", self._sql.next_seq, (session_id,))
        if not rows:
            raise SessionNotFound(f'session "{session_id}" not found')
        stored, recorded = int(rows[0][0]), int(rows[0][1])
        if stored != recorded:
            raise CorruptSessionError(lost_rows(session_id, stored, recorded))
        return stored

    def _recorded(self, session_id: str) -> int:
        rows = self._rows("read a session length", self._sql.recorded, (session_id,))
        if not rows:
            raise SessionNotFound(f'session "{session_id}" not found')
        return int(rows[0][0])

    def _own_events(self, session_id: str, from_seq: int) -> Iterator[SessionEvent]:
        """Chunked reads, each row checked; no connection is held while the caller consumes a chunk.

        The log must end where its session row's ``next_seq`` says: rows committed while
        we read are fine, fewer rows than recorded when we started (or more than recorded
        at the end) are damage.
        """
        recorded = self._recorded(session_id)
        expected = from_seq
        verified = event_verifier(session_id)
        while True:
            rows = self._rows("read events", self._sql.events, (session_id, expected, _READ_CHUNK))
            for seq, body, crc in rows:
                if seq != expected:
                    raise CorruptSessionError(
                        f'session "{session_id}" is missing event {expected} (next stored: {seq})'
                    )
                yield verified(seq, body.encode(), crc, False)
                expected += 1
            if len(rows) < _READ_CHUNK:
                break
        if expected == recorded:
            return
        now = self._recorded(session_id)
        if expected < recorded or (expected > from_seq and expected > now):
            raise CorruptSessionError(lost_rows(session_id, expected, now))

    def _append(self, session_id: str, expected_seq: int, events: Sequence[SessionEvent]) -> None:
        """One statement: the server-side ``append_events`` locks, compares, moves ``next_seq``, inserts and
        notifies; a log that lost rows is refused (``data_corrupted``) as :class:`CorruptSessionError`."""
        columns = _columns(session_id, events)
        params = (session_id, expected_seq, *columns, self.channel, *doc_columns(events))
        report = reporting()
        if report is not None:
            report.written = sum(len(body.encode()) for body in columns[3])
        with self._connection(f'append to session "{session_id}"') as conn:
            try:
                committed = time.perf_counter_ns()  # autocommit: the server commits before it answers
                row = conn.execute(self._sql.append, params).fetchone()
                record_durable(committed)
            except psycopg.errors.DataCorrupted as error:  # the log lost rows: never write past the gap
                raise CorruptSessionError(error.diag.message_primary or str(error)) from None
            except psycopg.errors.UniqueViolation as error:
                raise ConflictError(
                    f'session "{session_id}": seq already taken ({error.diag.constraint_name})',
                    expected_seq=expected_seq,
                ) from None
        stored = None if row is None else row[0]
        if stored is None:
            raise SessionNotFound(f'session "{session_id}" not found')
        if stored != expected_seq:
            raise ConflictError(
                f'session "{session_id}" ends at seq {stored}, not {expected_seq}: another writer appended first',
                expected_seq=expected_seq,
                actual_seq=int(stored),
            )

    def _remove(self, session_id: str) -> None:
        with self._connection(f'delete session "{session_id}"') as conn:
            try:
                conn.execute(self._sql.remove, (session_id,))
            except psycopg.errors.ForeignKeyViolation:
                raise StoreError(
                    f'session "{session_id}" has forks that share its history (one was created meanwhile); '
                    "delete them first or pass detach_forks=True"
                ) from None

    def _ids(self) -> list[str]:
        return [str(row[0]) for row in self._rows("list sessions", self._sql.ids, ())]

    def _children(self, session_id: str) -> list[str]:
        return [str(row[0]) for row in self._rows("list forks", self._sql.children, (session_id,))]

    def _rebase(self, session_id: str, prefix: Sequence[SessionEvent]) -> None:
        with self._connection(f'detach fork "{session_id}"') as conn, conn.transaction():
            row = conn.execute(self._sql.locked_session, (session_id,)).fetchone()
            if row is None:
                raise SessionNotFound(f'session "{session_id}" not found')
            raw, created_at, cwd, parent, base_id, base_count, crc = row
            check_session_row(session_id, raw, created_at, cwd, parent, base_id, base_count, crc)  # sign no damage
            self._insert_events(conn, session_id, prefix)
            detached = session_row_crc(session_id, raw, created_at, cwd, parent, None, 0)
            conn.execute(self._sql.detach, (detached, session_id))

    def _turn_window(self, session_id: str, boundary: int) -> list[SessionEvent]:
        """Seek to the last turn boundary at or before ``boundary`` instead of reading the prefix."""
        start = self._last_turn_mark(session_id, boundary)
        window = list(itertools.takewhile(lambda e: e.seq <= boundary, self._read_chain(session_id, start)))
        if start > 0 and window and window[0].type not in _TURN_MARKS:  # the type column lied
            raise CorruptSessionError(f'session "{session_id}" row {start} does not hold its indexed event')
        return window

    def _last_turn_mark(self, session_id: str, at: int) -> int:
        rows = self._rows("find a turn boundary", self._sql.last_turn_mark, (session_id, at, _TURN_MARKS))
        if rows:
            return int(rows[0][0])
        base = self._base(session_id)
        if base is not None and base[1] > 0:
            return self._last_turn_mark(base[0], min(at, base[1] - 1))
        return 0

    # -- following ----------------------------------------------------------------------------

    def _follow(self, session_id: str, from_seq: int, poll_interval: float, stop: StopSignal) -> Iterator[SessionEvent]:
        """Woken by LISTEN/NOTIFY instead of polling.

        A dedicated connection LISTENs on this schema's channel; every committed
        append notifies it with the session id and new next seq. The follower still
        reads by seq: after a reconnect it re-reads from the next unseen seq, and it
        re-reads every :attr:`follow_resync_s` seconds anyway. ``poll_interval`` bounds
        how long a ``stop`` takes to be noticed.
        """
        return notify_follow(
            read=self.read,
            listen=lambda: connect(self._options.conninfo),
            channel=self.channel,
            session_id=session_id,
            from_seq=from_seq,
            poll_interval=poll_interval,
            resync_s=self.follow_resync_s,
            stop=stop,
        )

    # -- fast metadata ------------------------------------------------------------------------

    def _own_typed_events(
        self, session_id: str, types: tuple[str, ...], from_seq: int, until: int | None
    ) -> Iterator[SessionEvent]:
        """Filtered in SQL (see :meth:`BaseStore.read_types`), every row returned checked against its checksum.

        The type column is a copy of the checked body's type, for filtering. Rows whose
        column names no type this build knows are fetched as well (ignorable records of
        newer writers are rare): a column damaged into a misspelt type would otherwise hide
        its event from this read, and no two known types are one byte apart.
        """
        wanted = [column_text(kind) for kind in types]  # as the type column holds them
        self._length(session_id)  # rows lost from the end of the log are an error here too
        end = (1 << 63) - 1 if until is None else until
        chunk = 16  # small first: a caller after the first match pays for one short scan
        verified = event_verifier(session_id)
        while from_seq < end:
            rows = self._rows(
                "read events", self._sql.typed_events, (session_id, from_seq, end, wanted, _KNOWN_TYPES, chunk)
            )
            for seq, kind, body, crc in rows:
                event = verified(seq, body.encode(), crc, False)
                if column_text(event.type) != kind:
                    raise CorruptSessionError(f'session "{session_id}" row {seq} does not hold its indexed event')
                if event.type in types:
                    yield event
            if len(rows) < chunk:
                return
            from_seq = int(rows[-1][0]) + 1
            chunk = min(chunk * 8, _READ_CHUNK)

    def _infos(self, where: str, params: Sequence[Any]) -> list[SessionInfo]:
        return [self._info(row)[0] for row in self._rows("list sessions", self._sql.infos + where, params)]

    @staticmethod
    def _info(values: Sequence[Any], *, lenient: bool = False) -> tuple[SessionInfo, bool]:
        """A session's info from an ``infos`` row, and whether its rows are intact.

        A damaged session row is always an error. Rows lost from the end of its log are an
        error too, unless ``lenient`` (a listing with projections): then the flag is False
        and the info reports the larger of the two counts, so the caller reads the log
        (never an empty one), and that read names the damage for that session alone.
        """
        session_id, raw, created_at, cwd, parent, base_id, base_count, crc, recorded, last_seq, last_time, forks = (
            values
        )
        check_session_row(session_id, raw, created_at, cwd, parent, base_id, base_count, crc)
        header = parse_stored_header(session_id, raw)
        next_seq = int(base_count) if last_seq is None else int(last_seq) + 1
        intact = next_seq == recorded
        if not intact:
            if not lenient:
                raise CorruptSessionError(lost_rows(session_id, next_seq, recorded))
            next_seq = max(next_seq, int(recorded))
        updated_at = int(created_at) if last_time is None else max(int(created_at), int(last_time))
        return SessionInfo(session_id, header, next_seq, updated_at, tuple(sorted(forks or ()))), intact

    def _list_infos(self) -> list[SessionInfo]:
        return self._infos("", ())

    def _lengths(self) -> dict[str, int]:
        """The ``next_seq`` each append moves in its own transaction: one pass over the sessions table."""
        return dict(self._rows("list sessions", self._sql.lengths, ()))

    def _list_page(self, request: PageRequest) -> list[SessionInfo]:
        """The page's ids chosen over the sessions table's columns and their infos built, in one statement."""
        choose, params = page_ids_sql(request, POSTGRES, self._sql.sessions_table, self._sql.events_table)
        direction = "DESC" if request.descending else "ASC"
        statement = self._sql.page_infos.format(choose=choose, direction=direction)
        return [self._info(row)[0] for row in self._rows("list sessions", statement, params)]

    def _session_info(self, session_id: str) -> SessionInfo | None:
        found = self._infos(" WHERE t.id = %s", (session_id,))
        return found[0] if found else None

    # -- projection cache ---------------------------------------------------------------------

    def _load_projection_rows(self, session_id: str) -> builtins.list[ProjectionRow]:
        raw = self._rows("read the projection cache", self._sql.projection_rows, (session_id,))
        return list(verified_cache_rows(raw).get(session_id, {}).values())

    def _save_projection_rows(self, session_id: str, rows: Sequence[ProjectionRow]) -> None:
        if not rows:
            return
        states = [dumps(row.state) for row in rows]
        sid = session_id.encode()
        params = (
            session_id,
            [row.key for row in rows],
            [row.state_version for row in rows],
            [row.seq for row in rows],
            [state.decode() for state in states],
            [row.identity for row in rows],
            [
                cache_row_crc(sid, row.key.encode(), row.state_version, row.seq, state, row.identity.encode())
                for row, state in zip(rows, states, strict=True)
            ],
        )
        with self._connection(f'write the projection cache of "{session_id}"') as conn:
            try:
                conn.execute(self._sql.save_projection_rows, params)
            except psycopg.errors.ForeignKeyViolation:
                return  # the session was deleted meanwhile

    def _list_projection_rows(self, keys: Sequence[str]) -> dict[str, dict[str, ProjectionRow]]:
        raw = self._rows("read the projection cache", self._sql.list_projection_rows, (list(dict.fromkeys(keys)),))
        return verified_cache_rows(raw)

    def _infos_and_projection_rows(
        self, keys: Sequence[str]
    ) -> tuple[builtins.list[SessionInfo], dict[str, dict[str, ProjectionRow]]]:
        """Sessions and their cache rows from one REPEATABLE READ snapshot (two statements, one transaction).

        A session whose log lost rows is listed without cache rows, so the caller folds its
        log, and that read reports the damage for that session alone.
        """
        with self._connection("list sessions") as conn, conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            info_rows = conn.execute(self._sql.infos, ()).fetchall()
            cache_rows = conn.execute(self._sql.list_projection_rows, (list(dict.fromkeys(keys)),)).fetchall()
        found = verified_cache_rows(cache_rows)
        infos = []
        for values in info_rows:
            info, intact = self._info(values, lenient=True)
            infos.append(info)
            if not intact:
                found.pop(info.id, None)
        infos.sort(key=lambda info: (info.updated_at, info.id), reverse=True)
        return infos, found

    # -- full-text search -----------------------------------------------------------------------

    def _search_text(self, query: TextQuery) -> TextHits:
        """One REPEATABLE READ snapshot: whether forks exist, the page of hits, and the generation."""
        with self._connection("search") as conn, conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            forks = conn.execute(self._sql.forks_exist).fetchone()
            sql, params = search_statement(self._dialect, query, forks=bool(forks and forks[0]))
            rows = conn.execute(sql, params).fetchall() if query.expr.groups else []
            return TextHits(hits_of(rows), self._generation(conn))

    def _generation(self, conn: psycopg.Connection[Any]) -> int:
        row = conn.execute(self._sql.search_generation).fetchone()
        return int(row[0]) if row else 0

    def _rebuild_search_index(self) -> SearchIndexStatus:
        with self._connection("rebuild the search index") as conn, conn.transaction():
            conn.execute(self._sql.drop_docs)
            conn.execute(self._sql.next_generation)
            fill_search_docs(conn, quote_identifier(self.schema))
        return self._search_index_status()

    def _search_index_status(self) -> SearchIndexStatus:
        with self._connection("read the search index") as conn, conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            row = conn.execute(self._sql.document_count).fetchone()
            return SearchIndexStatus("postgres-tsvector", int(row[0]) if row else 0, self._generation(conn))
