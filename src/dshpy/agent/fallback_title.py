"""dsh's deterministic first-prompt title: the ``session/title`` with source ``fallback``.

dsh's title service appends it once, as soon as a session without a title has a
human prompt (a ``user/message`` whose source kind is ``user`` and whose text is not
empty once cleaned), citing that prompt in ``messageSeqs``; in the loop that lands
just before the step's model request (after ``request/context``). The text is the
prompt cleaned for a terminal (escape sequences, control and directional characters
removed, whitespace runs made one space), its first :data:`MAX_WORDS` words, cut to
:data:`MAX_BYTES` bytes of UTF-8 between code points, with trailing spaces dropped —
dsh's ``fallbackSessionTitle`` with the ``sdk`` profile's limits (5 words, 40 bytes).

This is the *logged* title, which dsh and its list show. dshpy's ``title``
projection (:mod:`dshpy.projections.builtins.title`) still derives a longer display
title for sessions that never got one; once this event exists it wins there too.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from dshpy.core.events import SessionEvent
from dshpy.log.records import title_data

__all__ = ["MAX_BYTES", "MAX_WORDS", "clean_title_text", "fallback_title", "fallback_title_data"]

MAX_WORDS = 5
MAX_BYTES = 40

_OSC = re.compile(r"(?:\x1b\]|\x9d)(?:(?!\x07|\x1b\\)[\s\S])*(?:\x07|\x1b\\|$)")
_CSI = re.compile(r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]")
_ESC = re.compile(r"\x1b[@-_]")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_DIRECTIONAL = re.compile(r"[\u200b\u200e\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff]")
_SPACE = re.compile(r"\s+")


def clean_title_text(text: str) -> str:
    """One trimmed line without escape sequences, controls or directional marks (dsh's ``cleanTitleText``)."""
    for pattern in (_OSC, _CSI, _ESC, _CONTROL, _DIRECTIONAL):
        text = pattern.sub("", text)
    return _SPACE.sub(" ", text).strip()


def _truncate_utf8(text: str, max_bytes: int) -> str:
    if len(text.encode()) <= max_bytes:
        return text
    used = 0
    out = []
    for char in text:
        size = len(char.encode("utf-8", "surrogatepass"))
        if used + size > max_bytes:
            break
        out.append(char)
        used += size
    return "".join(out)


def fallback_title(text: str, *, max_words: int = MAX_WORDS, max_bytes: int = MAX_BYTES) -> str:
    """The first ``max_words`` words of ``text``, cleaned, within ``max_bytes`` (``""`` if nothing is left)."""
    if max_words < 1 or max_bytes < 1:
        raise ValueError("max_words and max_bytes must be positive")
    words = [word for word in clean_title_text(text).split(" ") if word]
    return _truncate_utf8(" ".join(words[:max_words]), max_bytes).rstrip()


def _prompt_text(event: SessionEvent) -> str | None:
    """The text of a human prompt that can name the session, else ``None``."""
    if event.type != "user/message":
        return None
    data = event.data
    source = data.get("source")
    if not isinstance(source, dict) or source.get("kind") != "user":
        return None
    content = data.get("content")
    if not isinstance(content, list):
        return None
    text = "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text")
    return text if clean_title_text(text) else None


def fallback_title_data(events: Iterable[SessionEvent]) -> dict[str, Any] | None:
    """``session/title`` data to append, or ``None``: the log has a title already, or no prompt to make one from."""
    first: tuple[int, str] | None = None
    for event in events:
        if event.type == "session/title":
            return None
        if first is None and (text := _prompt_text(event)) is not None:
            first = (event.seq, text)
    if first is None:
        return None
    title = fallback_title(first[1])
    return title_data(title, [first[0]], "fallback") if title else None
