"""The PostgreSQL schema dshpy keeps its sessions in, and its migrations.

Every table lives in one PostgreSQL schema (``dshpy`` unless the URL says
``?schema=NAME``), so one database can hold several independent stores and tests can
use a throwaway schema each. ``schema_version`` records each migration applied, one
row per version (1, 2, …); the latest version is ``len(MIGRATIONS)``.

Preparing a schema runs in one transaction under a transaction-level advisory lock
keyed by the schema name, so processes on many hosts opening a new store at the same
moment apply each migration exactly once, and a failure leaves nothing behind. The
existing structure is compared with a reference built from the same migration list
(in ``pg_temp``, rolled back), so a schema that was altered by hand, or that belongs to
something else, is refused instead of written to; a schema newer than this build is
refused with advice to upgrade.
"""

from __future__ import annotations

import threading
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psycopg

from dshpy.errors import CorruptSessionError, FormatVersionError, StoreError
from dshpy.storage.postgres_checksums import backfill_checksums
from dshpy.storage.postgres_connect import quote_identifier
from dshpy.storage.postgres_search import SEARCH_STATEMENTS, fill_search_docs

__all__ = ["ADVISORY_LOCK_CLASS", "MIGRATIONS", "SchemaMigration", "describe_schema", "prepare_schema"]

ADVISORY_LOCK_CLASS = 0x44534850
"""First key of the advisory lock taken while preparing a schema: ASCII "DSHP"."""


@dataclass(frozen=True, slots=True)
class SchemaMigration:
    """One step n-1 → n: statements with ``{schema}`` standing for the quoted schema name.

    A step that must compute values for rows already stored (what SQL cannot, such as
    checksums defined in Python) names a ``backfill``, run after ``statements`` and
    before ``finish`` in the same transaction, with the connection and the quoted schema.
    """

    version: int
    description: str
    statements: tuple[str, ...]
    backfill: Callable[[psycopg.Connection[Any], str], None] | None = None
    finish: tuple[str, ...] = ()


BOOTSTRAP = """CREATE TABLE {schema}.schema_version (
    version integer PRIMARY KEY CHECK (version > 0),
    description text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)"""
"""The version table itself exists before any migration (version 0 = no rows)."""

APPEND_FUNCTION = """CREATE FUNCTION {schema}.append_events(
    p_session text, p_expected bigint, p_seqs bigint[], p_types text[], p_times bigint[], p_bodies text[],
    p_channel text
) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    stored bigint;
BEGIN
    PERFORM 1 FROM {schema}.sessions WHERE id = p_session FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    SELECT COALESCE((SELECT max(seq) + 1 FROM {schema}.events WHERE session_id = p_session), base_count)
      INTO stored FROM {schema}.sessions WHERE id = p_session;
    IF stored <> p_expected THEN
        RETURN stored;
    END IF;
    INSERT INTO {schema}.events (session_id, seq, type, time, body)
    SELECT p_session, r.seq, r.type, r.time, r.body
      FROM unnest(p_seqs, p_types, p_times, p_bodies) AS r(seq, type, time, body);
    PERFORM pg_notify(p_channel, p_session || ' ' || (p_expected + cardinality(p_seqs)));
    RETURN stored;
END
$$"""
"""The conditional append, as one statement (one round trip, one implicit transaction per batch).

It locks the session row (``FOR NO KEY UPDATE``: appenders of one session queue up,
foreign-key checks of forks and inserts do not), then computes the stored next seq
in a *new* statement, whose snapshot sees every batch committed while it waited, and
inserts the batch and notifies followers only if that equals ``p_expected``. It
returns the stored next seq (``p_expected`` on success), or NULL for an unknown
session. The primary key on (session_id, seq) refuses an interleaved seq even if the
lock were bypassed. Running it server-side saves the four round trips (BEGIN, lock,
insert, COMMIT) a client-driven transaction costs on every flush."""

