"""The one search statement both SQL indexes run, written once and spoken in each database's dialect.

What a search means — which stored rows belong to which session (a zero-copy fork
reads its prefix through its parent's rows), which sessions are in scope (ids,
exclusions, header cwd, parent and creation time), which events (types, times), the
order of hits and the page — is decided here, so SQLite's FTS5 index and
PostgreSQL's ``tsvector`` index cannot drift apart. A :class:`Dialect` supplies only
what differs: how a set of values is passed, how the text is matched and ranked, and
small spellings (``min``/``LEAST``, collation).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from dshpy.log.search_text import MatchExpr
from dshpy.storage.base import column_text
from dshpy.storage.search_records import TextQuery

__all__ = ["Dialect", "header_conditions", "key_range_statement", "search_statement", "segments"]


@dataclass(frozen=True, slots=True)
class Dialect:
    """How one database spells the parts of a search that differ."""

    param: str
    """The placeholder of one parameter: ``?`` or ``%s``."""
    table: Callable[[str], str]
    """A table's name as the statement names it (schema-qualified on PostgreSQL)."""
    compile: Callable[[MatchExpr], str]
    """The expression in the index's own query syntax (the one parameter of :attr:`source` or :attr:`match`)."""
    member: Callable[[str], str]
    """``expr`` is one of a set of values passed as one parameter (made by :attr:`values`)."""
    values: Callable[[Sequence[Any]], Any]
    """The parameter :attr:`member` takes (a JSON array for SQLite's ``json_each``, a list for ``ANY``)."""
    source: str
    """What the statement reads ``FROM``: the index and ``search_docs d`` joined to it."""
    match: str
    """The ``WHERE`` condition that keeps the matches (``true`` where ``source`` joined only them). The compiled
    expression is the one parameter of ``source`` and ``match`` together."""
    score: str
    """The rank of a hit, higher is better."""
    least: str
    """The smaller of two values: ``min`` or ``LEAST``."""
    top: str
    """:data:`~dshpy.storage.search_records.MAX_SEQ` as the segment query's open upper bound."""
    collate: str = ""
    """Appended to the session id in ``ORDER BY``, for byte order."""
    doc_key: str = ""
    """The index's row key, which :func:`search_statement`'s ``keys`` bound."""
    text: str = "d.text"
    """The hit's text column (an index that keeps no text answers something the caller turns into text)."""
    session_key: str = ""
    """The number of the session storing an index row, read from the row's key alone (``""``: none)."""
    session_keys: str = ""
    """``SELECT`` of the numbers of the sessions ``ls`` whose ``WHERE`` follows (with :attr:`session_key`)."""


_SEGMENTS = """WITH RECURSIVE seg(logical, owner, lo, hi) AS (
    SELECT s.id, s.id, s.base_count, {top} FROM {sessions} s{scope}
    UNION ALL
    SELECT seg.logical, o.base_id, p.base_count, {least}(seg.hi, o.base_count)
    FROM seg JOIN {sessions} o ON o.id = seg.owner JOIN {sessions} p ON p.id = o.base_id
) """
"""Which stored rows make up each logical session: its own from its base count on, then each ancestor's own
rows below the count the next one down inherits (``lo <= seq < hi``)."""

_IN_SEGMENT = "seg.owner = d.session_id AND d.seq >= seg.lo AND d.seq < seg.hi"


def segments(dialect: Dialect, query: TextQuery) -> tuple[str, list[Any]]:
    """The segment table of the sessions in scope (every session without a scope), and its parameters."""
    scope, params = "", []
    if query.sessions is not None:
        scope = f" WHERE {dialect.member('s.id')}"
        params.append(dialect.values(query.sessions))
    sessions = dialect.table("sessions")
    return _SEGMENTS.format(top=dialect.top, sessions=sessions, scope=scope, least=dialect.least), params


def _either(dialect: Dialect, column: str, values: tuple[str | None, ...]) -> tuple[str, list[Any]]:
    """``column`` equal to one of ``values`` (``None`` among them: or NULL); nothing matches an empty tuple."""
    given = [column_text(value) for value in values if value is not None]
    tests = [dialect.member(column)] if given else []
    if None in values:
        tests.append(f"{column} IS NULL")
    if not tests:
        return " AND 1 = 0", []
    return f" AND ({' OR '.join(tests)})", [dialect.values(given)] if given else []


