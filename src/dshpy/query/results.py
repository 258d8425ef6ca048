"""What the query service answers: pages of sessions, log entries, windows, traces and search hits.

Each is a frozen value with a ``to_dict()`` giving its JSON form (camelCase keys, as
:meth:`~dshpy.storage.records.SessionInfo.to_dict` and dsh's wire use), which is what
the JSON-RPC methods, the CLI's ``--json`` and the agent's tools print.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from dshpy.core.events import SessionEvent
from dshpy.core.json import JsonValue, thaw
from dshpy.query.snippets import Snippet
from dshpy.storage.records import SessionInfo

__all__ = [
    "EventTrace",
    "EventWindow",
    "LineageNode",
    "LineageTrace",
    "LogEntry",
    "LogPage",
    "SearchHit",
    "SearchPage",
    "SessionPage",
    "SessionSummary",
    "SessionView",
    "Surface",
]

Surface = Literal["current", "shadowed", "log-only"]
"""Where an event stands: on the model's surface now, replaced on it, or never a surface event."""


@dataclass(frozen=True, slots=True)
class SessionSummary:
    """One session of a listing: its stored info and what its projections say (title, state, turns, models)."""

    info: SessionInfo
    title: str | None = None
    state: str | None = None
    """The lifecycle state (``created``, ``active``, ``paused``, ``completed``, ``failed``, ``archived``)."""
    turns: int | None = None
    models: tuple[str, ...] = ()
    """Every model the session called (successful calls and failed attempts), in order of first use."""
    error: str | None = None
    """Why the projections could not be read (a damaged log); the other fields are then empty."""

    @property
    def id(self) -> str:
        return self.info.id

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.info.to_dict(),
            "title": self.title,
            "state": self.state,
            "turns": self.turns,
            "models": list(self.models),
            "error": self.error,
        }


@dataclass(frozen=True, slots=True)
class SessionPage:
    """A page of sessions; ``next_cursor`` continues after it (``None``: this was the last page)."""

    sessions: list[SessionSummary]
    next_cursor: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"sessions": [s.to_dict() for s in self.sessions], "nextCursor": self.next_cursor}


@dataclass(frozen=True, slots=True)
class SessionView:
    """One session inspected: its info and every registered projection's value as of ``as_of_seq``."""

    info: SessionInfo
    as_of_seq: int
    projections: dict[str, JsonValue]

    def to_dict(self) -> dict[str, Any]:
        return {**self.info.to_dict(), "asOfSeq": self.as_of_seq, "projections": thaw(self.projections)}


@dataclass(frozen=True, slots=True)
class LogEntry:
    """A stored event and where it stands on the surface."""

    event: SessionEvent
    surface: Surface

    def to_dict(self) -> dict[str, Any]:
        return {"event": thaw(self.event.to_wire()), "surface": self.surface}


@dataclass(frozen=True, slots=True)
class LogPage:
    """Entries of one log in seq order; ``next_seq`` is where to read on (``None``: the log ended)."""

    session_id: str
    entries: list[LogEntry]
    next_seq: int | None

    def to_dict(self) -> dict[str, Any]:
        return {"sessionId": self.session_id, "entries": [e.to_dict() for e in self.entries], "nextSeq": self.next_seq}


@dataclass(frozen=True, slots=True)
class EventWindow:
    """One event with up to ``before`` events ahead of it and ``after`` behind, as stored (``start_seq..end_seq``)."""

    session_id: str
    target: LogEntry
    entries: list[LogEntry]
    start_seq: int
    end_seq: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "sessionId": self.session_id,
            "target": self.target.to_dict(),
            "entries": [e.to_dict() for e in self.entries],
            "startSeq": self.start_seq,
            "endSeq": self.end_seq,
        }


@dataclass(frozen=True, slots=True)
class EventTrace:
    """An event's relationships: what replaced it on the surface, what it replaced, what it cites and is cited by.

    ``replacement_chain`` follows replacements to the event now standing in its place
    (nested compaction replaces a replacement); ``replaced_event_seqs`` are the nodes
    this event took off the surface; ``source_event_seqs`` what it cites
    (``sourceEventSeqs``); ``derived_event_seqs`` the later events citing it.
    """

    session_id: str
    target: LogEntry
    replaced_by: int | None
    replacement_chain: tuple[int, ...]
    replaced_event_seqs: tuple[int, ...]
    source_event_seqs: tuple[int, ...]
    derived_event_seqs: tuple[int, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "sessionId": self.session_id,
            "target": self.target.to_dict(),
            "replacedBy": self.replaced_by,
            "replacementChain": list(self.replacement_chain),
            "replacedEventSeqs": list(self.replaced_event_seqs),
            "sourceEventSeqs": list(self.source_event_seqs),
            "derivedEventSeqs": list(self.derived_event_seqs),
        }


@dataclass(frozen=True, slots=True)
class LineageNode:
    """A fork and the forks made from it, oldest first."""

    session: SessionInfo
    forks: tuple[LineageNode, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"session": self.session.to_dict(), "forks": [f.to_dict() for f in self.forks]}


@dataclass(frozen=True, slots=True)
class LineageTrace:
    """A session's ancestors (parent first) and its forks, recursively.

    ``complete`` unless an ancestor is not in the store (then ``unresolved_parent``
    names the first missing one and ``root`` is ``None``).
    """

    target: SessionInfo
    ancestors: tuple[SessionInfo, ...]
    descendants: tuple[LineageNode, ...]
    root: SessionInfo | None
    unresolved_parent: str | None

    @property
    def complete(self) -> bool:
        return self.unresolved_parent is None

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target.to_dict(),
            "ancestors": [a.to_dict() for a in self.ancestors],
            "descendants": [d.to_dict() for d in self.descendants],
            "complete": self.complete,
            "root": None if self.root is None else self.root.to_dict(),
            "unresolvedParentId": self.unresolved_parent,
        }


@dataclass(frozen=True, slots=True)
class SearchHit:
    """A matching event: where to read it (``session_id``, ``seq``), its rank and a highlighted snippet."""

    session_id: str
    seq: int
    type: str
    time: int
    score: float
    """Higher is better; comparable within one search only (each backend ranks on its own scale)."""
    snippet: Snippet

    def to_dict(self) -> dict[str, Any]:
        return {
            "sessionId": self.session_id,
            "seq": self.seq,
            "type": self.type,
            "time": self.time,
            "score": self.score,
            "snippet": self.snippet.to_dict(),
        }


@dataclass(frozen=True, slots=True)
class SearchPage:
    """Hits, best first; ``next_cursor`` continues after them (``None``: no more)."""

    hits: list[SearchHit]
    next_cursor: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"hits": [h.to_dict() for h in self.hits], "nextCursor": self.next_cursor}