APPEND_FUNCTION_V3 = """CREATE FUNCTION {schema}.append_events(
    p_session text, p_expected bigint, p_seqs bigint[], p_types text[], p_times bigint[], p_bodies text[],
    p_crcs bigint[], p_channel text
) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    inherited bigint;
    recorded bigint;
    stored bigint;
BEGIN
    UPDATE {schema}.sessions SET next_seq = p_expected + cardinality(p_seqs)
     WHERE id = p_session AND next_seq = p_expected
    RETURNING base_count INTO inherited;
    IF NOT FOUND THEN
        SELECT t.next_seq, COALESCE((SELECT max(seq) + 1 FROM {schema}.events WHERE session_id = t.id), t.base_count)
          INTO recorded, stored FROM {schema}.sessions t WHERE t.id = p_session;
        IF NOT FOUND THEN
            RETURN NULL;
        END IF;
    ELSE
        recorded := p_expected;
        stored := COALESCE((SELECT max(seq) + 1 FROM {schema}.events WHERE session_id = p_session), inherited);
    END IF;
    IF stored <> recorded THEN
        RAISE EXCEPTION USING ERRCODE = 'data_corrupted', MESSAGE = format(
            'session "%s" is damaged: its log holds events up to seq %s but recorded %s events '
            '(rows were lost, or the session row is damaged)', p_session, stored - 1, recorded);
    END IF;
    IF stored <> p_expected THEN
        RETURN stored;
    END IF;
    INSERT INTO {schema}.events (session_id, seq, type, time, body, crc)
    SELECT p_session, r.seq, r.type, r.time, r.body, r.crc
      FROM unnest(p_seqs, p_types, p_times, p_bodies, p_crcs) AS r(seq, type, time, body, crc);
    PERFORM pg_notify(p_channel, p_session || ' ' || (p_expected + cardinality(p_seqs)));
    RETURN stored;
END
$$"""
"""The conditional append since schema v3: as :data:`APPEND_FUNCTION`, with each row's checksum, and
the session row's ``next_seq`` as the condition.

One ``UPDATE`` both takes the session row's lock (``FOR NO KEY UPDATE``, as before) and
moves ``next_seq`` on, if it still equals ``p_expected``: a writer that waited for
another re-checks the newest committed row (READ COMMITTED), finds it moved, updates
nothing and gets the stored next seq back (a conflict). The log itself must end where
``next_seq`` says, read in one snapshot: otherwise rows were lost (or the session row is
damaged) and the append is refused with ``data_corrupted`` rather than writing past a
gap. On success the session row is written once, as the lock alone wrote it before."""


def _replaced_once(text: str, old: str, new: str) -> str:
    if text.count(old) != 1:
        raise AssertionError(f"expected exactly one {old!r} in the function text")
    return text.replace(old, new)


APPEND_FUNCTION_V4 = _replaced_once(
    _replaced_once(
        APPEND_FUNCTION_V3,
        "p_crcs bigint[], p_channel text\n)",
        "p_crcs bigint[], p_channel text, p_doc_seqs bigint[], p_doc_types text[], p_doc_times bigint[],\n"
        "    p_doc_texts text[], p_doc_words text[]\n)",
    ),
    "    PERFORM pg_notify",
    """    INSERT INTO {schema}.search_docs (session_id, seq, type, time, text, tsv)
    SELECT p_session, d.seq, d.type, d.time, d.text, to_tsvector('simple', d.words)
      FROM unnest(p_doc_seqs, p_doc_types, p_doc_times, p_doc_texts, p_doc_words) AS d(seq, type, time, text, words);
    PERFORM pg_notify""",
)
"""The conditional append since schema v4: :data:`APPEND_FUNCTION_V3` with five more arrays, the batch's
full-text rows (:mod:`~dshpy.storage.postgres_search`), inserted by the same statement before followers are
notified, so search is never behind or ahead of the log. Derived from v3's text, which never changes."""