def header_conditions(dialect: Dialect, query: TextQuery) -> tuple[str, list[Any]]:
    """The ``AND …`` conditions on the sessions ``ls`` that the header filters (cwd, parent, creation) ask for."""
    where, params = "", []
    for column, wanted in (("ls.cwd", query.cwd), ("ls.parent_session", query.parents)):
        if wanted is not None:
            clause, given = _either(dialect, column, wanted)
            where += clause
            params += given
    for condition, value in (("ls.created_at >=", query.created_from), ("ls.created_at <=", query.created_to)):
        if value is not None:
            where += f" AND {condition} {dialect.param}"
            params.append(value)
    return where, params


def key_range_statement(dialect: Dialect, query: TextQuery, *, forks: bool) -> tuple[str, list[Any]]:
    """The lowest and highest index key among the rows the sessions of ``query.sessions`` read (NULLs: none).

    A search of a few sessions passes them on as ``keys``: the index then walks only
    that stretch of each word's postings, however often the word occurs elsewhere.
    """
    docs = dialect.table("search_docs")
    if not forks:
        member = dialect.member("session_id")
        return f"SELECT min(doc), max(doc) FROM {docs} WHERE {member}", [dialect.values(query.sessions or ())]
    prefix, params = segments(dialect, query)
    return f"{prefix}SELECT min(d.doc), max(d.doc) FROM seg JOIN {docs} d ON {_IN_SEGMENT}", params


def search_statement(
    dialect: Dialect, query: TextQuery, *, forks: bool, keys: tuple[int, int] | None = None
) -> tuple[str, list[Any]]:
    """The statement of one page of ``query``'s hits and its parameters: ``(session, seq, type, time, score,
    text)`` rows, best first, ties by newer event, session id and seq.

    With zero-copy ``forks`` in the store a segment table maps each stored row to
    every session whose log holds it; without, a row belongs to the session storing
    it. ``keys`` keeps only index rows whose key lies in that inclusive range.
    """
    sessions = dialect.table("sessions")
    prefix, prefix_params = segments(dialect, query) if forks else ("", [])
    owner = "seg.logical" if forks else "d.session_id"
    joins = f" JOIN seg ON {_IN_SEGMENT}" if forks else ""
    where = ""
    params: list[Any] = []
    if query.sessions is not None and not forks:
        where += f" AND {dialect.member('d.session_id')}"
        params.append(dialect.values(query.sessions))
    if keys is not None:
        where += f" AND {dialect.doc_key} BETWEEN {dialect.param} AND {dialect.param}"
        params += keys
    if query.exclude_sessions:
        where += f" AND NOT {dialect.member(owner)}"
        params.append(dialect.values(query.exclude_sessions))
    if query.filters_headers:
        headers, given = header_conditions(dialect, query)
        if dialect.session_key and not forks:
            # the sessions in scope first, once: a match out of scope is dropped by its key alone
            where += f" AND {dialect.session_key} IN ({dialect.session_keys} WHERE 1 = 1{headers})"
        else:
            joins += f" JOIN {sessions} ls ON ls.id = {owner}"
            where += headers
        params += given
    for condition, value in (
        ("d.time >=", query.time_from),
        ("d.time <=", query.time_to),
    ):
        if value is not None:
            where += f" AND {condition} {dialect.param}"
            params.append(value)
    if query.types is not None:
        where += f" AND {dialect.member('d.type')}"
        params.append(dialect.values([column_text(kind) for kind in query.types]))
    limit = f"LIMIT {dialect.param} OFFSET {dialect.param}"
    sql = (
        f"{prefix}SELECT {owner}, d.seq, d.type, d.time, {dialect.score} AS score, {dialect.text} "
        f"FROM {dialect.source}{joins} WHERE {dialect.match}{where} "
        f"ORDER BY score DESC, d.time DESC, {owner}{dialect.collate}, d.seq {limit}"
    )
    return sql, [*prefix_params, dialect.compile(query.expr), *params, query.limit, query.offset]
