"""One session's telemetry: its open spans, what each appended event does to them, its timed flushes.

A :class:`SessionTrace` listens to the session's appends (the log is the source of
truth, so the trace is read off it) and is told by the agent's hooks
(:mod:`~dshpy.telemetry.agent_hooks`) what the log does not show: when a model request
is sent, when a tool body starts and ends, when the turn is over.

What the seed calls ``session.event`` (``session.id``, ``event.type``, ``event.seq``)
is recorded per flush by default: the ``dshpy.store.flush`` span that wrote a batch
names its events' types in seq order (``dshpy.store.flush.event_types``, from
``dshpy.store.flush.first_seq``), so the trace says which events each write carried
at the cost of one attribute rather than one span event each — a span event costs
half of what a whole append to a ``memory:`` store does. With ``session_events="per-event"``
(:func:`dshpy.telemetry.enable`), and for a session whose writer telemetry does not
see (opened before it was enabled), every event is also a timestamped ``session.event``
span event on the span it happened in (the step, else the turn, else the caller's
active span). Never a span of its own: an event is an instant in an operation, not an
operation, and a dozen zero-length spans per step would multiply what exporters carry.

Sampling is followed as OpenTelemetry's default sampler (``ParentBased``) follows it:
a turn whose span was not sampled starts no step, chat, tool, flush or compaction
span and records no span event — its children are one shared non-recording span
carrying the turn's (unsampled) context, so work nested under them stays out of the
trace too. Metrics are not sampled: an unsampled turn still counts its tokens.

While an agent drives the session, its events also open and close spans:
``turn/start`` … ``turn-end`` hook is ``invoke_agent`` (the root, parented on whatever
context is current when the turn starts — the host application's span, or the
``traceparent`` a JSON-RPC request carried), ``step/start`` … ``step/end`` a
``dshpy.step``, the ``model-request`` hook … ``assistant/message`` a ``chat {model}``
call covering its retries (each failed try a span event, each ``llm/retry`` another),
``tool-start`` … ``tool-end`` an ``execute_tool {tool}``. A flush is a
``dshpy.store.flush`` span under the step or turn it happened in (:mod:`~dshpy.telemetry.flushes`).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, Span, SpanContext, SpanKind, Status, StatusCode

from dshpy.core.events import SessionEvent
from dshpy.projections.builtins._stream import first_time, last_usage
from dshpy.telemetry import names as n
from dshpy.telemetry.content import ContentCapture, output_messages, tool_result
from dshpy.telemetry.instruments import Instruments

__all__ = ["SessionTrace", "TraceHost", "gen_ai_usage"]

log = logging.getLogger("dshpy.telemetry")

_OPENERS = frozenset({"turn/start", "step/start"})
_FINISH_REASONS = {"stop": "stop", "tool-calls": "tool_calls", "max-tokens": "length"}


def gen_ai_usage(usage: Any) -> dict[str, int]:
    """dsh ``TokenUsage`` → the conventions' counts (whose input *includes* the cached buckets, unlike dsh's)."""
    if not isinstance(usage, Mapping):
        return {}

    def count(key: str) -> int:
        value = usage.get(key)
        return value if type(value) is int and value >= 0 else 0

    read, write = count("cacheReadTokens"), count("cacheWriteTokens")
    counts = {
        n.GEN_AI_USAGE_INPUT_TOKENS: count("inputTokens") + read + write,
        n.GEN_AI_USAGE_OUTPUT_TOKENS: count("outputTokens"),
        n.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: read,
        n.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS: write,
    }
    if "reasoningTokens" in usage:
        counts[n.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS] = count("reasoningTokens")
    return counts


def _add_usage(total: dict[str, int], counts: Mapping[str, int]) -> None:
    for key, value in counts.items():
        total[key] = total.get(key, 0) + value


def _finish(stream: Any) -> tuple[str | None, str | None]:
    """The stream's finish kind and, for a failed or aborted try, its failure code."""
    if not isinstance(stream, list):
        return None, None
    for record in reversed(stream):
        chunk = record.get("chunk") if isinstance(record, dict) and record.get("type") == "chunk" else None
        if isinstance(chunk, dict) and chunk.get("type") == "finish":
            reason = chunk.get("reason")
            if not isinstance(reason, dict):
                return None, None
            failure = reason.get("failure")
            code = failure.get("code") if isinstance(failure, dict) else None
            return reason.get("kind"), str(code) if code else None
    return None, None


