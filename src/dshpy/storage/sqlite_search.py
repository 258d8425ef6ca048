"""The JSONL sidecar's FTS5 index (the session database's up to schema v4), and the plans both SQLite indexes share.

The session database indexes without ``search_docs`` since schema v5
(:mod:`dshpy.storage.sqlite_fts`); it runs its searches through :func:`search_with`'s
plans with its own layout. This layout, kept by the sidecar, has three tables, created by :data:`SEARCH_SCHEMA`:

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
:func:`search` reads them through the parent's rows, following the chain of bases (the
statement is :mod:`dshpy.storage.search_statement`'s, shared with PostgreSQL).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

import orjson

from dshpy.core.events import SessionEvent
from dshpy.core.json import loads
from dshpy.log.event_text import event_text, indexable_text, text_of
from dshpy.log.search_text import MatchExpr, Term
from dshpy.storage.base import column_text
from dshpy.storage.search_records import MAX_SEQ, TextHit, TextQuery
from dshpy.storage.search_statement import Dialect, key_range_statement, search_statement

__all__ = [
    "FEW_SESSIONS",
    "FILL_FROM_EVENTS",
    "RANK_WINDOW",
    "SEARCH_SCHEMA",
    "SQLITE",
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
    "search_with",
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
    "(SELECT session_id, seq, type, time, dshpy_event_text(body) AS text FROM events) WHERE text IS NOT NULL "
    "ORDER BY time, session_id, seq",
    "INSERT INTO search_text (search_text) VALUES ('rebuild')",
)
"""Index every stored event of the session database (``dshpy_event_text`` is :func:`event_text_sql`), in time
order, so the docs' keys follow time as the appends' do."""

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


def _has_forks(db: sqlite3.Connection) -> bool:
    return bool(db.execute("SELECT EXISTS (SELECT 1 FROM sessions WHERE base_id IS NOT NULL)").fetchone()[0])


def _json_array(values: Sequence[Any]) -> str:
    return orjson.dumps(list(values)).decode()


SQLITE = Dialect(
    param="?",
    table=lambda name: name,
    compile=compile_fts5,
    member=lambda expr: f"{expr} IN (SELECT value FROM json_each(?))",
    values=_json_array,
    source="search_text JOIN search_docs d ON d.doc = search_text.rowid",
    match="search_text MATCH ?",
    score="-bm25(search_text)",
    least="min",
    top=str(MAX_SEQ),
    doc_key="search_text.rowid",
)
"""FTS5: matched with ``MATCH``, ranked by ``bm25`` (negated: FTS5 ranks lower as better)."""

RANK_WINDOW = 10_000
"""A search of the whole store that matches more events than this ranks only the most recently indexed of them."""
FEW_SESSIONS = 64
"""A search of at most this many sessions walks only the stretch of the index their rows lie in."""


def _unfiltered(query: TextQuery) -> bool:
    return (
        query.sessions is None
        and not query.exclude_sessions
        and not query.filters_headers
        and query.types is None
        and query.time_from is None
        and query.time_to is None
    )


def search_with(
    db: sqlite3.Connection,
    query: TextQuery,
    dialect: Dialect,
    key_range: Callable[..., tuple[str, list[Any]]],
    *,
    statement: Callable[..., tuple[str, list[Any]]] = search_statement,
) -> list[tuple[Any, ...]]:
    """The rows of one page of ``query``'s hits from an FTS5 index laid out as ``dialect`` says
    (:func:`~dshpy.storage.search_statement.search_statement`); ``key_range(dialect, query, forks=…)`` is the
    statement of the stretch of keys a few sessions' rows span, and ``statement(dialect, query, forks=…, keys=…)``
    the page's (by default :func:`~dshpy.storage.search_statement.search_statement`).

    Two plans keep it fast whatever a word's frequency. A search of a few sessions
    first finds the keys their rows span, and FTS5 walks only that stretch of each
    word's postings (a per-session search does not depend on how often the word
    occurs elsewhere). A search of the whole store with more than
    :data:`RANK_WINDOW` matches ranks those with the highest keys: bm25 costs
    about a microsecond per match, and a word that common ranks by recency in
    practice. Keys grow with time (here: in commit order, a migration or rebuild in
    time order; the session database: in the order sessions were created).
    """
    if not query.expr.groups:
        return []
    forks = _has_forks(db)
    keys: tuple[int, int] | None = None
    if query.sessions is not None and len(query.sessions) <= FEW_SESSIONS:
        sql, params = key_range(dialect, query, forks=forks)
        low, high = db.execute(sql, params).fetchone()
        if low is None:
            return []
        keys = (int(low), int(high))
    elif _unfiltered(query):
        window = max(RANK_WINDOW, query.offset + query.limit)
        row = db.execute(
            "SELECT rowid FROM search_text WHERE search_text MATCH ? ORDER BY rowid DESC LIMIT 1 OFFSET ?",
            (compile_fts5(query.expr), window),
        ).fetchone()
        keys = None if row is None else (int(row[0]) + 1, MAX_SEQ)
    sql, params = statement(dialect, query, forks=forks, keys=keys)
    return list(db.execute(sql, params))


def search(db: sqlite3.Connection, query: TextQuery) -> list[TextHit]:
    """One page of ``query``'s hits from a ``search_docs`` index (:func:`search_with`)."""
    return [TextHit(*row) for row in search_with(db, query, SQLITE, key_range_statement)]
