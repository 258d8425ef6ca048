"""The session database's full-text index: a contentless FTS5 table keyed by (session, seq), nothing else per event.

A durable append pays for every page its transaction writes. Schema v4 indexed an
event with three writes (a ``search_docs`` row holding the text again, that row's
``(session_id, seq)`` unique index, and the FTS5 postings); v5 keeps only the
postings. The index's row key *is* the event's address:

* ``search_keys`` gives each session a number once, when it is created
  (``AUTOINCREMENT``: a number is never given again, even after its session is
  deleted), so an append writes nothing there;
* ``search_text`` is a *contentless* FTS5 table (``content=''``: the log already holds
  the text, the index holds only the inverted lists and each row's length, which bm25
  needs) whose rowid is ``key << 32 | seq``;
* the event's type and time come from the ``events`` row that key names (its primary
  key), and the snippet's text is extracted again from the page's bodies only.

A session's rows are one contiguous stretch of keys, so a search of a few sessions
walks only their stretch, and deleting a session takes its postings out with the very
text each was indexed with (extracted again from the stored bodies by
:func:`~dshpy.storage.sqlite_search.event_text_sql`, the function the migration and a
rebuild index with). Seqs at or above ``2**32`` are not indexed (no log gets near).
The JSONL sidecar keeps :mod:`dshpy.storage.sqlite_search`'s ``search_docs`` layout: it
has no ``events`` table to point into.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from dshpy.core.events import SessionEvent
from dshpy.log.event_text import event_text, indexable_text
from dshpy.storage.search_records import TextHit, TextQuery
from dshpy.storage.search_statement import Dialect, header_conditions, search_statement
from dshpy.storage.sqlite_search import SQLITE, compile_fts5, search_with

__all__ = [
    "KEYED_INDEX_MIGRATION",
    "SEQ_BITS",
    "TextRow",
    "document_count",
    "index_rows",
    "new_session_key",
    "rebuild",
    "search",
    "session_key",
    "text_rows",
    "unindex_session",
]

SEQ_BITS = 32
_SEQ_MASK = (1 << SEQ_BITS) - 1
_TOKENIZER = "tokenize = 'unicode61 remove_diacritics 2'"

_FILL = (
    "INSERT INTO search_text (rowid, text) SELECT doc, text FROM "
    "(SELECT (k.key << 32) | e.seq AS doc, dshpy_event_text(e.body) AS text FROM search_keys k "
    f"JOIN events e ON e.session_id = k.session_id AND e.seq <= {_SEQ_MASK}) "
    "WHERE text IS NOT NULL ORDER BY doc"
)
"""Index every stored event (``dshpy_event_text`` is :func:`~dshpy.storage.sqlite_search.event_text_sql`)."""

_KEY_EVERY_SESSION = (
    "INSERT INTO search_keys (session_id) SELECT id FROM sessions "
    "WHERE id NOT IN (SELECT session_id FROM search_keys) ORDER BY created_at, id"
)

KEYED_INDEX_MIGRATION: tuple[str, ...] = (
    "DROP TABLE search_text",
    "DROP TABLE search_docs",
    "CREATE TABLE search_keys (key INTEGER PRIMARY KEY AUTOINCREMENT, "
    "session_id TEXT NOT NULL UNIQUE REFERENCES sessions(id) ON DELETE CASCADE) STRICT",
    f"CREATE VIRTUAL TABLE search_text USING fts5(text, content = '', {_TOKENIZER})",
    _KEY_EVERY_SESSION,
    _FILL,
    "UPDATE search_state SET generation = generation + 1 WHERE id = 1",
)
"""Schema v5: v4's ``search_docs`` and external-content table replaced by keys and a contentless table, every
stored event indexed again (sessions numbered in creation order), and v4's search cursors stale."""

