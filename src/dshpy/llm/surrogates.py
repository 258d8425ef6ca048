"""Rejoining UTF-16 surrogate pairs that a model server split between two stream chunks.

Servers stream JSON, and JSON escapes a character beyond the BMP (an emoji) as two
``\\uXXXX`` escapes, a high and a low surrogate. When a server cuts its text between
the two, each chunk's JSON decodes to a string holding half a character, and simply
concatenating the halves gives two lone surrogates, not the emoji: the text would be
wrong on screen and unencodable as UTF-8. :class:`SurrogateJoiner` holds a trailing
high surrogate back until the next piece of the same block arrives and pairs it with
a leading low one. A half that never finds its partner is released unchanged when the
block ends (it is what the server sent; the storage codecs write it as JSON does).
"""

from __future__ import annotations

__all__ = ["SurrogateJoiner"]


def _is_high(char: str) -> bool:
    return "\ud800" <= char <= "\udbff"


def _is_low(char: str) -> bool:
    return "\udc00" <= char <= "\udfff"


class SurrogateJoiner:
    """Carries a dangling high surrogate from one piece of a block's text to the next."""

    __slots__ = ("_pending",)

    def __init__(self) -> None:
        self._pending = ""

    def feed(self, text: str) -> str:
        """The part of ``text`` that is ready to emit (possibly ``""``: everything is held back)."""
        if self._pending:
            high, self._pending = self._pending, ""
            if text and _is_low(text[0]):
                code = 0x10000 + ((ord(high) - 0xD800) << 10) + (ord(text[0]) - 0xDC00)
                text = chr(code) + text[1:]
            else:
                text = high + text
        if text and _is_high(text[-1]):
            self._pending = text[-1]
            return text[:-1]
        return text

    def flush(self) -> str:
        """What is still held back (a lone high surrogate, or ``""``); the block ends here."""
        pending, self._pending = self._pending, ""
        return pending
