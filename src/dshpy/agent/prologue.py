"""What gets logged before a model request: the system prompt, the request header, the route.

The model's request is rebuilt from the log, so everything that shapes it is logged
first, and only when it changes (dsh-v4 §3.8):

* **system prompt** — the session's first step reserves surface node 0 with a
  ``system/message`` (even an empty one); when the prompt text later differs, a new
  ``system/message`` replaces exactly that head (``{op: replace, startSeq: h, endSeq:
  h}``, citing ``[h]``). An unchanged prompt writes nothing, also after a resume.
* **request/header** — ``{config: {provider, model, maxTokens?, reasoningEffort?},
  tools?}``, logged at the first request of each loop instance (``initial`` when the
  log has no header yet, else ``resume``: a new process re-records its tool list),
  and afterwards only when it changes (``change``). Empty ``tools`` are omitted.
* **request/context** — ``{provider, model, contextWindow?}``, whenever one of them
  differs from the last one in the log (not re-logged on resume).
"""

from __future__ import annotations

from typing import Any

from dshpy.core.events import SessionEvent, SurfaceReplace
from dshpy.core.json import thaw
from dshpy.errors import DshError
from dshpy.log.continuation import system_head
from dshpy.log.records import message_text, request_header_data, system_data
from dshpy.log.session import Session

__all__ = ["AgentSetupError", "RequestPrologue", "system_head"]


class AgentSetupError(DshError):
    """The session cannot take this agent's configuration (e.g. no place for a system prompt)."""


def _last_context(session: Session) -> dict[str, Any] | None:
    for event in reversed(session.events):
        if event.type == "request/context":
            context: dict[str, Any] = thaw(event.data)
            return context
    return None


class RequestPrologue:
    """Per loop instance: appends the prologue events a request needs, in dsh's order."""

    def __init__(self, session: Session) -> None:
        self._session = session
        self._header_logged = False
        self._context = _last_context(session)

    def system_prompt(self, turn: int, step: int, text: str) -> SessionEvent | None:
        """Reserve or update the system head; ``None`` when nothing changed."""
        session = self._session
        head = system_head(session)
        if head is None:
            if session.surface_nodes:
                if not text:
                    return None
                raise AgentSetupError(
                    f'session "{session.id}" began without a system prompt, so none can be set now '
                    "(surface node 0 is already a message); fork before its first turn or start a new session"
                )
            return session.append("system/message", system_data(turn, step, text), surface_op="append")
        if message_text(head) == text:
            return None
        return session.append(
            "system/message",
            system_data(turn, step, text),
            surface_op=SurfaceReplace(head.seq, head.seq),
            source_event_seqs=[head.seq],
        )

    def header(self, header: dict[str, Any]) -> SessionEvent | None:
        """Log ``request/header`` if this instance has not yet, or if it changed."""
        session = self._session
        current = session.request_header()
        if not self._header_logged:
            reason = "initial" if current is None else "resume"
        elif current is not None and thaw(current) == header:
            return None
        else:
            reason = "change"
        self._header_logged = True
        return session.append("request/header", request_header_data(header, reason))

    def context(self, context: dict[str, Any]) -> SessionEvent | None:
        """Log ``request/context`` if the route differs from the last one logged."""
        if self._context == context:
            return None
        self._context = context
        return self._session.append("request/context", context)