_UNINDEX = (
    "INSERT INTO search_text (search_text, rowid, text) SELECT 'delete', doc, text FROM "
    "(SELECT (k.key << 32) | e.seq AS doc, dshpy_event_text(e.body) AS text FROM search_keys k "
    f"JOIN events e ON e.session_id = k.session_id AND e.seq <= {_SEQ_MASK} WHERE k.session_id = ?) "
    "WHERE text IS NOT NULL"
)
_NEXT_GENERATION = "UPDATE search_state SET generation = generation + 1 WHERE id = 1"
_INSERT = "INSERT INTO search_text (rowid, text) VALUES (?, ?)"

TextRow = tuple[int, str]
"""``(seq, text)``: one event's indexable text, made before any lock is taken."""


def text_rows(events: Sequence[SessionEvent]) -> list[TextRow]:
    """The indexable text of each of ``events`` that holds any."""
    rows: list[TextRow] = []
    for event in events:
        if event.seq > _SEQ_MASK:
            continue
        text = event_text(event)
        if text:
            rows.append((event.seq, indexable_text(text)))
    return rows


def new_session_key(cursor: sqlite3.Cursor | sqlite3.Connection, session_id: str) -> int:
    """Number a new session (inside the transaction that creates it)."""
    done = cursor.execute("INSERT INTO search_keys (session_id) VALUES (?)", (session_id,))
    key = done.lastrowid
    assert key is not None
    return key


def session_key(cursor: sqlite3.Cursor | sqlite3.Connection, session_id: str) -> int:
    """The session's number; one is given now if it has none (a row damaged away, or an index rebuilt)."""
    row = cursor.execute("SELECT key FROM search_keys WHERE session_id = ?", (session_id,)).fetchone()
    return int(row[0]) if row is not None else new_session_key(cursor, session_id)


def index_rows(cursor: sqlite3.Cursor | sqlite3.Connection, key: int, rows: Sequence[TextRow]) -> None:
    """Index one session's new events (one statement per flush), inside the caller's write transaction."""
    if rows:
        base = key << SEQ_BITS
        cursor.executemany(_INSERT, [(base | seq, text) for seq, text in rows])


def unindex_session(cursor: sqlite3.Cursor | sqlite3.Connection, session_id: str) -> None:
    """Take a session's postings out (before its rows are deleted; its key goes with its row) and stale cursors."""
    cursor.execute(_UNINDEX, (session_id,))
    cursor.execute(_NEXT_GENERATION)


def rebuild(cursor: sqlite3.Cursor | sqlite3.Connection) -> None:
    """Empty the index and index every stored event again; open search cursors become stale."""
    cursor.execute("INSERT INTO search_text (search_text) VALUES ('delete-all')")
    cursor.execute(_KEY_EVERY_SESSION)
    cursor.execute(_FILL)
    cursor.execute(_NEXT_GENERATION)


def document_count(db: sqlite3.Connection) -> int:
    """Events indexed: FTS5 keeps one length row per indexed row."""
    return int(db.execute("SELECT count(*) FROM search_text_docsize").fetchone()[0])


KEYED = Dialect(
    param="?",
    table=SQLITE.table,
    compile=SQLITE.compile,
    member=SQLITE.member,
    values=SQLITE.values,
    source=(
        "search_text JOIN search_keys k ON k.key = (search_text.rowid >> 32) "
        f"JOIN events d ON d.session_id = k.session_id AND d.seq = (search_text.rowid & {_SEQ_MASK})"
    ),
    match=SQLITE.match,
    score=SQLITE.score,
    least=SQLITE.least,
    top=SQLITE.top,
    doc_key="search_text.rowid",
    text="search_text.rowid",
    session_key="(search_text.rowid >> 32)",
    session_keys="SELECT k.key FROM search_keys k JOIN sessions ls ON ls.id = k.session_id",
)
"""The shared statement over this layout: ``d`` is the event's own row; the text column carries the key, and
:func:`search` puts the page's texts in its place."""

_SEGMENT_KEYS = (
    "SELECT min((k.key << 32) | seg.lo), max((k.key << 32) | min(seg.hi - 1, {mask})) "
    "FROM seg JOIN search_keys k ON k.session_id = seg.owner"
)