MIGRATIONS: tuple[SchemaMigration, ...] = (
    SchemaMigration(
        1,
        "sessions and events",
        (
            """CREATE TABLE {schema}.sessions (
                id text PRIMARY KEY,
                header text NOT NULL,
                created_at bigint NOT NULL,
                cwd text,
                parent_session text,
                base_id text REFERENCES {schema}.sessions (id),
                base_count bigint NOT NULL DEFAULT 0 CHECK (base_count >= 0)
            )""",
            """CREATE TABLE {schema}.events (
                session_id text NOT NULL REFERENCES {schema}.sessions (id) ON DELETE CASCADE,
                seq bigint NOT NULL CHECK (seq >= 0),
                type text NOT NULL,
                time bigint NOT NULL,
                body text NOT NULL,
                PRIMARY KEY (session_id, seq)
            )""",
            "CREATE INDEX sessions_by_base ON {schema}.sessions (base_id) WHERE base_id IS NOT NULL",
            "CREATE INDEX sessions_by_parent ON {schema}.sessions (parent_session) WHERE parent_session IS NOT NULL",
            APPEND_FUNCTION,
        ),
    ),
    SchemaMigration(
        2,
        "projection cache",
        (
            """CREATE TABLE {schema}.projection_cache (
                session_id text NOT NULL REFERENCES {schema}.sessions (id) ON DELETE CASCADE,
                key text NOT NULL,
                state_version integer NOT NULL CHECK (state_version >= 0),
                seq bigint NOT NULL CHECK (seq >= -1),
                state text NOT NULL,
                identity text NOT NULL,
                PRIMARY KEY (session_id, key)
            )""",
        ),
    ),
    SchemaMigration(
        3,
        "row checksums and each session's next seq",
        (
            "ALTER TABLE {schema}.sessions ADD COLUMN next_seq bigint NOT NULL DEFAULT 0 CHECK (next_seq >= 0), "
            "ADD COLUMN crc bigint NOT NULL DEFAULT 0",
            "ALTER TABLE {schema}.events ADD COLUMN crc bigint NOT NULL DEFAULT 0",
            "ALTER TABLE {schema}.projection_cache ADD COLUMN crc bigint NOT NULL DEFAULT 0",
            "DROP FUNCTION {schema}.append_events(text, bigint, bigint[], text[], bigint[], text[], text)",
            APPEND_FUNCTION_V3,
        ),
        backfill=backfill_checksums,
        finish=(  # from now on a row written without its checksum (an older dshpy still running) is refused
            "ALTER TABLE {schema}.sessions ALTER COLUMN next_seq DROP DEFAULT, ALTER COLUMN crc DROP DEFAULT",
            "ALTER TABLE {schema}.events ALTER COLUMN crc DROP DEFAULT",
            "ALTER TABLE {schema}.projection_cache ALTER COLUMN crc DROP DEFAULT",
        ),
    ),
    SchemaMigration(
        4,
        "full-text search index",
        (
            *SEARCH_STATEMENTS,
            "DROP FUNCTION {schema}.append_events(text, bigint, bigint[], text[], bigint[], text[], bigint[], text)",
            APPEND_FUNCTION_V4,
        ),
        backfill=fill_search_docs,
    ),
)
"""Position + 1 is the version a schema has after applying the step; never edit a released step."""

_DESCRIBE = """
SELECT 'relation', c.relname, c.relkind::text
  FROM pg_class c WHERE c.relnamespace = %(ns)s
UNION ALL
SELECT 'column', c.relname || '.' || a.attname,
       format_type(a.atttypid, a.atttypmod) || CASE WHEN a.attnotnull THEN ' NOT NULL' ELSE '' END
       || COALESCE(' DEFAULT ' || pg_get_expr(d.adbin, d.adrelid), '')
  FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
  LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
 WHERE c.relnamespace = %(ns)s AND a.attnum > 0 AND NOT a.attisdropped AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
UNION ALL
SELECT 'constraint', c.relname || '.' || k.conname, pg_get_constraintdef(k.oid)
  FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid WHERE c.relnamespace = %(ns)s
UNION ALL
SELECT 'function', p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ')',
       pg_get_function_result(p.oid) || ' ' || l.lanname || ' ' || p.prosrc
  FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang WHERE p.pronamespace = %(ns)s
UNION ALL
SELECT 'index', c.relname, t.relname || ': ' || regexp_replace(pg_get_indexdef(c.oid), ' ON [^ ]+ USING ', ' USING ')
  FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid JOIN pg_class t ON t.oid = i.indrelid
 WHERE c.relnamespace = %(ns)s
ORDER BY 1, 2, 3
"""
"""Tables, columns, constraints and indexes of one namespace. Run with ``search_path`` set to that
namespace, so constraint definitions print unqualified names (index definitions always qualify the
table, so that part is cut out) and two schemas with the same structure compare equal."""

_reference_cache: dict[int, list[tuple[str, str, str]]] = {}
_reference_lock = threading.Lock()


def _statements(version: int, schema: str) -> list[str]:
    quoted = quote_identifier(schema) if schema != "pg_temp" else "pg_temp"
    steps = [BOOTSTRAP, *(s for m in MIGRATIONS[:version] for s in (*m.statements, *m.finish))]
    return [statement.format(schema=quoted) for statement in steps]


