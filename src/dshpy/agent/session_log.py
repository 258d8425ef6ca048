"""dsh's session-log upload to DeepSeek, and the ``session-log-deepseek/delivery-accepted`` it logs.

dsh 0.2.1's DeepSeek adapter adds a non-Anthropic field to every Messages request,
``dsh_session_log``: the session's events since the last upload DeepSeek accepted::

    {"version": 1, "sessionFormatVersion": 4,
     "session": {version, id, createdAt, cwd?, parentSession?, seedLength?, origin?, delegationDepth?, agentPreset?},
     "afterSeq": <last accepted seq, -1 at first>, "throughSeq": <last seq sent>,
     "events": [{seq, time, data, ignorable?, type, surfaceOp?, sourceEventSeqs?}, …]}

When the server answers the request with a success status — before any of the
answer streams — the runtime appends ``session-log-deepseek/delivery-accepted
{sessionId, sessionFormatVersion, throughSeq}``, so it lands just before the step's
``assistant/message`` (or ``assistant/attempt``). The watermark lives in the log
itself: after a crash or in another process the next request resends everything
after the highest accepted ``throughSeq`` of the same format version and session
(a fork's inherited marker names its parent and does not count). A failed request
appends nothing and its events go again with the next one.

The field is capped at :data:`MAX_BYTES` (dsh's 8 MiB default): events that would
push it over are left for later requests, and a single event too large to ever fit
blocks the upload at that event (logged once), never the model request.

dshpy sends it only where dsh does — the Messages API client
(:class:`~dshpy.llm.anthropic.AnthropicClient`, provider ``deepseek-official``) — and
only when the agent is told to (``Agent(upload_session_log=True)``; ``dshpy-runtime``
does, as dsh does, unless ``DSHPY_SESSION_LOG_UPLOAD=0``): it hands the provider the
whole session (tool outputs, paths) beyond the messages the model needs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import orjson

from dshpy.core.events import SessionEvent
from dshpy.core.json import dumps
from dshpy.log.records import delivery_accepted_data
from dshpy.log.session import Session

__all__ = ["ACCEPTED_TYPE", "FIELD", "MAX_BYTES", "SessionLogUpload", "accepted_through", "wire_event"]

log = logging.getLogger("dshpy.agent.session_log")

FIELD = "dsh_session_log"
ACCEPTED_TYPE = "session-log-deepseek/delivery-accepted"
MAX_BYTES = 8 * 1024 * 1024
_WIRE_VERSION = 1


def wire_event(event: SessionEvent) -> dict[str, Any]:
    """One event as the upload carries it (dsh's ``wireEvent``: ``seq``, ``time``, ``data`` first)."""
    wire: dict[str, Any] = {"seq": event.seq, "time": event.time, "data": event.data}
    if event.ignorable:
        wire["ignorable"] = True
    wire["type"] = event.type
    if event.surface_op is not None:
        op = event.surface_op
        wire["surfaceOp"] = op if isinstance(op, str) else op.to_wire()
    if event.source_event_seqs is not None:
        wire["sourceEventSeqs"] = list(event.source_event_seqs)
    return wire


def _wire_header(session: Session) -> dict[str, Any]:
    header = session.header
    wire: dict[str, Any] = {"version": header.version, "id": header.id, "createdAt": header.created_at}
    if header.cwd is not None:
        wire["cwd"] = header.cwd
    if header.parent_session is not None:
        wire["parentSession"] = header.parent_session
    if header.is_seeded:
        wire["seedLength"] = session.inherited_event_count
    if header.origin is not None:
        wire["origin"] = header.origin
    wire["delegationDepth"] = header.delegation_depth
    if header.agent_preset is not None:
        wire["agentPreset"] = header.agent_preset
    return wire


def _accepted(event: SessionEvent, session: Session) -> int | None:
    """The seq an acceptance marker of this session and format vouches for, else ``None``."""
    data = event.data
    if not isinstance(data, dict) or data.get("sessionFormatVersion", 0) != session.header.version:
        return None
    through = data.get("throughSeq")
    if data.get("sessionId") != session.id or not isinstance(through, int) or not 0 <= through < event.seq:
        return None
    return through


def accepted_through(session: Session, start: int = 0, through: int = -1) -> int:
    """The highest seq DeepSeek accepted for ``session`` (``-1``: none), folding events from ``start`` on."""
    events = session.events
    for seq in range(start, len(events)):
        event = events[seq]
        if event.type == ACCEPTED_TYPE:
            accepted = _accepted(event, session)
            if accepted is not None and accepted > through:
                through = accepted
    return through


class SessionLogUpload:
    """Per agent: what the next request uploads, and the marker its acceptance appends."""

    def __init__(self, session: Session, *, max_bytes: int = MAX_BYTES) -> None:
        if max_bytes < 1:
            raise ValueError("max_bytes must be positive")
        self.session = session
        self.max_bytes = max_bytes
        self._scanned = 0
        self._through = -1
        self._blocked_at: int | None = None

    def watermark(self) -> int:
        """The highest accepted seq (incremental: only events since the last call are read)."""
        self._through = accepted_through(self.session, self._scanned, self._through)
        self._scanned = len(self.session.events)
        return self._through

    def prepare(self) -> tuple[dict[str, Any], Callable[[], SessionEvent]] | None:
        """The field's value and the acceptance to call on success; ``None`` when nothing fits or is new."""
        session = self.session
        after = self.watermark()
        envelope: dict[str, Any] = {
            "version": _WIRE_VERSION,
            "sessionFormatVersion": session.header.version,
            "session": _wire_header(session),
            "afterSeq": after,
        }
        size = len(dumps({**envelope, "throughSeq": 0, "events": []})) - 1
        wired: list[dict[str, Any]] = []
        events = session.events
        candidate = 0
        for seq in range(after + 1, len(events)):
            wire = wire_event(events[seq])
            try:
                grown = size + (1 if wired else 0) + len(dumps(wire))
            except (TypeError, orjson.JSONEncodeError):  # pragma: no cover - logged data is JSON by construction
                grown = candidate = self.max_bytes + 1
            candidate = grown + len(str(seq))
            if candidate > self.max_bytes:
                break
            size = grown
            wired.append(wire)
        if not wired:
            first = after + 1
            if first < len(events) and self._blocked_at != first:
                self._blocked_at = first
                log.warning(
                    'session-log upload: event %d of session "%s" needs a %d-byte %s field, above the %d-byte '
                    "cap; the upload stays at that event",
                    first,
                    session.id,
                    candidate,
                    FIELD,
                    self.max_bytes,
                )
            return None
        through = wired[-1]["seq"]
        value = {**envelope, "throughSeq": through, "events": wired}

        def accept() -> SessionEvent:
            return session.append(ACCEPTED_TYPE, delivery_accepted_data(session.id, session.header.version, through))

        return value, accept
