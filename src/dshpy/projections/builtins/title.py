"""``title``: what to call a session in a list.

The latest ``session/title`` wins (a provider's title, or one the user set). Until
there is one, the title is a deterministic fallback made from the first human prompt
— the first ``user/message`` whose source kind is ``user`` and whose text blocks
hold something printable — as dsh's title service does before its model answers:

1. ANSI escape sequences are removed, every whitespace run (newlines and tabs
   included) becomes one space, and the other control and format characters are
   dropped (zero-width joiners and non-joiners stay: emoji sequences and some
   scripts need them; lone surrogates go, they cannot be encoded);
2. the text is put in Unicode NFC, so a decomposed "é" costs what a composed one does;
3. the first :data:`MAX_WORDS` words are kept, within :data:`MAX_TITLE_BYTES` bytes
   of UTF-8; when anything was cut, "…" ends the title, inside the byte budget;
4. a single word longer than the budget is cut between grapheme clusters (never
   inside a code point, and never between a letter and its combining marks, inside
   an emoji ZWJ sequence or modifier, or between the two halves of a flag).

A prompt's text blocks are joined with spaces, and only their first
:data:`MAX_SCAN_CHARS` characters are looked at, so a huge pasted prompt costs no
more than a short one. Titles from ``session/title`` events get steps 1 and 2 and
are cut between graphemes at :data:`MAX_EVENT_TITLE_BYTES` (titles are shown in
terminals, where control characters are a hazard); an event whose title is empty
after that is ignored.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from typing import Any, Literal

from dshpy.core.events import SessionEvent
from dshpy.projections.definition import ProjectionDefinition, ProjectionState

__all__ = [
    "ELLIPSIS",
    "MAX_EVENT_TITLE_BYTES",
    "MAX_SCAN_CHARS",
    "MAX_TITLE_BYTES",
    "MAX_WORDS",
    "TITLE",
    "TitleState",
    "clean_text",
    "fallback_title",
    "truncate_utf8",
]

MAX_TITLE_BYTES = 80
"""UTF-8 byte budget of a fallback title, ellipsis included."""

MAX_WORDS = 12
"""Words a fallback title keeps at most."""

MAX_EVENT_TITLE_BYTES = 200
"""UTF-8 byte cap of a title taken from a ``session/title`` event."""

ELLIPSIS = "…"

MAX_SCAN_CHARS = 65_536
"""Only this many leading characters of a prompt or title are looked at (a title needs far fewer)."""

_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")
"""CSI (``ESC [ … final``), OSC (``ESC ] … BEL|ST``) and two-byte escape sequences."""

_KEEP_FORMAT = frozenset({"\u200c", "\u200d"})  # ZWNJ, ZWJ


class TitleState(ProjectionState):
    """The session's display title and where it came from."""

    title: str | None = None
    source: Literal["event", "prompt"] | None = None
    """``event``: a ``session/title``; ``prompt``: the fallback from the first human prompt."""
    seq: int | None = None
    """The event the title came from."""


def clean_text(text: str) -> str:
    """Steps 1–2 of the module docstring: no escapes or controls, single spaces, NFC, stripped."""
    text = _ANSI.sub("", text[:MAX_SCAN_CHARS])
    out: list[str] = []
    for char in text:
        if char.isspace():
            out.append(" ")
            continue
        category = unicodedata.category(char)
        if category in ("Cc", "Cs") or (category == "Cf" and char not in _KEEP_FORMAT):
            continue
        out.append(char)
    return unicodedata.normalize("NFC", " ".join("".join(out).split()))


def _is_extender(char: str) -> bool:
    """Whether ``char`` continues the grapheme cluster before it (a simplified UAX #29)."""
    code = ord(char)
    return (
        unicodedata.category(char) in ("Mn", "Me", "Mc")
        or char in _KEEP_FORMAT
        or 0xFE00 <= code <= 0xFE0F  # variation selectors
        or 0xE0100 <= code <= 0xE01EF
        or 0x1F3FB <= code <= 0x1F3FF  # emoji skin-tone modifiers
        or 0xE0020 <= code <= 0xE007F  # emoji tag sequences (subdivision flags)
    )


def _is_regional(char: str) -> bool:
    return 0x1F1E6 <= ord(char) <= 0x1F1FF


def _cluster_ends(text: str) -> Iterator[int]:
    """Indices after each grapheme cluster of ``text`` (the places a cut may fall)."""
    index = 0
    size = len(text)
    while index < size:
        char = text[index]
        index += 1
        if _is_regional(char) and index < size and _is_regional(text[index]):
            index += 1  # a flag is a pair of regional indicators
        while index < size:
            following = text[index]
            if not _is_extender(following):
                break
            index += 1
            if following == "\u200d" and index < size:
                index += 1  # ZWJ glues the next character on (emoji sequences)
        yield index


def _utf8_size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def truncate_utf8(text: str, max_bytes: int) -> str:
    """The longest prefix of ``text`` that fits ``max_bytes`` of UTF-8 and ends between grapheme clusters."""
    if _utf8_size(text) <= max_bytes:
        return text
    used = 0
    start = 0
    for end in _cluster_ends(text):
        used += _utf8_size(text[start:end])
        if used > max_bytes:
            break
        start = end
    return text[:start]


def fallback_title(text: str, *, max_bytes: int = MAX_TITLE_BYTES, max_words: int = MAX_WORDS) -> str | None:
    """A title from a prompt's text (steps 1–4 of the module docstring); ``None`` if nothing printable is left."""
    words = clean_text(text).split(" ")
    if words == [""]:
        return None
    whole = " ".join(words[:max_words])
    if len(words) <= max_words and _utf8_size(whole) <= max_bytes:
        return whole
    budget = max_bytes - _utf8_size(ELLIPSIS)
    kept: list[str] = []
    used = -1  # the first word needs no separating space
    for word in words[:max_words]:
        cost = _utf8_size(word) + 1
        if used + cost > budget:
            break
        kept.append(word)
        used += cost
    if not kept:  # the first word alone is over budget: cut it between clusters
        kept = [truncate_utf8(words[0], budget)]
    return " ".join(kept).rstrip() + ELLIPSIS


def _prompt_text(data: Any) -> str | None:
    if not isinstance(data, dict):
        return None
    source = data.get("source")
    if not isinstance(source, dict) or source.get("kind") != "user":
        return None
    content = data.get("content")
    if not isinstance(content, list):
        return None
    texts = [
        block["text"]
        for block in content
        if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str)
    ]
    return " ".join(texts)


def apply_title(state: TitleState, event: SessionEvent) -> TitleState:
    data = event.data
    if event.type == "session/title":
        raw = data.get("title") if isinstance(data, dict) else None
        if not isinstance(raw, str):
            return state
        title = truncate_utf8(clean_text(raw), MAX_EVENT_TITLE_BYTES).rstrip()
        if not title:
            return state
        return TitleState(title=title, source="event", seq=event.seq)
    if state.source is not None:  # user/message: only the first human prompt matters, and only without a title
        return state
    text = _prompt_text(data)
    fallback = fallback_title(text) if text else None
    if fallback is None:
        return state
    return TitleState(title=fallback, source="prompt", seq=event.seq)


TITLE: ProjectionDefinition[TitleState] = ProjectionDefinition(
    key="title",
    state_version=1,
    state_schema=TitleState,
    init=TitleState,
    apply=apply_title,
    types=frozenset({"session/title", "user/message"}),
)
"""The latest ``session/title``, else a bounded, cleaned fallback from the first human prompt."""