def _failure_code(reason: Any) -> str:
    error = reason.get("error") if isinstance(reason, Mapping) else None
    code = error.get("code") if isinstance(error, Mapping) else None
    return str(code) if code else "_OTHER"


def _runner() -> object:
    """What runs this code: the asyncio task, else the thread (a context token only resets where it was set)."""
    try:
        task = asyncio.current_task()
    except RuntimeError:
        task = None
    return task if task is not None else threading.get_ident()


class _Current:
    """A span made current with :func:`otel_context.attach`, undone only by the task that did it."""

    __slots__ = ("runner", "token")

    def __init__(self, span: Span) -> None:
        self.token = otel_context.attach(trace.set_span_in_context(span))
        self.runner = _runner()

    def restore(self) -> None:
        if self.runner == _runner():
            otel_context.detach(self.token)  # else that task's context is gone with it (a cancelled tool)


class _Call:
    """An open ``chat`` or ``execute_tool`` span, what its metrics need, and the context token it is current under."""

    __slots__ = ("attempt", "attempt_ns", "error", "metric", "response", "span", "started", "step", "token", "usage")

    def __init__(self, span: Span, step: int, metric: dict[str, Any], token: _Current | None) -> None:
        self.response: Any = None
        """The :class:`~dshpy.llm.client.ResponseInfo` of the latest try (filled in as its stream arrives)."""
        self.span = span
        self.step = step
        self.metric = metric
        self.token = token
        self.started = self.attempt_ns = time.time_ns()
        self.attempt = 1
        self.usage: dict[str, int] = {}
        self.error: str | None = None


class TraceHost(Protocol):
    """What a trace needs from the telemetry that made it (:class:`~dshpy.telemetry.instrumentation.Telemetry`)."""

    instruments: Instruments
    capture: ContentCapture
    agent_name: str
    per_event: bool
    """Whether every appended event is also a ``session.event`` span event (``session_events="per-event"``)."""

    def provider_name(self, provider: str) -> str: ...

    def server_of(self, client: Any) -> Mapping[str, Any]: ...

    def input_messages(self, messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]] | None: ...

    def last_turn_of(self, session_id: str) -> SpanContext | None: ...

    def remember_turn(self, session_id: str, context: SpanContext) -> None: ...