def _key_range(dialect: Dialect, query: TextQuery, *, forks: bool) -> tuple[str, list[Any]]:
    """The stretch of keys the rows of ``query.sessions`` (and, for forks, their ancestors' rows they read) span."""
    if not forks:
        member = dialect.member("session_id")
        sql = f"SELECT min(key) << 32, (max(key) << 32) | {_SEQ_MASK} FROM search_keys WHERE {member}"
        return sql, [dialect.values(query.sessions or ())]
    from dshpy.storage.search_statement import segments

    prefix, params = segments(dialect, query)
    return prefix + _SEGMENT_KEYS.format(mask=_SEQ_MASK), params


def _text_at(db: sqlite3.Connection, doc: int) -> str:
    """A hit's text, extracted again from its stored body by the connection's ``dshpy_event_text`` (the body may be
    compressed: that function is the one that knows how the session database stores it)."""
    row = db.execute(
        "SELECT dshpy_event_text(e.body) FROM search_keys k "
        "JOIN events e ON e.session_id = k.session_id AND e.seq = ? WHERE k.key = ?",
        (doc & _SEQ_MASK, doc >> SEQ_BITS),
    ).fetchone()
    return (row[0] or "") if row is not None else ""


def _ranked_in_the_index(query: TextQuery, keys: tuple[int, int] | None) -> tuple[str, list[Any]]:
    """The page ranked in the index alone, the events read for its rows only: for a search that filters no
    event by type or time, in a store without zero-copy forks (every filter left is a set of session numbers).

    Ties go to the higher key: the later event of a session, the newer of two sessions.
    """
    where, params = "", list[Any]()
    if keys is not None:
        where += " AND rowid BETWEEN ? AND ?"
        params += keys
    for negate, sessions in (("", query.sessions), ("NOT ", query.exclude_sessions or None)):
        if sessions is not None:
            where += f" AND (rowid >> 32) {negate}IN (SELECT key FROM search_keys WHERE {KEYED.member('session_id')})"
            params.append(KEYED.values(sessions))
    if query.filters_headers:
        headers, given = header_conditions(KEYED, query)
        where += f" AND (rowid >> 32) IN ({KEYED.session_keys} WHERE 1 = 1{headers})"
        params += given
    top = (
        f"SELECT rowid AS doc, {KEYED.score} AS score FROM search_text WHERE search_text MATCH ?{where} "
        "ORDER BY score DESC, doc DESC LIMIT ? OFFSET ?"
    )
    sql = (
        f"SELECT k.session_id, d.seq, d.type, d.time, top.score, top.doc FROM ({top}) top "
        f"JOIN search_keys k ON k.key = (top.doc >> 32) "
        f"JOIN events d ON d.session_id = k.session_id AND d.seq = (top.doc & {_SEQ_MASK}) "
        "ORDER BY top.score DESC, top.doc DESC"
    )
    return sql, [compile_fts5(query.expr), *params, query.limit, query.offset]


def _statement(
    dialect: Dialect, query: TextQuery, *, forks: bool, keys: tuple[int, int] | None
) -> tuple[str, list[Any]]:
    if forks or query.types is not None or query.time_from is not None or query.time_to is not None:
        return search_statement(dialect, query, forks=forks, keys=keys)
    return _ranked_in_the_index(query, keys)


def search(db: sqlite3.Connection, query: TextQuery) -> list[TextHit]:
    """One page of ``query``'s hits (the plans of :func:`~dshpy.storage.sqlite_search.search_with`), each with
    its text extracted again from its stored body.

    Reading an event's row costs a seek into the log; a search that filters no event
    ranks in the index alone and reads the rows of its page only.
    """
    found = search_with(db, query, KEYED, _key_range, statement=_statement)
    return [TextHit(row[0], row[1], row[2], row[3], row[4], _text_at(db, int(row[5]))) for row in found]
