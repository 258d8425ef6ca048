"""The FTS5 index both SQLite-backed indexes share: the session database's own, and the JSONL sidecar.

Three tables, created by :data:`SEARCH_SCHEMA`:

* ``search_docs`` — one row per event that holds text (most events hold none:
  boundaries, headers, attempts), keyed by ``(session_id, seq)`` and owned by the
  session that stores the event, with its type, time and the text as
  :func:`~dshpy.log.event_text.indexable_text` cut it;
* ``search_text`` — an *external-content* FTS5 table over ``search_docs.text``
  (``unicode61``, ``remove_diacritics 2``: the tokenizer
  :mod:`dshpy.log.search_text` mirrors), so the text is stored once and the index
  holds only the inverted lists;
* ``search_state`` — one row: the ``generation``, moved on whenever rows are taken
  away (a session deleted, the index rebuilt), which stales search cursors.

The FTS rows are written here, explicitly, beside the docs rows they index (never by
triggers): added for exactly the docs just inserted, and removed with the docs'
stored text before a session's rows go, which is what an external-content table
needs to stay consistent. A zero-copy fork owns no rows for its inherited prefix:
:func:`search` reads them through the parent's rows, following the chain of bases.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

import orjson

from dshpy.core.events import SessionEvent
from dshpy.core.json import loads
from dshpy.log.event_text import event_text, indexable_text, text_of
from dshpy.log.search_text import MatchExpr, Term
from dshpy.storage.base import column_text
from dshpy.storage.search_records import MAX_SEQ, TextHit, TextQuery

__all__ = [
    "FILL_FROM_EVENTS",
    "SEARCH_SCHEMA",
    "DocRow",
    "add_docs",
    "compile_fts5",
    "doc_rows",
    "document_count",
    "drop_all_docs",
    "drop_session_docs",
    "event_text_sql",
    "generation",
    "search",
]

SEARCH_SCHEMA: tuple[str, ...] = (
    """CREATE TABLE search_docs (
        doc INTEGER PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        type TEXT NOT NULL,
        time INTEGER NOT NULL,
        text TEXT NOT NULL,
        UNIQUE (session_id, seq)
    ) STRICT""",
    "CREATE VIRTUAL TABLE search_text USING fts5(text, content = 'search_docs', content_rowid = 'doc', "
    "tokenize = 'unicode61 remove_diacritics 2')",
    "CREATE TABLE search_state (id INTEGER PRIMARY KEY CHECK (id = 1), generation INTEGER NOT NULL) STRICT",
    "INSERT INTO search_state (id, generation) VALUES (1, 0)",
)
"""The index's tables; they need a ``sessions`` table with ``id``, ``base_id`` and ``base_count``."""

FILL_FROM_EVENTS: tuple[str, ...] = (
    "INSERT INTO search_docs (session_id, seq, type, time, text) "
    "SELECT session_id, seq, type, time, text FROM "
    "(SELECT session_id, seq, type, time, dshpy_event_text(body) AS text FROM events) WHERE text IS NOT NULL",
    "INSERT INTO search_text (search_text) VALUES ('rebuild')",
)
"""Index every stored event of the session database (``dshpy_event_text`` is :func:`event_text_sql`)."""

DocRow = tuple[str, int, str, int, str]
"""``(session_id, seq, type column, time, text)``: one ``search_docs`` row to insert."""

_INSERT_DOCS = "INSERT INTO search_docs (session_id, seq, type, time, text) VALUES (?, ?, ?, ?, ?)"
_INDEX_DOCS = (
    "INSERT INTO search_text (rowid, text) SELECT doc, text FROM search_docs "
    "WHERE session_id = ? AND seq >= ? AND seq <= ?"
)
_UNINDEX_DOCS = (
    "INSERT INTO search_text (search_text, rowid, text) SELECT 'delete', doc, text FROM search_docs "
    "WHERE session_id = ?"
)
_NEXT_GENERATION = "UPDATE search_state SET generation = generation + 1 WHERE id = 1"


def event_text_sql(body: bytes | str) -> str | None:
    """The indexable text of a stored event's JSON, or NULL: the SQL function that fills the index in bulk.

    A row that does not parse holds no text here; reading it reports the damage.
    """
    try:
        record = loads(body)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(record, dict) or not isinstance(record.get("type"), str):
        return None
    text = text_of(record["type"], record.get("data"))
    return indexable_text(text) if text else None


def doc_rows(session_id: str, events: Sequence[SessionEvent]) -> list[DocRow]:
    """The ``search_docs`` rows of ``events`` (those that hold text), built before any lock is taken."""
    rows: list[DocRow] = []
    for event in events:
        text = event_text(event)
        if text:
            rows.append((session_id, event.seq, column_text(event.type), event.time, indexable_text(text)))
    return rows


def add_docs(cursor: sqlite3.Cursor | sqlite3.Connection, session_id: str, rows: Sequence[DocRow]) -> None:
    """Insert one session's docs rows and index them, inside the caller's write transaction.

    The rows' seqs must be a range the session holds no docs in yet (a new batch, a new
    session, a detached fork's prefix): exactly that range is added to the FTS index.
    """
    if not rows:
        return
    cursor.executemany(_INSERT_DOCS, rows)
    cursor.execute(_INDEX_DOCS, (session_id, rows[0][1], rows[-1][1]))


def drop_session_docs(cursor: sqlite3.Cursor | sqlite3.Connection, session_id: str) -> None:
    """Take a session's docs out of the FTS index (before its rows are deleted) and move the generation on."""
    cursor.execute(_UNINDEX_DOCS, (session_id,))
    cursor.execute("DELETE FROM search_docs WHERE session_id = ?", (session_id,))
    cursor.execute(_NEXT_GENERATION)


