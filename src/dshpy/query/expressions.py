"""Query text into a match expression: a literal phrase by default, operators only when asked.

An agent or a user pastes error messages, code and paths into a search box, where
``-``, ``*``, ``"``, ``OR`` and ``NOT`` are data, so by default the whole query is one
phrase: its words, in order (``TypeError: x is None`` finds that message, punctuation
ignored as the index ignores it). With ``operators=True`` a small syntax of our own
applies, the same on every backend (it compiles to FTS5, ``tsquery`` or the scan,
never passed through):

* ``word`` — the word (a bare token with punctuation inside, ``parse_config`` or
  ``a.b``, is the phrase of its words); terms side by side must all match (``AND``
  may be written and means nothing more);
* ``"several words"`` — the phrase;
* ``prefix*`` / ``"a phrase ending in a prefix"*`` — the last word as a prefix;
* ``-term`` or ``NOT term`` — events without it (a group needs one term without);
* ``a b OR c`` — either side (``OR`` binds loosest; there are no parentheses).

Before either, the query is checked: a query that is empty (or only whitespace),
holds a NUL, is longer than :data:`MAX_QUERY_BYTES` of UTF-8, or has no word at all
(letters or digits) is refused with ``SESSION_QUERY_INVALID_QUERY``.
"""

from __future__ import annotations

import re
from typing import Any

from dshpy.log.search_text import MatchExpr, Term, words
from dshpy.query.errors import INVALID_QUERY, InvalidQueryError

__all__ = ["MAX_QUERY_BYTES", "parse_query"]

MAX_QUERY_BYTES = 4096
"""The longest query accepted (UTF-8 bytes): long enough for a stack trace line, too short to be a document."""

_TOKEN = re.compile(r'(-?)"([^"]*)"(\*?)|(\S+)')


def _refuse(message: str) -> InvalidQueryError:
    return InvalidQueryError(INVALID_QUERY, message)


def _checked(query: Any) -> str:
    if not isinstance(query, str):
        raise _refuse(f"the search query must be a string, not {type(query).__name__}")
    if "\x00" in query:
        raise _refuse("the search query must not contain NUL characters")
    size = len(query.encode("utf-8", "surrogatepass"))
    if size > MAX_QUERY_BYTES:
        raise _refuse(f"the search query is {size} bytes long; at most {MAX_QUERY_BYTES} are accepted")
    text = " ".join(query.split())
    if not text:
        raise _refuse("the search query is empty")
    return text


def parse_query(query: Any, *, operators: bool = False) -> MatchExpr:
    """The expression ``query`` asks for (see the module docstring); :class:`InvalidQueryError` when unusable."""
    text = _checked(query)
    expr = _parse_operators(text) if operators else MatchExpr.phrase(text)
    if not expr.groups:
        raise _refuse(f"the search query {text[:80]!r} has no words to search for (letters or digits)")
    return expr


def _parse_operators(text: str) -> MatchExpr:
    if text.count('"') % 2:
        raise _refuse('the search query has an unbalanced double quote (")')
    groups: list[tuple[Term, ...]] = []
    group: list[Term] = []
    negate_next = False
    for match in _TOKEN.finditer(text):
        minus, quoted, star, bare = match.groups()
        if bare in ("OR", "AND", "NOT"):
            if bare == "OR":
                groups.append(_closed(group, negate_next))
                group, negate_next = [], False
            elif bare == "NOT":
                negate_next = True
            continue
        if bare is not None:
            minus = "-" if bare.startswith("-") and len(bare) > 1 else ""
            body = bare[1:] if minus else bare
            star = "*" if body.endswith("*") else ""
            found = words(body)
        else:
            found = words(quoted)
        if found:
            group.append(Term(tuple(found), prefix=bool(star), negated=bool(minus) or negate_next))
        negate_next = False
    if not groups and not group and not negate_next:
        return MatchExpr(())  # no word anywhere: refused as such by the caller
    groups.append(_closed(group, negate_next))
    return MatchExpr(tuple(groups))


def _closed(group: list[Term], dangling_not: bool) -> tuple[Term, ...]:
    if dangling_not:
        raise _refuse("NOT must be followed by a term")
    if not group:
        raise _refuse("OR needs a term on each side")
    if all(term.negated for term in group):
        raise _refuse("each part of the query needs a term to match, not only terms to exclude")
    return tuple(group)
