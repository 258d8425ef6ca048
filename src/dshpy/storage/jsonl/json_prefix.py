"""Is an unterminated final line the start of a JSON object line, or damage?

A crash cuts a JSONL log inside the last batch it was writing, so the only bytes a
reader may drop as *torn* are a prefix of a line the writer meant to write: one JSON
object, then ``\\n``. A damaged line (a flipped final newline, stray bytes, zeroes)
is usually no such prefix, and must surface as corruption instead of vanishing with
the tail. :func:`is_json_object_prefix` decides that in one pass, without building
anything.
"""

from __future__ import annotations

import codecs
import re

__all__ = ["is_json_object_prefix"]

_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_NUMBER_CHARS = frozenset("+-.0123456789eE")
_LITERALS = ("true", "false", "null")
_WHITESPACE = frozenset(" \t\r")  # no "\n": it would have ended the line
_HEX = frozenset("0123456789abcdefABCDEF")
_ESCAPES = frozenset('"\\/bfnrtu')
_STRING_SPECIAL = re.compile(r'["\\\x00-\x1f]')  # what ends a run of plain string characters

# What the parser expects next.
_VALUE, _KEY_OR_CLOSE, _KEY, _COLON, _AFTER_VALUE, _VALUE_OR_CLOSE, _DONE = range(7)


def _number_prefix(text: str) -> bool:
    """Whether ``text`` is a JSON number or can still become one (``-``, ``1.``, ``2e+``)."""
    return _NUMBER.fullmatch(text) is not None or _NUMBER.fullmatch(text + "0") is not None


def _number(text: str) -> bool:
    return _NUMBER.fullmatch(text) is not None


def is_json_object_prefix(fragment: bytes) -> bool:
    """Whether some continuation makes ``fragment`` one complete JSON object.

    ``fragment`` must be non-empty, valid UTF-8 up to a possibly cut final character,
    start with ``{`` and never close its top-level object (a closed object would have
    been followed by the newline, not by more bytes).
    """
    try:
        text = codecs.getincrementaldecoder("utf-8")().decode(fragment, final=False)
    except UnicodeDecodeError:
        return False
    if not text:
        return False  # at most the first bytes of one multi-byte character: never a line's "{"
    stack: list[str] = []
    expect = _VALUE
    i, size = 0, len(text)
    while i < size:
        char = text[i]
        if expect == _DONE:
            return False
        if char in _WHITESPACE and stack:
            i += 1
            continue
        if expect in (_VALUE, _VALUE_OR_CLOSE):
            if expect == _VALUE_OR_CLOSE and char == "]":
                stack.pop()
                expect = _AFTER_VALUE if stack else _DONE
                i += 1
                continue
            if not stack and char != "{":
                return False
            if char in "{[":
                stack.append(char)
                expect = _KEY_OR_CLOSE if char == "{" else _VALUE_OR_CLOSE
                i += 1
            elif char == '"':
                end = _skip_string(text, i + 1)
                if end is None:
                    return False
                if end == size:
                    return True
                expect, i = _AFTER_VALUE, end
            elif char in _NUMBER_CHARS:
                end = i
                while end < size and text[end] in _NUMBER_CHARS:
                    end += 1
                if end == size:
                    return _number_prefix(text[i:end])
                if not _number(text[i:end]):
                    return False
                expect, i = _AFTER_VALUE, end
            else:
                end = i
                while end < size and text[end].isalpha():
                    end += 1
                word = text[i:end]
                if end == size:
                    return any(literal.startswith(word) for literal in _LITERALS)
                if word not in _LITERALS:
                    return False
                expect, i = _AFTER_VALUE, end
        elif expect in (_KEY_OR_CLOSE, _KEY):
            if expect == _KEY_OR_CLOSE and char == "}":
                stack.pop()
                expect = _AFTER_VALUE if stack else _DONE
                i += 1
                continue
            if char != '"':
                return False
            end = _skip_string(text, i + 1)
            if end is None:
                return False
            if end == size:
                return True
            expect, i = _COLON, end
        elif expect == _COLON:
            if char != ":":
                return False
            expect, i = _VALUE, i + 1
        else:  # _AFTER_VALUE
            closer = "}" if stack[-1] == "{" else "]"
            if char == ",":
                expect = _KEY if stack[-1] == "{" else _VALUE
            elif char == closer:
                stack.pop()
                expect = _AFTER_VALUE if stack else _DONE
            else:
                return False
            i += 1
    return True  # a whole object is still a torn line: only its newline is missing


def _skip_string(text: str, i: int) -> int | None:
    """The index after the closing quote of the string whose body starts at ``i``.

    ``len(text)`` when the text ends inside the (so far valid) string, ``None`` when
    the string is invalid (a raw control character or a bad escape).
    """
    size = len(text)
    while (special := _STRING_SPECIAL.search(text, i)) is not None:
        i = special.start()
        char = text[i]
        if char == '"':
            return i + 1
        if char != "\\":
            return None  # a raw control character
        if i + 1 == size:
            return size
        escape = text[i + 1]
        if escape not in _ESCAPES:
            return None
        if escape == "u":
            digits = text[i + 2 : i + 6]
            if any(digit not in _HEX for digit in digits):
                return None
            if len(digits) < 4:
                return size
            i += 6
        else:
            i += 2
    return size
