"""What ``sessions list`` shows beside the store's :class:`~dshpy.SessionInfo`: turns, title, first prompt.

These are read from the log, but only the few event types they need: a store that
can filter by type (:class:`TypedEventReader`, e.g. SQLite) is asked for just those
rows, so listing stays fast however long the sessions are; any other store is read
in full and filtered here.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from dshpy.core.events import SessionEvent
from dshpy.storage.base import BaseStore, SessionInfo

__all__ = ["PROMPT_PREVIEW_CHARS", "SessionSummary", "TypedEventReader", "read_types", "summarize"]

PROMPT_PREVIEW_CHARS = 120
"""First prompts are cut to this many characters (whitespace collapsed)."""


@runtime_checkable
class TypedEventReader(Protocol):
    """A store that can stream only the events of some types."""

    def read_types(self, session_id: str, types: Collection[str], from_seq: int = 0) -> Iterator[SessionEvent]: ...


def read_types(store: BaseStore, session_id: str, types: Collection[str], from_seq: int = 0) -> Iterator[SessionEvent]:
    """The events of ``types`` in seq order, filtered by the store when it can."""
    if isinstance(store, TypedEventReader):
        return store.read_types(session_id, types, from_seq)
    wanted = frozenset(types)
    return (event for event in store.read(session_id, from_seq) if event.type in wanted)


def preview(text: str, limit: int = PROMPT_PREVIEW_CHARS) -> str:
    """``text`` on one line, cut to ``limit`` characters with an ellipsis."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def message_text(message: Any) -> str:
    """The concatenated text blocks of a stored message object."""
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list):
        return ""
    return "".join(
        block["text"]
        for block in content
        if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str)
    )


def is_user_prompt(event: SessionEvent) -> bool:
    """A ``user/message`` a person typed (source kind ``user``), not a checkpoint or runtime note."""
    data: Any = event.data
    source = data.get("source") if isinstance(data, dict) else None
    return event.type == "user/message" and isinstance(source, dict) and source.get("kind") == "user"


@dataclass(frozen=True, slots=True)
class SessionSummary:
    """One row of ``sessions list``."""

    info: SessionInfo
    turns: int
    title: str | None
    first_prompt: str | None
    error: str | None = None
    """Why the log could not be summarized (the row still shows what the store knows)."""

    @property
    def label(self) -> str:
        """The title, else the first prompt, else empty."""
        return self.title or self.first_prompt or ""

    def to_dict(self) -> dict[str, Any]:
        result = self.info.to_dict()
        result.update(turns=self.turns, title=self.title, firstPrompt=self.first_prompt)
        if self.error is not None:
            result["error"] = self.error
        return result


def summarize(store: BaseStore, info: SessionInfo) -> SessionSummary:
    """Count turns and find the latest title and the first prompt, reading only those events."""
    turns = 0
    title: str | None = None
    for event in read_types(store, info.id, ("turn/start", "session/title")):
        if event.type == "turn/start":
            turns += 1
        else:
            data: Any = event.data
            if isinstance(data.get("title"), str):
                title = preview(data["title"]) or None
    first_prompt: str | None = None
    for event in read_types(store, info.id, ("user/message",)):
        if is_user_prompt(event):
            first_prompt = preview(message_text(event.data))
            break
    return SessionSummary(info, turns, title, first_prompt)
