"""Words, phrases and match expressions: the one reading of text every search backend shares.

A search must find the same events whichever backend holds them, so the text is cut
into words once, here, the way SQLite's FTS5 ``unicode61`` tokenizer (with
``remove_diacritics 2``) cuts it: a word is a run of letters and digits (Unicode
categories L* and N*; everything else, the underscore and combining marks included,
separates words), compared in lower case with the diacritics of precomposed letters
removed. ``parse_config`` is the two words ``parse config``, ``Café`` is ``cafe``.
SQLite tokenizes with FTS5 itself; PostgreSQL is handed these words already cut
(``to_tsvector('simple', …)`` of them), and the scan without an index uses them
directly.

A :class:`MatchExpr` is what a query asks for: an OR of groups, each an AND of
:class:`Term`\\ s (a phrase of consecutive words, the last possibly a prefix, possibly
negated). A plain query is one group holding one phrase of all its words. Parsing a
query string into one is the query layer's business (:mod:`dshpy.query.expressions`);
each backend compiles the expression into its own syntax, so no user input ever
reaches an FTS parser as syntax.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

__all__ = ["MatchExpr", "Term", "fold_word", "word_spans", "words"]

_WORD = re.compile(r"[^\W_]+")
"""Letters and digits: ``\\w`` is exactly Unicode's alphanumerics plus ``_``, which separates."""


def fold_word(word: str) -> str:
    """``word`` lower-cased, without the diacritics of its letters (``Éte`` → ``ete``)."""
    word = word.lower()
    if word.isascii():
        return word
    decomposed = unicodedata.normalize("NFD", word)
    return unicodedata.normalize("NFC", "".join(c for c in decomposed if unicodedata.category(c) != "Mn"))


def words(text: str) -> list[str]:
    """The folded words of ``text``, in order."""
    return [fold_word(word) for word in _WORD.findall(text)]


def word_spans(text: str) -> Iterator[tuple[int, int, str]]:
    """``(start, end, folded word)`` of each word of ``text``: where a match lies in the original text."""
    for match in _WORD.finditer(text):
        yield match.start(), match.end(), fold_word(match.group())


@dataclass(frozen=True, slots=True)
class Term:
    """A phrase: ``words`` in a row; with ``prefix`` the last one only has to start the word there."""

    words: tuple[str, ...]
    prefix: bool = False
    negated: bool = False
    """The group matches only where this term does not."""

    def starts(self, doc: Sequence[str]) -> list[int]:
        """Positions in ``doc`` (a text's :func:`words`) where the phrase begins."""
        size = len(self.words)
        if not size:
            return []
        head, last = self.words[0], size - 1
        found: list[int] = []
        for index in range(len(doc) - size + 1):
            if not self._word_at(doc[index], head, last == 0):
                continue
            if all(self._word_at(doc[index + k], self.words[k], k == last) for k in range(1, size)):
                found.append(index)
        return found

    def _word_at(self, candidate: str, word: str, is_last: bool) -> bool:
        return candidate.startswith(word) if is_last and self.prefix else candidate == word


@dataclass(frozen=True, slots=True)
class MatchExpr:
    """An OR of groups, each an AND of terms; a group needs at least one term that is not negated."""

    groups: tuple[tuple[Term, ...], ...]

    @classmethod
    def phrase(cls, text: str) -> MatchExpr:
        """All the words of ``text`` as one literal phrase (no operators); no groups when it has no words."""
        found = tuple(words(text))
        return cls(((Term(found),),) if found else ())

    @property
    def positive_terms(self) -> tuple[Term, ...]:
        """The terms a match is made of (each once, in order): what ranking counts and snippets highlight."""
        seen: dict[Term, None] = {}
        for group in self.groups:
            for term in group:
                if not term.negated:
                    seen.setdefault(term, None)
        return tuple(seen)

    def matches(self, doc: Sequence[str]) -> bool:
        """Whether a text of words ``doc`` satisfies the expression."""
        return any(all(bool(term.starts(doc)) != term.negated for term in group) for group in self.groups if group)