class SessionTrace:
    """The spans open on one session and the listener that moves them; holds the session by id only."""

    def __init__(self, telemetry: TraceHost, session_id: str, parent_session: str | None) -> None:
        self._t = telemetry
        self.session_id = session_id
        self.parent_session = parent_session
        self._fork_link = telemetry.last_turn_of(parent_session) if parent_session else None
        self._agent: weakref.ref[Any] | None = None
        self.detach: Callable[[], None] | None = None
        """Stops the listener (set by whoever subscribed it); ``None`` once telemetry is off."""
        self._turn: Span | None = None
        self._turn_number = 0
        self._turn_usage: dict[str, int] = {}
        self._turn_started = 0
        self._turn_metric: dict[str, Any] = {}
        self._turn_error: str | None = None
        self._step: Span | None = None
        self._step_number = 0
        self._context: otel_context.Context | None = None
        """The open step's (else turn's) span as a context, made once per span rather than per child."""
        self._dropped: Span | None = None
        """The open turn's stand-in for every child span, when the turn was not sampled (else ``None``)."""
        self.writer_traced = False
        """Whether a :class:`~dshpy.telemetry.flushes.TracedWriter` reports this session's flushes and events."""
        self._client_key: tuple[int, str] | None = None
        self._client_attributes: dict[str, Any] = {}
        self._chat: _Call | None = None
        self._tools: dict[str, _Call] = {}
        self._tool_names: dict[str, str] = {}

    # -- who drives the session -------------------------------------------------------------------

    def attach_agent(self, agent: Any) -> None:
        """From now on this agent's turns open spans (a weak reference: the trace must not keep it alive)."""
        self._agent = weakref.ref(agent)

    def _driving_agent(self) -> Any:
        return self._agent() if self._agent is not None else None

    def _agent_attributes(self, agent: Any) -> dict[str, Any]:
        """Provider, model and server of the agent's client: the dimensions of every GenAI metric (a fresh copy).

        Worked out once per client and model, not per call: a turn asks for them three times.
        """
        client = agent.client
        key = (id(client), client.model)
        if key != self._client_key:
            attributes: dict[str, Any] = {
                n.GEN_AI_PROVIDER_NAME: self._t.provider_name(client.provider),
                n.GEN_AI_REQUEST_MODEL: client.model,
            }
            attributes.update(self._t.server_of(client))
            self._client_key, self._client_attributes = key, attributes
        return dict(self._client_attributes)

    # -- where things go -------------------------------------------------------------------------

    def current_span(self) -> Span | None:
        """The innermost structural span open: the step, else the turn."""
        return self._step or self._turn

    def parent_context(self) -> otel_context.Context | None:
        """The context a flush, compaction, chat or tool span starts in: the open step or turn, else the caller's."""
        return self._context

    def _opened(self) -> None:
        """A step or turn opened or closed: the context its children start in changes with it."""
        span = self._step or self._turn
        self._context = trace.set_span_in_context(span) if span is not None else None

    def sampled_out(self) -> bool:
        """Whether a span started now would be dropped: its parent (step or turn, else the current span) is unsampled.

        Read before building a child's attributes, so an unsampled turn's flushes cost no
        more than their metrics.
        """
        if self._turn is not None:
            return self._dropped is not None
        context = trace.get_current_span().get_span_context()
        return context.is_valid and not context.trace_flags.sampled

    def numbers(self) -> dict[str, Any]:
        attributes: dict[str, Any] = {n.SESSION_ID: self.session_id}
        if self._turn is not None:
            attributes[n.TURN] = self._turn_number
            if self._step is not None:
                attributes[n.STEP] = self._step_number
        return attributes

    # -- the listener -----------------------------------------------------------------------------

    def on_event(self, _session: Any, event: SessionEvent) -> None:
        """Called after each committed append; never raises (telemetry must not break a turn)."""
        try:
            self._record(event)
        except Exception:
            log.exception("telemetry failed on %s seq %d of %s", event.type, event.seq, self.session_id)

    def _record(self, event: SessionEvent) -> None:
        kind = event.type
        handler = _HANDLERS.get(kind)
        if self.writer_traced and not self._t.per_event:  # the flush span names the event and the metric counts it
            if handler is not None:
                handler(self, event)
            return
        if not self.writer_traced:  # no flush will report it: count it now
            self._t.instruments.count_event(kind)  # by type only: a metric is never split by an unbounded id
        if handler is not None and kind in _OPENERS:  # the event belongs to the span it opens
            handler(self, event)
        target = self._step or self._turn or trace.get_current_span()
        if target.is_recording():
            target.add_event(
                n.SESSION_EVENT, {n.SESSION_ID: self.session_id, n.EVENT_TYPE: kind, n.EVENT_SEQ: event.seq}
            )
        if handler is not None and kind not in _OPENERS:  # ... and to the span it closes
            handler(self, event)

    def _turn_started_event(self, event: SessionEvent) -> None:
        agent = self._driving_agent()
        if agent is None:
            return
        if self._turn is not None:  # the last turn's end never reached us: close it before opening the next
            self.end_turn(None)
        number = event.data["turn"]
        name = self._t.agent_name
        attributes: dict[str, Any] = {
            n.GEN_AI_OPERATION_NAME: n.OPERATION_INVOKE_AGENT,
            n.GEN_AI_AGENT_NAME: name,
            n.GEN_AI_CONVERSATION_ID: self.session_id,
            n.SESSION_ID: self.session_id,
            n.TURN: number,
            **self._agent_attributes(agent),
        }
        links = []
        if self.parent_session is not None:
            attributes[n.PARENT_SESSION_ID] = self.parent_session
            if self._fork_link is not None:
                links.append(Link(self._fork_link, {n.PARENT_SESSION_ID: self.parent_session}))
        self._turn = turn = self._t.instruments.tracer.start_span(
            f"{n.OPERATION_INVOKE_AGENT} {name}", kind=SpanKind.INTERNAL, attributes=attributes, links=links
        )
        context = turn.get_span_context()
        self._dropped = None if context.trace_flags.sampled else trace.NonRecordingSpan(context)
        self._opened()
        self._turn_number = number
        self._turn_usage = {}
        self._turn_started = time.time_ns()
        self._turn_metric = {
            n.GEN_AI_OPERATION_NAME: n.OPERATION_INVOKE_AGENT,
            n.GEN_AI_PROVIDER_NAME: attributes[n.GEN_AI_PROVIDER_NAME],
            n.GEN_AI_REQUEST_MODEL: attributes[n.GEN_AI_REQUEST_MODEL],
        }
        self._turn_error = None

    def _turn_ended_event(self, event: SessionEvent) -> None:
        span = self._turn
        if span is None or event.data.get("turn") != self._turn_number:
            return
        self._end_step()
        reason = event.data.get("reason") or {}
        kind = reason.get("kind")
        span.set_attribute(n.TURN_REASON, str(kind))
        span.set_attributes(self._turn_usage)
        if kind == "error":
            code = self._turn_error = _failure_code(reason)
            span.set_attribute(n.ERROR_TYPE, code)
            span.set_status(Status(StatusCode.ERROR, str((reason.get("error") or {}).get("message", code))))

    def end_turn(self, error: BaseException | None) -> None:
        """The turn is over (the ``turn-end`` hook, after its last flush): end every span still open."""
        span = self._turn
        if span is None:
            return
        self._end_step()
        if error is not None:
            span.record_exception(error)
            self._turn_error = type(error).__qualname__
            span.set_attribute(n.ERROR_TYPE, self._turn_error)
            span.set_status(Status(StatusCode.ERROR, str(error)))
        span.end()
        self._turn = self._dropped = None
        self._opened()
        self._t.remember_turn(self.session_id, span.get_span_context())
        metric = self._turn_metric
        if self._turn_error is not None:
            metric = {**metric, n.ERROR_TYPE: self._turn_error}
        self._t.instruments.operation_duration.record((time.time_ns() - self._turn_started) / 1e9, metric)

    def _step_started_event(self, event: SessionEvent) -> None:
        if self._turn is None:
            return
        self._end_step()
        number = event.data["step"]
        step = self._dropped
        if step is None:
            attributes = {n.SESSION_ID: self.session_id, n.TURN: self._turn_number, n.STEP: number}
            step = self._t.instruments.tracer.start_span(n.SPAN_STEP, context=self._context, attributes=attributes)
        self._step = step
        self._step_number = number
        self._opened()

    def _step_ended_event(self, _event: SessionEvent) -> None:
        self._end_step()

    def _end_step(self) -> None:
        if self._chat is not None:
            self._end_chat()
        for call_id in list(self._tools):
            self._end_tool(call_id, "_OTHER")
        if self._step is not None:
            self._step.end()
            self._step = None
            self._opened()

    # -- model calls ------------------------------------------------------------------------------

    def model_request(
        self, agent: Any, step: int, attempt: int, messages: Sequence[Mapping[str, Any]], response: Any = None
    ) -> None:
        """The ``model-request`` hook: a chat call starts (its first try) or goes on (a retry).

        ``response`` is the try's :class:`~dshpy.llm.client.ResponseInfo`, which the
        client fills in as the stream arrives (where ``gen_ai.response.model`` comes from).
        """
        chat = self._chat
        if chat is not None and chat.step == step:
            chat.attempt_ns = time.time_ns()
            chat.attempt = attempt
            chat.response = response
            chat.span.set_attribute(n.ATTEMPT, attempt)
            return
        if chat is not None:
            self._end_chat()
        metric = {n.GEN_AI_OPERATION_NAME: n.OPERATION_CHAT, **self._agent_attributes(agent)}
        if self._dropped is not None:  # an unsampled turn: metrics only
            self._chat = _Call(self._dropped, step, metric, _Current(self._dropped))
            self._chat.attempt = attempt
            self._chat.response = response
            return
        attributes: dict[str, Any] = {
            **metric,
            n.GEN_AI_CONVERSATION_ID: self.session_id,
            **self.numbers(),
            n.ATTEMPT: attempt,
        }
        if agent.max_tokens is not None:
            attributes[n.GEN_AI_REQUEST_MAX_TOKENS] = agent.max_tokens
        captured = self._t.capture.value(n.GEN_AI_INPUT_MESSAGES, self._t.input_messages(messages))
        if captured is not None:
            attributes[n.GEN_AI_INPUT_MESSAGES] = captured
        name = f"{n.OPERATION_CHAT} {agent.client.model}"
        span = self._t.instruments.tracer.start_span(
            name, context=self._context, kind=SpanKind.CLIENT, attributes=attributes
        )
        self._chat = _Call(span, step, metric, _Current(span))  # an HTTP client's spans nest under the call
        self._chat.attempt = attempt
        self._chat.response = response

    def _response_model(self, chat: _Call) -> None:
        """``gen_ai.response.model``, once the server has named it: on the span and every metric of the call."""
        model = getattr(chat.response, "model", None)
        if isinstance(model, str) and model and chat.metric.get(n.GEN_AI_RESPONSE_MODEL) != model:
            chat.metric = {**chat.metric, n.GEN_AI_RESPONSE_MODEL: model}
            chat.span.set_attribute(n.GEN_AI_RESPONSE_MODEL, model)

    def _message_event(self, event: SessionEvent) -> None:
        chat = self._chat
        if chat is None:
            return
        self._response_model(chat)
        data = event.data
        stream = data.get("stream")
        usage = data.get("usage")
        counts = gen_ai_usage(usage if isinstance(usage, Mapping) else last_usage(stream))
        _add_usage(chat.usage, counts)
        kind, _code = _finish(stream)
        reason = _FINISH_REASONS.get(str(kind), str(kind))
        chat.span.set_attribute(n.GEN_AI_RESPONSE_FINISH_REASONS, [reason])
        first = first_time(stream)
        if first is not None:
            seconds = max(0.0, first / 1000 - chat.attempt_ns / 1e9)
            chat.span.set_attribute(n.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK, seconds)
            self._t.instruments.time_to_first_chunk.record(seconds, chat.metric)
        if self._t.capture.enabled and chat.span.is_recording():  # shaped only when it will be recorded
            content = data["message"]["content"]
            captured = self._t.capture.value(n.GEN_AI_OUTPUT_MESSAGES, output_messages(content, reason))
            if captured is not None:
                chat.span.set_attribute(n.GEN_AI_OUTPUT_MESSAGES, captured)
        chat.error = "ABORTED" if data.get("interrupted") else None
        self._end_chat()

    def _attempt_event(self, event: SessionEvent) -> None:
        chat = self._chat
        if chat is None:
            return
        self._response_model(chat)
        stream = event.data.get("stream")
        counts = gen_ai_usage(last_usage(stream))
        _add_usage(chat.usage, counts)
        _kind, code = _finish(stream)
        chat.error = code or "_OTHER"
        chat.span.add_event(n.EVENT_ATTEMPT_FAILED, {n.ATTEMPT: chat.attempt, n.ERROR_TYPE: chat.error, **counts})

    def _retry_event(self, event: SessionEvent) -> None:
        data = event.data
        failure = data.get("failure")
        code = str(failure.get("code")) if isinstance(failure, Mapping) and failure.get("code") else "_OTHER"
        provider = self._chat.metric.get(n.GEN_AI_PROVIDER_NAME, "") if self._chat is not None else ""
        self._t.instruments.retries.add(1, {n.GEN_AI_PROVIDER_NAME: provider, n.ERROR_TYPE: code})
        target = self._chat.span if self._chat is not None else self.current_span()
        if target is not None:
            attributes = {n.ATTEMPT: int(data.get("retry", 0)) + 1, n.RETRY_DELAY_MS: data.get("delayMs", 0)}
            target.add_event(n.EVENT_RETRY, {**attributes, n.ERROR_TYPE: code})

    def _end_chat(self) -> None:
        chat, self._chat = self._chat, None
        if chat is None:
            return
        span = chat.span
        span.set_attributes(chat.usage)
        _add_usage(self._turn_usage, chat.usage)
        metric = chat.metric
        if chat.error is not None:
            span.set_attribute(n.ERROR_TYPE, chat.error)
            span.set_status(Status(StatusCode.ERROR, chat.error))
            metric = {**metric, n.ERROR_TYPE: chat.error}
        span.end()
        if chat.token is not None:
            chat.token.restore()
        instruments = self._t.instruments
        instruments.operation_duration.record((time.time_ns() - chat.started) / 1e9, metric)
        instruments.record_tokens(
            metric,
            chat.usage.get(n.GEN_AI_USAGE_INPUT_TOKENS, 0),
            chat.usage.get(n.GEN_AI_USAGE_OUTPUT_TOKENS, 0),
        )

    # -- tools ------------------------------------------------------------------------------------

    def tool_start(self, agent: Any, step: int, call_id: str, name: str, arguments: str) -> None:
        """The ``tool-start`` hook, in the task that runs the body: the ``execute_tool`` span becomes current there."""
        metric = {n.GEN_AI_OPERATION_NAME: n.OPERATION_EXECUTE_TOOL, **self._agent_attributes(agent)}
        metric.pop(n.SERVER_ADDRESS, None)
        metric.pop(n.SERVER_PORT, None)
        metric[n.GEN_AI_TOOL_NAME] = name
        if self._dropped is not None:  # an unsampled turn: metrics only (the stand-in is current in the body)
            self._tools[call_id] = _Call(self._dropped, step, metric, _Current(self._dropped))
            return
        attributes: dict[str, Any] = {
            n.GEN_AI_OPERATION_NAME: n.OPERATION_EXECUTE_TOOL,
            n.GEN_AI_TOOL_NAME: name,
            n.GEN_AI_TOOL_CALL_ID: call_id,
            n.GEN_AI_TOOL_TYPE: "function",
            n.GEN_AI_CONVERSATION_ID: self.session_id,
            **self.numbers(),
        }
        tools: Mapping[str, Any] = getattr(agent, "tools", None) or {}
        description = getattr(tools.get(name), "description", None)
        if isinstance(description, str) and description:
            attributes[n.GEN_AI_TOOL_DESCRIPTION] = description
        captured = self._t.capture.value(n.GEN_AI_TOOL_CALL_ARGUMENTS, arguments)
        if captured is not None:
            attributes[n.GEN_AI_TOOL_CALL_ARGUMENTS] = captured
        span = self._t.instruments.tracer.start_span(
            f"{n.OPERATION_EXECUTE_TOOL} {name}", context=self._context, kind=SpanKind.INTERNAL, attributes=attributes
        )
        current = _Current(span)  # the body's own spans nest under it
        self._tools[call_id] = _Call(span, step, metric, current)

    def tool_end(self, call_id: str, outcome: Any) -> None:
        """The ``tool-end`` hook, in the same task as ``tool-start``: record the outcome and end the span."""
        call = self._tools.get(call_id)
        if call is None:
            return
        if self._t.capture.enabled and call.span.is_recording():
            captured = self._t.capture.value(n.GEN_AI_TOOL_CALL_RESULT, tool_result(outcome.content))
            if captured is not None:
                call.span.set_attribute(n.GEN_AI_TOOL_CALL_RESULT, captured)
        error = None
        if outcome.is_error:
            error = str((outcome.error or {}).get("code") or (outcome.error or {}).get("name") or "_OTHER")
        self._end_tool(call_id, error)

    def _end_tool(self, call_id: str, error: str | None) -> None:
        call = self._tools.pop(call_id, None)
        if call is None:
            return
        metric = call.metric
        if error is not None:
            call.span.set_attribute(n.ERROR_TYPE, error)
            call.span.set_status(Status(StatusCode.ERROR, error))
            metric = {**metric, n.ERROR_TYPE: error}
        call.span.end()
        if call.token is not None:
            call.token.restore()
        self._t.instruments.operation_duration.record((time.time_ns() - call.started) / 1e9, metric)

    def _tool_call_event(self, event: SessionEvent) -> None:
        self._tool_names[str(event.data["callId"])] = str(event.data["name"])

    def _tool_result_event(self, event: SessionEvent) -> None:
        data = event.data
        call_id = str(data["message"].get("toolCallId"))
        name = self._tool_names.pop(call_id, "")
        error = data.get("error") if data["message"].get("isError") else None
        code = str(error.get("code") or error.get("name") or "_OTHER") if isinstance(error, Mapping) else None
        if data["message"].get("isError") and code is None:
            code = "_OTHER"
        if call_id in self._tools:  # its body never reported back (cancelled): the logged result ends it
            self._end_tool(call_id, code)
        self._t.instruments.count_tool_call(name, code)

    # -- compactions, flushes -------------------------------------------------------------------------

    def _compaction_ended_event(self, event: SessionEvent) -> None:
        error = event.data.get("error")
        self._t.instruments.compactions.add(1, {n.ERROR_TYPE: "compaction_failed"} if error else {})


_HANDLERS = {
    "turn/start": SessionTrace._turn_started_event,
    "turn/end": SessionTrace._turn_ended_event,
    "step/start": SessionTrace._step_started_event,
    "step/end": SessionTrace._step_ended_event,
    "assistant/message": SessionTrace._message_event,
    "assistant/attempt": SessionTrace._attempt_event,
    "llm/retry": SessionTrace._retry_event,
    "tool/call": SessionTrace._tool_call_event,
    "tool/result": SessionTrace._tool_result_event,
    "compaction/end": SessionTrace._compaction_ended_event,
}
