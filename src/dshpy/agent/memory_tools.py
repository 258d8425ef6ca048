"""The agent's memory: ``session_search`` and ``session_read``, tools over the store's past sessions.

An agent that can look up what was said in earlier sessions (an error already
diagnosed, a decision already taken) need not be told again. The tools are thin over
:class:`~dshpy.query.SessionQuery` and are off unless asked for
(:func:`memory_tools`, ``dshpy run --memory``, a profile's ``memory = true``):

* they see the sessions of the current session's working directory (``scope="cwd"``,
  the default: one project's memory, not every project's), or the whole store
  (``scope="all"``);
* the current session is never among the search results: what it said is already on
  the model's surface, and finding it again would only echo the conversation back;
* results are short and cited, ``[session#seq]`` before each snippet, so the model
  can quote where a fact came from and open it with ``session_read``; the ``meta``
  logged beside each result lists the cited ``(sessionId, seq)`` pairs for tooling.

A refused request (an empty query, a session out of scope, a seq past the end) is an
error result naming the problem, so the model can correct its call.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from dshpy.core.ids import check_session_id
from dshpy.errors import DshError
from dshpy.log.event_text import event_text
from dshpy.query import QueryError, SearchPage, SessionQuery
from dshpy.query.results import EventWindow, LogEntry
from dshpy.storage.contract import SessionStore

from .tools import Tool, ToolContext, ToolOutput

__all__ = ["MEMORY_SCOPES", "MemoryScope", "memory_tools"]

MemoryScope = Literal["cwd", "all"]
MEMORY_SCOPES: tuple[MemoryScope, ...] = ("cwd", "all")
_EVENT_CHARS = 600
"""Text shown of one event by ``session_read`` (the model asks for more context by widening the window)."""


def _one_line(text: str, limit: int = _EVENT_CHARS) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def _refused(error: QueryError) -> ToolOutput:
    return ToolOutput(f"Error: {error} ({error.code})", is_error=True)


class _Memory:
    """The store and scope both tools share, and what each answers."""

    def __init__(self, store: SessionStore, scope: MemoryScope) -> None:
        if scope not in MEMORY_SCOPES:
            raise ValueError(f"memory scope {scope!r} is not one of {', '.join(MEMORY_SCOPES)}")
        self.query = SessionQuery(store)
        self.store = store
        self.scope = scope

    def _where(self, context: ToolContext) -> tuple[dict[str, Any], str]:
        """The session filter of the scope, and how to say it to the model."""
        session = context.session
        filters: dict[str, Any] = {"exclude_ids": [session.id]}
        if self.scope == "all":
            return filters, "all sessions"
        cwd = session.header.cwd
        filters["cwd"] = [cwd]
        return filters, f"sessions in {cwd}" if cwd else "sessions without a working directory"

    def search(self, context: ToolContext, query: str, limit: int, types: list[str] | None) -> ToolOutput:
        filters, where = self._where(context)
        try:
            page = self.query.search(query, filters=filters, types=types or None, limit=limit)
        except QueryError as error:
            return _refused(error)
        return ToolOutput(_hits_text(page, query, where), meta={"hits": [[h.session_id, h.seq] for h in page.hits]})

    def read(self, context: ToolContext, session_id: str, seq: int, before: int, after: int) -> ToolOutput:
        try:
            check_session_id(session_id)
        except DshError:
            return ToolOutput(f"Error: {session_id!r} is not a session id (cite one of session_search)", is_error=True)
        if self.scope == "cwd" and session_id != context.session.id:
            cwd = context.session.header.cwd
            if not self.store.exists(session_id) or self.store.stat(session_id).cwd != cwd:
                return ToolOutput(f"Error: no session {session_id!r} among the sessions in {cwd}", is_error=True)
        try:
            window = self.query.read_event(session_id, seq, before=before, after=after)
        except QueryError as error:
            return _refused(error)
        return ToolOutput(
            _window_text(window), meta={"session": session_id, "seqs": [window.start_seq, window.end_seq]}
        )


def _hits_text(page: SearchPage, query: str, where: str) -> str:
    if not page.hits:
        return f"No matches for {query!r} in {where} (this session left out)."
    lines = [
        f"{len(page.hits)} match(es) for {query!r} in {where} (this session left out), best first. "
        "Cite as [session#seq]; open one with session_read."
    ]
    for hit in page.hits:
        snippet = hit.snippet.marked(before="«", after="»")
        lines.append(f"[{hit.session_id}#{hit.seq}] {hit.type}: {snippet}")
    if page.next_cursor is not None:
        lines.append("(more matches exist: narrow the query or raise limit)")
    return "\n".join(lines)


def _entry_line(entry: LogEntry, target: int) -> str:
    event = entry.event
    text = _one_line(event_text(event))
    mark = ">" if event.seq == target else " "
    note = " (replaced on that session's surface)" if entry.surface == "shadowed" else ""
    return f"{mark}#{event.seq} {event.type}{note}" + (f": {text}" if text else "")


def _window_text(window: EventWindow) -> str:
    target = window.target.event.seq
    head = f"Session {window.session_id}, events {window.start_seq}..{window.end_seq} (> marks #{target}):"
    return "\n".join([head, *(_entry_line(entry, target) for entry in window.entries)])


def memory_tools(store: SessionStore, *, scope: MemoryScope = "cwd") -> list[Tool]:
    """``session_search`` and ``session_read`` over ``store``, seeing ``scope`` (``"cwd"`` or ``"all"``).

    Pass them to :class:`~dshpy.agent.Agent` (``tools=[*memory_tools(store), …]``);
    they read the store the agent's session lives in, never writing to it.
    """
    memory = _Memory(store, scope)

    def session_search(
        context: ToolContext,
        query: str,
        limit: int = Field(5, ge=1, le=20),
        types: list[str] | None = None,
    ) -> ToolOutput:
        """Search what was said in earlier sessions (messages, tool calls and results, errors) by words.

        Args:
            query: Words to find, as one literal phrase (e.g. an error message or an identifier).
            limit: How many matches to return (1-20).
            types: Only events of these types, e.g. ["tool/result"] or ["user/message", "assistant/message"].
        """
        return memory.search(context, query, limit, types)

    def session_read(
        context: ToolContext,
        session_id: str,
        seq: int = Field(ge=0),
        before: int = Field(2, ge=0, le=20),
        after: int = Field(2, ge=0, le=20),
    ) -> ToolOutput:
        """Read an event of an earlier session with the events around it (after session_search found it).

        Args:
            session_id: The session of a cited match ([session#seq]).
            seq: The event's seq in that session.
            before: Events to show before it (0-20).
            after: Events to show after it (0-20).
        """
        return memory.read(context, session_id, seq, before, after)

    return [Tool(session_search), Tool(session_read)]