def drop_all_docs(cursor: sqlite3.Cursor | sqlite3.Connection) -> None:
    """Empty the index (a rebuild starts here) and move the generation on."""
    cursor.execute("DELETE FROM search_docs")
    cursor.execute("INSERT INTO search_text (search_text) VALUES ('delete-all')")
    cursor.execute(_NEXT_GENERATION)


def generation(db: sqlite3.Connection) -> int:
    row = db.execute("SELECT generation FROM search_state WHERE id = 1").fetchone()
    return int(row[0]) if row else 0


def document_count(db: sqlite3.Connection) -> int:
    return int(db.execute("SELECT count(*) FROM search_docs").fetchone()[0])


def _phrase(term: Term) -> str:
    quoted = '"' + " ".join(word.replace('"', '""') for word in term.words) + '"'
    return quoted + " *" if term.prefix else quoted


def compile_fts5(expr: MatchExpr) -> str:
    """``expr`` in FTS5 query syntax: every word quoted, so nothing a user typed is read as an operator."""
    groups = []
    for group in expr.groups:
        positive = " AND ".join(_phrase(term) for term in group if not term.negated)
        clause = f"({positive})"
        for term in group:
            if term.negated:
                clause = f"({clause} NOT {_phrase(term)})"
        groups.append(clause)
    return " OR ".join(groups)


_SEGMENTS = """WITH RECURSIVE seg(logical, owner, lo, hi) AS (
    SELECT s.id, s.id, s.base_count, {top} FROM sessions s{scope}
    UNION ALL
    SELECT seg.logical, o.base_id, p.base_count, min(seg.hi, o.base_count)
    FROM seg JOIN sessions o ON o.id = seg.owner JOIN sessions p ON p.id = o.base_id
)
"""
"""Which stored rows make up each logical session: its own from its base count on, then each ancestor's
own rows below the count the next one down inherits (``lo <= seq < hi``)."""


def _has_forks(db: sqlite3.Connection) -> bool:
    return bool(db.execute("SELECT EXISTS (SELECT 1 FROM sessions WHERE base_id IS NOT NULL)").fetchone()[0])


def _either(column: str, values: tuple[str | None, ...]) -> tuple[str, list[Any]]:
    """``column`` equal to one of ``values`` (``None`` among them: or NULL); nothing matches an empty tuple."""
    given = [column_text(value) for value in values if value is not None]
    tests = [f"{column} IN ({', '.join('?' * len(given))})"] if given else []
    if None in values:
        tests.append(f"{column} IS NULL")
    return (f" AND ({' OR '.join(tests)})" if tests else " AND 0"), given


def _session_clauses(query: TextQuery, owner: str) -> tuple[str, list[Any]]:
    """The conditions on the hit's (logical) session: exclusions and its header's cwd, parent, creation time."""
    where = ""
    params: list[Any] = []
    if query.exclude_sessions:
        where += f" AND {owner} NOT IN (SELECT value FROM json_each(?))"
        params.append(orjson.dumps(list(query.exclude_sessions)).decode())
    for column, values in (("ls.cwd", query.cwd), ("ls.parent_session", query.parents)):
        if values is not None:
            clause, given = _either(column, values)
            where += clause
            params += given
    if query.created_from is not None:
        where += " AND ls.created_at >= ?"
        params.append(query.created_from)
    if query.created_to is not None:
        where += " AND ls.created_at <= ?"
        params.append(query.created_to)
    return where, params


def search(db: sqlite3.Connection, query: TextQuery) -> list[TextHit]:
    """One page of ``query``'s hits from the FTS index, ranked by BM25 (best first), ties by time, id, seq.

    Without zero-copy forks in the database each row belongs to one session and the
    query is a plain join; with them, a segment table maps each stored row to every
    session whose log holds it, so a fork finds its inherited prefix in its parent's rows.
    Session headers (cwd, parent, creation time) are filtered here, in the same statement.
    """
    if not query.expr.groups:
        return []
    prefix_params: list[Any] = []
    scope = None if query.sessions is None else orjson.dumps(list(query.sessions)).decode()
    where = ""
    params: list[Any] = [compile_fts5(query.expr)]
    if _has_forks(db):
        seed_scope = "" if scope is None else " JOIN json_each(?) j ON j.value = s.id"
        prefix = _SEGMENTS.format(top=MAX_SEQ, scope=seed_scope)
        if scope is not None:
            prefix_params.append(scope)
        owner = "seg.logical"
        joins = " JOIN seg ON seg.owner = d.session_id AND d.seq >= seg.lo AND d.seq < seg.hi"
    else:
        prefix, owner, joins = "", "d.session_id", ""
        if scope is not None:
            where += " AND d.session_id IN (SELECT value FROM json_each(?))"
            params.append(scope)
    if query.filters_headers:
        joins += f" JOIN sessions ls ON ls.id = {owner}"
    clauses, values = _session_clauses(query, owner)
    where += clauses
    params += values
    if query.types is not None:
        where += f" AND d.type IN ({', '.join('?' * len(query.types))})"
        params.extend(column_text(kind) for kind in query.types)
    if query.time_from is not None:
        where += " AND d.time >= ?"
        params.append(query.time_from)
    if query.time_to is not None:
        where += " AND d.time <= ?"
        params.append(query.time_to)
    params += [query.limit, query.offset]
    sql = (
        f"{prefix}SELECT {owner}, d.seq, d.type, d.time, -bm25(search_text) AS score, d.text "
        f"FROM search_text JOIN search_docs d ON d.doc = search_text.rowid{joins} "
        f"WHERE search_text MATCH ?{where} ORDER BY score DESC, d.time DESC, {owner}, d.seq LIMIT ? OFFSET ?"
    )
    return [TextHit(*row) for row in db.execute(sql, [*prefix_params, *params])]
