"""Snippets: the piece of a hit's text around its first match, with every match in it marked.

Made here, from the text the index returned, the same way for every backend (FTS5's
``snippet()`` and PostgreSQL's ``ts_headline`` would each cut and mark differently):
a window of :data:`SNIPPET_CHARS` code points (dsh's 240) that starts a little before
the first place the expression matches, whitespace runs folded to one space so a
snippet is one line, and the matched phrases given as offsets into it. Words are
found as the index finds them (:mod:`dshpy.log.search_text`), so ``parse_config`` is
marked for the query ``parse config``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dshpy.log.search_text import MatchExpr, Term, word_spans

__all__ = ["SNIPPET_CHARS", "Snippet", "make_snippet"]

SNIPPET_CHARS = 240
"""Code points of text a snippet shows at most."""
_LEAD = 40
"""How much text is shown before the first match (when there is that much)."""

Span = tuple[int, int]


@dataclass(frozen=True, slots=True)
class Snippet:
    """A one-line excerpt; ``highlights`` are ``[start, end)`` offsets of the matches in ``text``."""

    text: str
    highlights: tuple[Span, ...]
    truncated_start: bool
    """Text of the event comes before the excerpt."""
    truncated_end: bool
    """Text of the event comes after the excerpt."""

    def marked(self, before: str = "[", after: str = "]", ellipsis: str = "…") -> str:
        """The excerpt with each match between ``before`` and ``after``, and ``ellipsis`` where text was cut."""
        out: list[str] = [ellipsis] if self.truncated_start else []
        position = 0
        for start, end in self.highlights:
            out += [self.text[position:start], before, self.text[start:end], after]
            position = end
        out.append(self.text[position:])
        if self.truncated_end:
            out.append(ellipsis)
        return "".join(out)

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "highlights": [list(span) for span in self.highlights],
            "truncatedStart": self.truncated_start,
            "truncatedEnd": self.truncated_end,
        }


def _ends_at(term: Term, folded: list[str]) -> bool:
    """Whether ``term`` matches the last words of ``folded``."""
    size = len(term.words)
    if not size or len(folded) < size:
        return False
    tail = folded[len(folded) - size :]
    last = size - 1
    return all(
        word.startswith(want) if k == last and term.prefix else word == want
        for k, (word, want) in enumerate(zip(tail, term.words, strict=True))
    )


def _matches(terms: tuple[Term, ...], spans: list[tuple[int, int, str]]) -> list[Span]:
    """Every occurrence of ``terms`` among ``spans`` as character spans, in text order, overlaps merged."""
    folded = [word for _, _, word in spans]
    found = sorted((spans[i][0], spans[i + len(term.words) - 1][1]) for term in terms for i in term.starts(folded))
    merged: list[Span] = []
    for start, end in found:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def _one_line(text: str, spans: list[Span]) -> tuple[str, list[Span]]:
    """``text`` with whitespace runs as single spaces (and none at either end), ``spans`` moved along."""
    out: list[str] = []
    position = [0] * (len(text) + 1)
    for index, char in enumerate(text):
        position[index] = len(out)
        if char.isspace():
            if out and out[-1] != " ":
                out.append(" ")
        else:
            out.append(char)
    position[len(text)] = len(out)
    line = "".join(out)
    lead = len(line) - len(line.lstrip(" "))
    line = line.strip(" ")
    moved = [
        (max(0, position[start] - lead), min(len(line), position[end] - lead))
        for start, end in spans
        if position[end] > position[start]
    ]
    return line, [(start, end) for start, end in moved if end > start]


def _may_match(text: str, terms: tuple[Term, ...]) -> bool:
    """False only when no term can match ``text``: an ASCII text folds to its lower case, so a term whose first
    word is not a substring of it matches nowhere. A semantic hit usually shares no word with its query, and
    this spares cutting a long tool output into words to find that out."""
    if not text.isascii():
        return True
    lowered = text.lower()
    return any(term.words and term.words[0] in lowered for term in terms)


def make_snippet(text: str, expr: MatchExpr, width: int = SNIPPET_CHARS) -> Snippet:
    """The excerpt of ``text`` around its first match of ``expr`` (its start when nothing matches).

    Words are cut only as far as the window reaches, so a hit in a long tool output
    costs what its excerpt does.
    """
    terms = expr.positive_terms
    if not _may_match(text, terms):
        return Snippet(" ".join(text[:width].split()), (), False, width < len(text))  # _one_line's line
    spans: list[tuple[int, int, str]] = []
    folded: list[str] = []
    window: Span | None = None
    for start, end, word in word_spans(text):
        if window is not None and start >= window[1]:
            break
        spans.append((start, end, word))
        folded.append(word)
        if window is None and any(_ends_at(term, folded) for term in terms):
            first = next(spans[-len(t.words)][0] for t in terms if _ends_at(t, folded))
            begin = max(0, first - _LEAD)
            finish = min(len(text), begin + width)
            window = (max(0, min(begin, finish - width)), finish)
    if window is None:
        window = (0, min(len(text), width))
    begin, finish = window
    inside = [
        (max(start, begin) - begin, min(end, finish) - begin)
        for start, end in _matches(terms, spans)
        if start < finish and end > begin
    ]
    line, highlights = _one_line(text[begin:finish], inside)
    return Snippet(line, tuple(highlights), begin > 0, finish < len(text))
