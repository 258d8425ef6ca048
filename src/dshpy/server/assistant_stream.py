"""Answers as they stream, relayed to whoever watches the session (the web UI's live view).

A model's answer reaches the log only once its attempt settles: ``assistant/message``
(or ``assistant/attempt`` for a failed try) with the packed stream. Until then the
only copy is the chunks the server's own agent receives. :class:`AssistantStreams`
hands them on as dsh's ``agent/assistant-stream`` frames (reference/dsh-v4.md §3.6):

* ``{"type": "start", "attemptId", "turn", "step", "attempt"}`` — a model call began streaming;
* ``{"type": "chunk", "attemptId", "index", "time", "chunk"}`` — one stream chunk (``text-delta``, …);
* ``{"type": "end", "attemptId", "outcome"}`` — ``{"kind": "committed", "eventType", "seq"}`` names the
  event that now holds the answer (a watcher drops its draft once that seq is durable and shown), or
  ``{"kind": "abandoned"}`` (the turn ended without it: cancelled, failed before the event).

Frames exist only while a turn streams; nothing here is stored, and nothing here is a
JSON-RPC notification (dsh's SDK server sends no token notifications either). A watcher
that arrives in the middle of an answer first gets the frames of the attempt so far.
Only turns this server runs are relayed: a session written by another process shows
its answers when they commit.

Everything runs on the server's event loop: the agent calls :meth:`chunk` and
:meth:`event` there, and watchers are called there (they must not block).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dshpy.agent import ChunkUpdate
from dshpy.core.events import SessionEvent
from dshpy.core.json import thaw

__all__ = ["MAX_REPLAY", "AssistantStreams", "Frame", "Watcher"]

log = logging.getLogger("dshpy.server")

Frame = dict[str, Any]
Watcher = Callable[[Frame], None]

MAX_REPLAY = 50_000
"""Chunks of one attempt kept for watchers who arrive late (beyond it they see the answer from where they came)."""

_SETTLING = ("assistant/message", "assistant/attempt")


@dataclass(slots=True)
class _Attempt:
    attempt_id: str
    turn: int
    step: int
    attempt: int
    frames: list[Frame] = field(default_factory=list)
    chunks: int = 0


class AssistantStreams:
    """The answers streaming in this server's sessions, and who watches which session."""

    def __init__(self) -> None:
        self._watchers: dict[str, list[Watcher]] = {}
        self._active: dict[str, _Attempt] = {}
        self._numbers = itertools.count(1)

    def watch(self, session_id: str, watcher: Watcher) -> Callable[[], None]:
        """Call ``watcher`` with the session's frames from now on (an answer in progress replayed first).

        Returns the function that stops it.
        """
        active = self._active.get(session_id)
        if active is not None:
            for frame in active.frames:
                watcher(frame)
        self._watchers.setdefault(session_id, []).append(watcher)

        def unwatch() -> None:
            watchers = self._watchers.get(session_id)
            if watchers is not None and watcher in watchers:
                watchers.remove(watcher)
                if not watchers:
                    del self._watchers[session_id]

        return unwatch

    def watched(self, session_id: str) -> bool:
        """Whether anybody watches ``session_id`` now."""
        return session_id in self._watchers

    def active(self, session_id: str) -> str | None:
        """The id of the attempt streaming in ``session_id``, if one is."""
        active = self._active.get(session_id)
        return None if active is None else active.attempt_id

    def chunk(self, session_id: str, update: ChunkUpdate) -> None:
        """The agent of ``session_id`` received ``update``: a chunk of the current attempt, or of a new one."""
        active = self._active.get(session_id)
        if active is None or (active.turn, active.step, active.attempt) != (update.turn, update.step, update.attempt):
            if active is not None:  # a new attempt without the old one's settling event
                self._end(session_id, {"kind": "abandoned"})
            active = _Attempt(f"{session_id}:{next(self._numbers)}", update.turn, update.step, update.attempt)
            self._active[session_id] = active
            self._send(
                session_id,
                active,
                {
                    "type": "start",
                    "attemptId": active.attempt_id,
                    "turn": update.turn,
                    "step": update.step,
                    "attempt": update.attempt,
                },
            )
        frame = {
            "type": "chunk",
            "attemptId": active.attempt_id,
            "index": active.chunks,
            "time": update.time,
            "chunk": update.chunk,
        }
        active.chunks += 1
        self._send(session_id, active, frame)

    def event(self, session_id: str, event: SessionEvent) -> None:
        """The agent of ``session_id`` appended ``event``: the answer's settling event ends its attempt."""
        active = self._active.get(session_id)
        if active is None:
            return
        if event.type in _SETTLING:
            data = thaw(event.data)
            if isinstance(data, dict) and (data.get("turn"), data.get("step")) == (active.turn, active.step):
                self._end(session_id, {"kind": "committed", "eventType": event.type, "seq": event.seq})
        elif event.type == "turn/end":
            self._end(session_id, {"kind": "abandoned"})

    def finish(self, session_id: str) -> None:
        """The session's turns stopped (its worker ended): an attempt still open is abandoned."""
        if session_id in self._active:
            self._end(session_id, {"kind": "abandoned"})

    def _end(self, session_id: str, outcome: dict[str, Any]) -> None:
        active = self._active.pop(session_id)
        self._send(session_id, None, {"type": "end", "attemptId": active.attempt_id, "outcome": outcome})

    def _send(self, session_id: str, active: _Attempt | None, frame: Frame) -> None:
        if active is not None and len(active.frames) < MAX_REPLAY:
            active.frames.append(frame)
        for watcher in list(self._watchers.get(session_id, ())):
            try:
                watcher(frame)
            except Exception:  # a broken watcher must not break the turn that streams
                log.exception("an assistant-stream watcher of %s failed", session_id)
