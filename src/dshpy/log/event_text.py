"""The words an event contributes to search, by dsh's extraction rules (reference §9).

Search indexes what was *said*, not the log's structure, so every backend and the
scan without an index must agree on exactly which text an event holds:

* ``user/message``: its text blocks; ``assistant/message``: the text blocks and the
  tool calls (name and raw arguments) of its message. Reasoning blocks are not text;
* ``tool/call``: the tool's name and its raw arguments;
* ``tool/result``: its message's text (text blocks, and those nested in a v0
  ``tool-result`` block) plus the error's ``name`` and ``code``;
* ``todo/write``: each item's status and content;
* ``turn/end``: ``error`` and the failure's message, or the words ``aborted``,
  ``max-tokens``, ``interrupted``; a completed turn says nothing.

Everything else — boundaries, request headers and contexts, stream records, failed
``assistant/attempt`` settlements (never shown to the model), plugin records and
unknown types — holds no text. Parts are trimmed and joined by newlines; empty parts
are dropped. A block or field of an unexpected shape contributes nothing rather than
raising: a stored log is searched as it is.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

from dshpy.core.events import SessionEvent

__all__ = ["MAX_INDEXED_CHARS", "TEXT_EVENT_TYPES", "event_text", "indexable_text", "text_of"]

MAX_INDEXED_CHARS = 100_000
"""How much of one event's text is indexed (code points). PostgreSQL's ``tsvector`` holds at most
1 MB, so every backend stops at the same place: a search never depends on the backend."""

_SURROGATE = re.compile("[\ud800-\udfff]")


def _blocks(content: Any) -> Iterator[str]:
    if not isinstance(content, list | tuple):
        return
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            yield _string(block.get("text"))
        elif kind == "tool-call":
            yield _string(block.get("name"))
            yield _string(block.get("arguments"))
        elif kind == "tool-result":  # the v0 wrapper around a tool's output
            yield from _blocks(block.get("content"))


def _string(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _message_content(data: Any) -> Any:
    message = data.get("message") if isinstance(data, dict) else None
    return message.get("content") if isinstance(message, dict) else None


def _user(data: Any) -> Iterator[str]:
    if isinstance(data, dict):
        yield from _blocks(data.get("content"))


def _assistant(data: Any) -> Iterator[str]:
    yield from _blocks(_message_content(data))


def _tool_call(data: Any) -> Iterator[str]:
    if isinstance(data, dict):
        yield _string(data.get("name"))
        yield _string(data.get("arguments"))


def _tool_result(data: Any) -> Iterator[str]:
    yield from _blocks(_message_content(data))
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict):
        yield _string(error.get("name"))
        yield _string(error.get("code"))


def _todos(data: Any) -> Iterator[str]:
    todos = data.get("todos") if isinstance(data, dict) else None
    if not isinstance(todos, list | tuple):
        return
    for todo in todos:
        if isinstance(todo, dict):
            yield _string(todo.get("status"))
            yield _string(todo.get("content"))


def _turn_end(data: Any) -> Iterator[str]:
    reason = data.get("reason") if isinstance(data, dict) else None
    kind = reason.get("kind") if isinstance(reason, dict) else None
    if kind == "error":
        yield "error"
        failure = reason.get("error") if isinstance(reason, dict) else None
        yield _string(failure.get("message")) if isinstance(failure, dict) else _string(failure)
    elif kind in ("aborted", "max-tokens", "interrupted"):
        yield kind


_EXTRACTORS: dict[str, Callable[[Any], Iterator[str]]] = {
    "user/message": _user,
    "assistant/message": _assistant,
    "tool/call": _tool_call,
    "tool/result": _tool_result,
    "todo/write": _todos,
    "turn/end": _turn_end,
}
"""The event types that hold text; every other type holds none."""

TEXT_EVENT_TYPES = frozenset(_EXTRACTORS)


def text_of(event_type: str, data: Any) -> str:
    """The searchable text of an event given as its type and (plain or frozen) ``data``; ``""`` for none."""
    extract = _EXTRACTORS.get(event_type)
    if extract is None:
        return ""
    return "\n".join(part for raw in extract(data) if (part := raw.strip()))


def event_text(event: SessionEvent) -> str:
    """The searchable text of ``event`` (see the module docstring); ``""`` when it holds none."""
    return text_of(event.type, event.data)


def indexable_text(text: str) -> str:
    """``text`` as an index stores it: its first :data:`MAX_INDEXED_CHARS` code points, NUL as a space and
    lone surrogates as U+FFFD (neither can be stored as database text, and neither is a word)."""
    text = text[:MAX_INDEXED_CHARS]
    if "\x00" in text:
        text = text.replace("\x00", " ")
    if not text.isascii():
        text = _SURROGATE.sub("\ufffd", text)
    return text