def describe_schema(conn: psycopg.Connection[Any], namespace_oid: int, quoted: str) -> list[tuple[str, str, str]]:
    """The normalized structure of one namespace, ``quoted`` being how the migrations named it.

    Call inside a transaction: it sets ``search_path`` locally. Function bodies name
    their schema, so that name is replaced by ``{schema}`` before comparing.
    """
    conn.execute(f"SET LOCAL search_path TO {quoted}")
    rows = conn.execute(_DESCRIBE, {"ns": namespace_oid}).fetchall()
    return [
        (str(kind), str(name), " ".join(str(definition).replace(f"{quoted}.", "{schema}.").split()))
        for kind, name, definition in rows
    ]


def _reference(conn: psycopg.Connection[Any], version: int) -> list[tuple[str, str, str]]:
    """What a schema at ``version`` looks like: built as temporary tables in a rolled-back savepoint."""
    with _reference_lock:
        cached = _reference_cache.get(version)
    if cached is not None:
        return cached
    with conn.transaction(force_rollback=True):
        for statement in _statements(version, "pg_temp"):
            conn.execute(statement)
        row = conn.execute("SELECT pg_my_temp_schema()::oid").fetchone()
        assert row is not None
        described = describe_schema(conn, int(row[0]), "pg_temp")
    with _reference_lock:
        _reference_cache[version] = described
    return described


def _lock_key(schema: str) -> int:
    """The advisory lock's second key: a stable signed 32-bit hash of the schema name."""
    value = zlib.crc32(schema.encode())
    return value - (1 << 32) if value >= 1 << 31 else value


def _stored_version(conn: psycopg.Connection[Any], schema: str) -> int:
    quoted = quote_identifier(schema)
    versions = [int(row[0]) for row in conn.execute(f"SELECT version FROM {quoted}.schema_version ORDER BY version")]
    if versions != list(range(1, len(versions) + 1)):
        raise CorruptSessionError(f'schema "{schema}" records migrations {versions}, not 1..n; refusing to use it')
    return len(versions)


def prepare_schema(conn: psycopg.Connection[Any], schema: str) -> tuple[int, ...]:
    """Create or upgrade ``schema`` to the latest version; return the versions applied now.

    Raises :class:`FormatVersionError` for a newer schema and :class:`CorruptSessionError`
    for one whose structure is not what its recorded version says (or holds tables that
    are not dshpy's). Nothing is changed in either case.
    """
    latest = len(MIGRATIONS)
    quoted = quote_identifier(schema)
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (ADVISORY_LOCK_CLASS, _lock_key(schema)))
        row = conn.execute("SELECT oid FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone()
        if row is None:
            try:
                conn.execute(f"CREATE SCHEMA {quoted}")
            except psycopg.errors.InsufficientPrivilege:
                raise StoreError(
                    f'schema "{schema}" does not exist and this role may not create it: '
                    f"ask an administrator to run CREATE SCHEMA {quoted} and grant it to this role"
                ) from None
            row = conn.execute("SELECT oid FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone()
            assert row is not None
        namespace = int(row[0])
        tables = {
            str(name)
            for (name,) in conn.execute(
                "SELECT relname FROM pg_class WHERE relnamespace = %s AND relkind IN ('r', 'p', 'v', 'm', 'f')",
                (namespace,),
            )
        }
        if not tables:
            conn.execute(BOOTSTRAP.format(schema=quoted))
            version = 0
        elif "schema_version" not in tables:
            raise CorruptSessionError(
                f'schema "{schema}" holds tables that are not a dshpy store ({", ".join(sorted(tables))}); '
                "refusing to use it — pick another ?schema="
            )
        else:
            version = _stored_version(conn, schema)
        if version > latest:
            raise FormatVersionError(
                f'PostgreSQL schema "{schema}" is at dshpy schema v{version}, newer than this build\'s v{latest}: '
                "it was written by a newer dshpy — upgrade dshpy to use it"
            )
        expected = _reference(conn, version)
        if describe_schema(conn, namespace, quoted) != expected:
            raise CorruptSessionError(
                f'PostgreSQL schema "{schema}" does not contain the expected dshpy schema v{version} '
                "(tables or columns were changed); refusing to use it"
            )
        applied: list[int] = []
        for migration in MIGRATIONS[version:]:
            for statement in migration.statements:
                conn.execute(statement.format(schema=quoted))
            if migration.backfill is not None:
                migration.backfill(conn, quoted)
            for statement in migration.finish:
                conn.execute(statement.format(schema=quoted))
            conn.execute(
                f"INSERT INTO {quoted}.schema_version (version, description) VALUES (%s, %s)",
                (migration.version, migration.description),
            )
            applied.append(migration.version)
    return tuple(applied)
