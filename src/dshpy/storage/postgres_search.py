"""Full-text search on PostgreSQL: a ``tsvector`` per event that holds text, a GIN index, one statement per search.

``search_docs`` holds, for every event with text (:func:`~dshpy.log.event_text.event_text`),
its type, time, the text as :func:`~dshpy.log.event_text.indexable_text` cut it, and
``tsv``: ``to_tsvector('simple', …)`` of its words *as* :mod:`dshpy.log.search_text`
*cut them*, joined by spaces. PostgreSQL's own parser would split words its own way
(file paths, e-mail addresses, ``x_y``), so it is handed words it keeps as they are:
a phrase matches here exactly where it matches in SQLite and in the scan. The
``simple`` configuration neither stems nor drops stop words.

Rows are written by the schema's ``append_events`` function in the append's own
statement, and by the same transaction that creates a session or detaches a fork:
the index is never behind or ahead of the log. ``search_state.generation`` moves on
in the statement that deletes a session and when the index is rebuilt.

A known limit of ``tsvector``: word positions stop counting at 16,383, so a phrase
more than that many words into one event's text may be missed (single words are
still found).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from dshpy.core.events import SessionEvent
from dshpy.log.event_text import event_text, indexable_text
from dshpy.log.search_text import MatchExpr, Term, words
from dshpy.storage.base import column_text
from dshpy.storage.search_records import MAX_SEQ, TextHit
from dshpy.storage.search_statement import Dialect
from dshpy.storage.sqlite_search import event_text_sql

__all__ = [
    "INDEX_BATCH",
    "INSERT_DOCS",
    "NEXT_GENERATION",
    "SEARCH_STATEMENTS",
    "DocColumns",
    "compile_tsquery",
    "doc_columns",
    "fill_search_docs",
    "hits_of",
    "postgres_dialect",
]

INDEX_BATCH = 2000
"""Events read and indexed per round trip while a migration or a rebuild fills the index."""

SEARCH_STATEMENTS: tuple[str, ...] = (
    """CREATE TABLE {schema}.search_docs (
        session_id text NOT NULL REFERENCES {schema}.sessions (id) ON DELETE CASCADE,
        seq bigint NOT NULL CHECK (seq >= 0),
        type text NOT NULL,
        time bigint NOT NULL,
        text text NOT NULL,
        tsv tsvector NOT NULL,
        PRIMARY KEY (session_id, seq)
    )""",
    "CREATE INDEX search_docs_tsv ON {schema}.search_docs USING gin (tsv)",
    """CREATE TABLE {schema}.search_state (
        id integer PRIMARY KEY CHECK (id = 1),
        generation bigint NOT NULL
    )""",
    "INSERT INTO {schema}.search_state (id, generation) VALUES (1, 0)",
)
"""The index's tables (``{schema}`` is the quoted schema name)."""

INSERT_DOCS = (
    "INSERT INTO {schema}.search_docs (session_id, seq, type, time, text, tsv) "
    "SELECT %s, d.seq, d.type, d.time, d.text, to_tsvector('simple', d.words) "
    "FROM unnest(%b::bigint[], %b::text[], %b::bigint[], %b::text[], %b::text[]) AS d(seq, type, time, text, words)"
)
"""One session's docs rows from five parallel arrays (see :func:`doc_columns`)."""

_FILL_DOCS = (
    "INSERT INTO {schema}.search_docs (session_id, seq, type, time, text, tsv) "
    "SELECT d.session_id, d.seq, d.type, d.time, d.text, to_tsvector('simple', d.words) "
    "FROM unnest(%s::text[], %s::bigint[], %s::text[], %s::bigint[], %s::text[], %s::text[]) "
    "AS d(session_id, seq, type, time, text, words)"
)

NEXT_GENERATION = "UPDATE {schema}.search_state SET generation = generation + 1 WHERE id = 1"

DocColumns = tuple[list[int], list[str], list[int], list[str], list[str]]
"""``(seqs, types, times, texts, words)`` of the events that hold text."""


def doc_columns(events: Sequence[SessionEvent]) -> DocColumns:
    """The docs rows of ``events`` as parallel arrays, sent in binary beside the batch's events."""
    seqs: list[int] = []
    kinds: list[str] = []
    times: list[int] = []
    texts: list[str] = []
    cut: list[str] = []
    for event in events:
        text = event_text(event)
        if not text:
            continue
        text = indexable_text(text)
        seqs.append(event.seq)
        kinds.append(column_text(event.type))
        times.append(event.time)
        texts.append(text)
        cut.append(" ".join(words(text)))
    return seqs, kinds, times, texts, cut


def fill_search_docs(conn: psycopg.Connection[Any], schema: str, session_id: str | None = None) -> None:
    """Index the stored events (of one session, or all), :data:`INDEX_BATCH` per round trip, in the caller's
    transaction: a migration indexes the events stored before the index existed, a rebuild all of them.
    ``schema`` is already quoted."""
    where = "" if session_id is None else " AND session_id = %s"
    scope: tuple[Any, ...] = () if session_id is None else (session_id,)
    insert = _FILL_DOCS.format(schema=schema)
    last: tuple[str, int] = ("", -1)
    while True:
        rows = conn.execute(
            f"SELECT session_id, seq, type, time, body FROM {schema}.events WHERE (session_id, seq) > (%s, %s)"
            f"{where} ORDER BY session_id, seq LIMIT %s",
            (*last, *scope, INDEX_BATCH),
        ).fetchall()
        if not rows:
            return
        columns: list[list[Any]] = [[], [], [], [], [], []]
        for sid, seq, kind, time, body in rows:
            text = event_text_sql(body)
            if text:
                for column, value in zip(columns, (sid, seq, kind, time, text, " ".join(words(text))), strict=True):
                    column.append(value)
        if columns[0]:
            conn.execute(insert, columns)
        last = (rows[-1][0], rows[-1][1])


def _lexeme(word: str) -> str:
    return "'" + word.replace("\\", "\\\\").replace("'", "''") + "'"


def _phrase(term: Term) -> str:
    lexemes = [_lexeme(word) for word in term.words]
    if term.prefix:
        lexemes[-1] += ":*"
    return "(" + " <-> ".join(lexemes) + ")"


def compile_tsquery(expr: MatchExpr) -> str:
    """``expr`` as ``to_tsquery`` input: every word a quoted lexeme, so nothing a user typed is an operator."""
    groups = []
    for group in expr.groups:
        parts = [("!" if term.negated else "") + _phrase(term) for term in group]
        groups.append("(" + " & ".join(parts) + ")")
    return " | ".join(groups)


def postgres_dialect(schema: str) -> Dialect:
    """``tsvector`` in ``schema`` (quoted): matched with ``@@`` on the GIN index, ranked by length-normalized
    ``ts_rank``."""
    return Dialect(
        param="%s",
        table=lambda name: f"{schema}.{name}",
        compile=compile_tsquery,
        member=lambda expr: f"{expr} = ANY(%s)",
        values=list,
        source=f"to_tsquery('simple', %s) AS q(query) JOIN {schema}.search_docs d ON d.tsv @@ q.query",
        match="true",
        score="ts_rank(d.tsv, q.query, 1)::float8",
        least="LEAST",
        top=f"{MAX_SEQ}::bigint",
        collate=' COLLATE "C"',
    )


def hits_of(rows: Sequence[Sequence[Any]]) -> list[TextHit]:
    """The hits of :func:`search_sql`'s rows."""
    return [
        TextHit(str(sid), int(seq), str(kind), int(time), float(score), str(text))
        for sid, seq, kind, time, score, text in rows
    ]
