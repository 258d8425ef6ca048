"""Derived model messages and the read-only sequence views the session hands out.

A :class:`Message` is a thin handle on the frozen message object stored inside an
event: deriving never copies content, and the same object is shared by every
history that contains it. :class:`LogView` is an immutable snapshot over an
append-only list (the list only ever grows, so a fixed length is a snapshot), which
is what makes ``events`` and ``derive_messages()`` O(1) per call.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast, overload

from dshpy.core.events import SessionEvent
from dshpy.core.json import JsonValue, thaw

__all__ = ["LogView", "Message", "message_of"]

T = TypeVar("T")


_REPR_TEXT = 60
"""Characters of a message's text its repr shows."""
_REPR_ITEMS = 20
"""Items a :class:`LogView`'s repr shows before it says how many more there are."""


@dataclass(frozen=True, slots=True, repr=False)
class Message:
    """One model-visible message, derived from the surface event at ``seq``."""

    seq: int
    data: JsonValue
    """The stored (frozen) message object: ``{id, role, content, source, ...}``."""

    @property
    def id(self) -> str:
        return str(self.data["id"])

    @property
    def role(self) -> str:
        return str(self.data["role"])

    @property
    def content(self) -> Sequence[Any]:
        content: Sequence[Any] = self.data["content"]
        return content

    @property
    def source(self) -> Any:
        return self.data["source"]

    @property
    def text(self) -> str:
        """The concatenated ``text`` blocks (reasoning and tool calls excluded)."""
        return "".join(block["text"] for block in self.content if block.get("type") == "text")

    def to_dict(self) -> dict[str, Any]:
        """A plain, mutable copy of the message object."""
        result: dict[str, Any] = thaw(self.data)
        return result

    def __repr__(self) -> str:
        """``Message(seq=2, role='user', text='hi')``: what a person needs at a prompt, not the frozen JSON."""
        try:
            text = self.text
            parts = [f"seq={self.seq}", f"role={self.role!r}"]
            calls = [str(block.get("name")) for block in self.content if block.get("type") == "tool-call"]
        except (KeyError, TypeError, AttributeError):  # not a well-formed message object: show what is there
            return f"Message(seq={self.seq}, data={thaw(self.data)!r})"
        if text or not calls:
            shown = text if len(text) <= _REPR_TEXT else text[: _REPR_TEXT - 1] + "…"
            parts.append(f"text={shown!r}")
        if calls:
            parts.append(f"tool_calls={calls!r}")
        return f"Message({', '.join(parts)})"


def message_of(event: SessionEvent) -> Message | None:
    """The message an event derives to, or ``None`` (dsh's ``deriveEventMessage``).

    Non-surface events (attempts, boundaries, records) and system, developer or
    assistant messages with empty content produce nothing.
    """
    kind = event.type
    if event.surface_op is None:
        return None
    if kind == "user/message":
        return Message(event.seq, event.data)
    if kind == "tool/result":
        return Message(event.seq, event.data["message"])
    if kind in ("system/message", "developer/message", "assistant/message"):
        message = event.data["message"]
        return Message(event.seq, message) if message["content"] else None
    return None


class LogView(Sequence[T], Generic[T]):
    """A read-only, fixed-length snapshot of an append-only list."""

    __slots__ = ("_items", "_length")

    def __init__(self, items: Sequence[T], length: int | None = None) -> None:
        """``items`` is a list, or a list-like that only grows and slices into lists (a lazily read log)."""
        self._items = items
        self._length = len(items) if length is None else length

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> list[T]: ...
    def __getitem__(self, index: int | slice) -> T | list[T]:
        if isinstance(index, slice):
            return cast("list[T]", self._items[slice(*index.indices(self._length))])  # copies the slice only
        if index < 0:
            index += self._length
        if not 0 <= index < self._length:
            raise IndexError("view index out of range")
        return self._items[index]

    def __iter__(self) -> Iterator[T]:
        items = self._items
        for index in range(self._length):
            yield items[index]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, LogView | list | tuple):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    def __hash__(self) -> int:
        raise TypeError("unhashable type: 'LogView'")

    def __repr__(self) -> str:
        shown = ", ".join(repr(item) for item in self[:_REPR_ITEMS])
        more = self._length - _REPR_ITEMS
        return f"LogView([{shown}{f', … {more} more' if more > 0 else ''}])"
