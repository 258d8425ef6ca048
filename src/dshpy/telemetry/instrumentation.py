"""Telemetry while it is on: the instruments, the sessions traced, the agents observed — and how it all stops.

:class:`Telemetry` is what :func:`dshpy.telemetry.enable` builds (the only module of
the package, with those it imports, that needs OpenTelemetry). It registers with the
storage layer, which hands it the writer of every live session a store assembles
(:func:`dshpy.storage.live_session.observe_writers`), and with every
:class:`~dshpy.agent.Agent` built while it is on. Each session gets one
:class:`~dshpy.telemetry.session_trace.SessionTrace`, kept in a weak table keyed by the
session: it lives as long as its session and holds nothing that keeps the session alive.
"""

from __future__ import annotations

import contextlib
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, Status, StatusCode

from dshpy.log.session import Session, SessionWriter
from dshpy.storage.live_session import observe_writers
from dshpy.telemetry import names as n
from dshpy.telemetry.agent_hooks import AgentObserver
from dshpy.telemetry.content import ContentCapture, input_messages
from dshpy.telemetry.flushes import TracedWriter
from dshpy.telemetry.instruments import Instruments
from dshpy.telemetry.providers import Providers
from dshpy.telemetry.session_trace import SessionTrace

__all__ = ["Telemetry"]

_REMEMBERED_TURNS = 10_000
"""Sessions whose last turn span a fork made in this process can link to."""

_PROVIDERS = {
    "deepseek": "deepseek",
    "deepseek-official": "deepseek",
    "openai": "openai",
    "openai-compatible": "openai",
}
"""dshpy's provider names → the conventions' ``gen_ai.provider.name`` (an OpenAI-compatible server speaks openai's
API: ``server.address`` names the real one)."""


class Telemetry:
    """The active telemetry of the process: instruments, traced sessions, observed agents."""

    def __init__(
        self, providers: Providers, capture: ContentCapture, agent_name: str = "dshpy", *, per_event: bool = False
    ) -> None:
        self.providers = providers
        self.per_event = per_event
        self.instruments = Instruments(providers.tracer_provider, providers.meter_provider)
        self.capture = capture
        self.agent_name = agent_name
        self._lock = threading.RLock()  # a new trace looks up its fork parent under it
        self._traces: weakref.WeakKeyDictionary[Session, SessionTrace] = weakref.WeakKeyDictionary()
        self._observers: weakref.WeakSet[AgentObserver] = weakref.WeakSet()
        self._turns: OrderedDict[str, SpanContext] = OrderedDict()
        self._servers: dict[str, dict[str, Any]] = {}
        self._stop_observing = observe_writers(self._observe_writer)

    # -- sessions and agents ----------------------------------------------------------------------

    def trace_of(self, session: Session) -> SessionTrace:
        """The session's trace, made (and subscribed to its appends) on first use."""
        with self._lock:
            found = self._traces.get(session)
            if found is None:
                header = session.header
                found = SessionTrace(self, session.id, header.parent_session)
                found.detach = session.subscribe(found.on_event)
                self._traces[session] = found
            return found

    def _observe_writer(self, session: Session, writer: SessionWriter, backend: str) -> SessionWriter:
        return TracedWriter(writer, self.trace_of(session), backend, self.instruments)

    def instrument_agent(self, agent: Any) -> None:
        """Observe ``agent``'s hooks; its turns become spans of its session's trace."""
        self._observers.add(AgentObserver(agent, self.trace_of(agent.session)))

    def close(self) -> None:
        """Stop observing (sessions, agents, new stores), then flush and shut down the providers dshpy built."""
        self._stop_observing()
        with self._lock:
            traces = list(self._traces.values())
            self._traces.clear()
        for observed in traces:
            detach, observed.detach = observed.detach, None
            if detach is not None:
                detach()
        for observer in list(self._observers):
            observer.close()
        self.providers.shutdown()

    # -- what traces look up ----------------------------------------------------------------------

    def last_turn_of(self, session_id: str) -> SpanContext | None:
        """The span context of ``session_id``'s last turn in this process (what a fork of it links to)."""
        with self._lock:
            return self._turns.get(session_id)

    def remember_turn(self, session_id: str, context: SpanContext) -> None:
        with self._lock:
            self._turns[session_id] = context
            self._turns.move_to_end(session_id)
            while len(self._turns) > _REMEMBERED_TURNS:
                self._turns.popitem(last=False)

    @staticmethod
    def provider_name(provider: str) -> str:
        return _PROVIDERS.get(provider, provider)

    def server_of(self, client: Any) -> Mapping[str, Any]:
        """``server.address`` / ``server.port`` of the client's base URL (parsed once per URL)."""
        config = getattr(client, "config", None)
        base_url = getattr(config, "base_url", None)
        if not isinstance(base_url, str):
            return {}
        found = self._servers.get(base_url)
        if found is None:
            parts = urlsplit(base_url)
            found = {}
            if parts.hostname:
                found[n.SERVER_ADDRESS] = parts.hostname
                found[n.SERVER_PORT] = parts.port or (443 if parts.scheme == "https" else 80)
            self._servers[base_url] = found
        return found

    def input_messages(self, messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]] | None:
        """The request's messages in the conventions' shape, or ``None`` when content is not captured (cheap)."""
        return input_messages(messages) if self.capture.enabled else None

    # -- compaction -------------------------------------------------------------------------------

    @contextlib.contextmanager
    def compaction_span(self, session: Session, reason: str | None, attributes: Mapping[str, Any]) -> Iterator[Any]:
        observed = self.trace_of(session)
        if observed.sampled_out():  # its parent was not sampled: nothing to record, nothing to ask the SDK
            yield NonRecordingSpan(trace.get_current_span(observed.parent_context()).get_span_context())
            return
        start: dict[str, Any] = {**observed.numbers(), **attributes}
        if session.open_turn is not None:
            start[n.TURN] = session.open_turn
        if reason is not None:
            start[n.COMPACTION_REASON] = reason
        started = time.time_ns()
        span = self.instruments.tracer.start_span(
            n.SPAN_COMPACTION, context=observed.parent_context(), attributes=start, start_time=started
        )
        try:
            yield span
        except BaseException as error:
            span.record_exception(error)
            span.set_attribute(n.ERROR_TYPE, type(error).__qualname__)
            span.set_status(Status(StatusCode.ERROR, str(error)))
            raise
        finally:
            span.end()
