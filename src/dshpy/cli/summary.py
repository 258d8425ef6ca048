"""What ``sessions list`` shows beside the store's :class:`~dshpy.SessionInfo`, and typed event reads.

A list row's turns, title and lifecycle state are projections (``stats``, ``title``,
``lifecycle``) read from the store's projection cache: a session whose cached rows are
at the end of its log costs no event reads at all; others fold only the events after
their rows (:meth:`~dshpy.SessionStore.list_projections`).

:func:`read_types` streams only the events of some types (SQLite and PostgreSQL filter
them in SQL; other stores filter a full read).
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import dataclass
from typing import Any

from dshpy.core.events import SessionEvent
from dshpy.storage.contract import SessionStore
from dshpy.storage.projection_cache import SessionProjections
from dshpy.storage.records import SessionInfo

__all__ = ["LIST_KEYS", "PROMPT_PREVIEW_CHARS", "SessionSummary", "read_types", "summary_of"]

PROMPT_PREVIEW_CHARS = 120
"""First prompts are cut to this many characters (whitespace collapsed)."""


def read_types(
    store: SessionStore, session_id: str, types: Collection[str], from_seq: int = 0
) -> Iterator[SessionEvent]:
    """The events of ``types`` in seq order (database stores filter them in SQL)."""
    return store.read_types(session_id, types, from_seq)


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


@dataclass(frozen=True, slots=True)
class SessionSummary:
    """One row of ``sessions list``: what the store knows, plus cached projection values."""

    info: SessionInfo
    turns: int
    title: str | None
    """The ``title`` projection: the latest ``session/title``, else a fallback from the first prompt."""
    title_source: str | None = None
    """``event`` (a ``session/title``), ``prompt`` (the first prompt's fallback) or ``None``."""
    lifecycle: str | None = None
    """The ``lifecycle`` projection's state (``created``, ``active``, …)."""
    last_outcome: str | None = None
    """How the last turn ended (the ``stats`` projection's ``last_outcome``: ``completed``, ``error``, …)."""
    error: str | None = None
    """Why the log could not be summarized (the row still shows what the store knows)."""

    @property
    def label(self) -> str:
        """The title (or the first prompt's fallback), else empty."""
        return self.title or ""

    def to_dict(self) -> dict[str, Any]:
        result = self.info.to_dict()
        result.update(
            turns=self.turns,
            title=self.title,
            titleSource=self.title_source,
            lifecycle=self.lifecycle,
            lastTurn=self.last_outcome,
        )
        if self.error is not None:
            result["error"] = self.error
        return result


LIST_KEYS = ("title", "stats", "lifecycle")
"""The projections a ``sessions list`` row shows."""


def _str(value: Any, name: str) -> str | None:
    found = value.get(name) if isinstance(value, dict) else None
    return found if type(found) is str else None


def summary_of(listed: SessionProjections) -> SessionSummary:
    """A list row from :meth:`SessionStore.list_projections` values of :data:`LIST_KEYS`.

    Values of up-to-date cache rows are served as stored, so every field is
    type-checked here rather than trusted.
    """
    if listed.error is not None:
        return SessionSummary(listed.info, 0, None, error=listed.error)
    values = listed.values
    shown = values.get("title")
    title = _str(shown, "title")
    source = _str(shown, "source")
    stats = values.get("stats")
    turns = stats.get("turns") if isinstance(stats, dict) else None
    state = _str(values.get("lifecycle"), "state")
    return SessionSummary(
        listed.info,
        turns if type(turns) is int else 0,
        preview(title) if title else None,
        source if title else None,
        state,
        _str(stats, "lastOutcome"),
    )
