"""Where appended events are recorded (per flush by default, per event on request), and what sampling leaves out."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.sampling import ParentBased, Sampler, SamplingResult, TraceIdRatioBased
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags
from otel_support import Recorded, run_turn

import dshpy
import dshpy.telemetry
from dshpy.agent import tool
from dshpy.errors import ConfigError
from dshpy.testing.fake_model import Reply, Usage

FLUSH = "dshpy.store.flush"


@tool
def read_file(path: str) -> str:
    """Read a text file."""
    return f"contents of {path}"


def tool_turn(session: dshpy.Session, tools: Sequence[Any] = (read_file,)) -> None:
    replies = [
        Reply.tool_calls(("read_file", '{"path": "a.txt"}', "call-1"), usage=Usage(100, 10)),
        Reply.text("It says hello.", usage=Usage(150, 7)),
    ]
    assert run_turn(session, replies, "what does a.txt say?", tools=tools).kind == "completed"


def flushed_events(recorded: Recorded, session_id: str) -> dict[int, str]:
    """seq → type, read back from the flush spans alone (``first_seq + index`` → ``event_types[index]``)."""
    found: dict[int, str] = {}
    for span in recorded.spans(FLUSH):
        attributes = span.attributes
        assert attributes["session.id"] == session_id
        types = attributes["dshpy.store.flush.event_types"]
        assert len(types) == attributes["dshpy.store.flush.events"]
        for index, kind in enumerate(types):
            seq = attributes["dshpy.store.flush.first_seq"] + index
            assert seq not in found, f"seq {seq} in two flushes"
            found[seq] = kind
    return found


def span_events(recorded: Recorded) -> list[Any]:
    return [event for span in recorded.spans() for event in span.events if event.name == "session.event"]


def test_by_default_each_flush_span_names_the_events_it_wrote(otel: Recorded) -> None:
    session = dshpy.open_store("memory:").create()
    tool_turn(session)
    session.flush()
    logged = {event.seq: event.type for event in session.events}
    assert flushed_events(otel, session.id) == logged  # every event, once, with its seq and type
    assert span_events(otel) == []  # and no span event per event
    for kind, count in Counter(logged.values()).items():
        assert otel.total("dshpy.session.events", **{"event.type": kind}) == count
    assert otel.total("dshpy.tool.calls", **{"gen_ai.tool.name": "read_file"}) == 1
    session.close()


def test_per_event_detail_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSHPY_OTEL_SESSION_EVENTS", "per-event")
    recorded = Recorded()
    dshpy.telemetry.enable(tracer_provider=recorded.tracer_provider, meter_provider=recorded.meter_provider)
    try:
        session = dshpy.open_store("memory:").create()
        tool_turn(session)
        start = next(event.seq for event in session.events if event.type == "turn/start")
        seqs = sorted(event.attributes["event.seq"] for event in span_events(recorded))
        assert seqs == list(range(start, len(session.events)))
        assert flushed_events(recorded, session.id) == {event.seq: event.type for event in session.events}
    finally:
        dshpy.telemetry.disable()


def test_a_bad_detail_level_is_refused_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    recorded = Recorded()
    with pytest.raises(ConfigError, match="session_events: 'each' is not one of per-flush, per-event"):
        dshpy.telemetry.enable(tracer_provider=recorded.tracer_provider, session_events="each")
    monkeypatch.setenv("DSHPY_OTEL_SESSION_EVENTS", "verbose")
    with pytest.raises(ConfigError, match="DSHPY_OTEL_SESSION_EVENTS: 'verbose'"):
        dshpy.telemetry.enable(tracer_provider=recorded.tracer_provider)
    assert not dshpy.telemetry.enabled()


def test_a_session_opened_before_telemetry_still_records_its_events() -> None:
    """Its writer was assembled unobserved, so no flush reports its events: each becomes a span event instead."""
    session = dshpy.open_store("memory:").create()
    recorded = Recorded()
    dshpy.telemetry.enable(tracer_provider=recorded.tracer_provider, meter_provider=recorded.meter_provider)
    try:
        tool_turn(session)
        assert recorded.spans(FLUSH) == []
        start = next(event.seq for event in session.events if event.type == "turn/start")
        by_seq = {event.attributes["event.seq"]: event.attributes["event.type"] for event in span_events(recorded)}
        assert by_seq == {event.seq: event.type for event in session.events if event.seq >= start}
        assert recorded.total("dshpy.session.events", **{"event.type": "tool/call"}) == 1
    finally:
        dshpy.telemetry.disable()


class AskedSampler(Sampler):
    """Wraps a sampler and remembers the name of every span it was asked about."""

    def __init__(self, inner: Sampler) -> None:
        self.inner = inner
        self.asked: list[str] = []

    def should_sample(self, parent_context: Any, trace_id: int, name: str, *args: Any, **kwargs: Any) -> SamplingResult:
        self.asked.append(name)
        return self.inner.should_sample(parent_context, trace_id, name, *args, **kwargs)

    def get_description(self) -> str:
        return f"Asked({self.inner.get_description()})"


@pytest.fixture
def unsampled() -> Iterator[tuple[Recorded, AskedSampler]]:
    """Telemetry on with ``ParentBased(TraceIdRatioBased(0))``: every trace started here is sampled out."""
    recorded = Recorded()
    sampler = AskedSampler(ParentBased(TraceIdRatioBased(0.0)))
    recorded.tracer_provider = TracerProvider(sampler=sampler)
    recorded.tracer_provider.add_span_processor(SimpleSpanProcessor(recorded.exporter))
    dshpy.telemetry.enable(tracer_provider=recorded.tracer_provider, meter_provider=recorded.meter_provider)
    try:
        yield recorded, sampler
    finally:
        dshpy.telemetry.disable()


def test_an_unsampled_turn_starts_no_child_span_but_keeps_its_metrics(
    unsampled: tuple[Recorded, AskedSampler],
) -> None:
    recorded, sampler = unsampled
    seen: list[SpanContext] = []

    @tool
    def read_file(path: str) -> str:
        """Read a text file."""
        seen.append(trace.get_current_span().get_span_context())
        return f"contents of {path}"

    session = dshpy.open_store("memory:").create()
    session.flush()
    before = list(sampler.asked)
    tool_turn(session, tools=[read_file])
    assert sampler.asked == [*before, "invoke_agent dshpy"]  # steps, calls, tools, flushes: not even asked
    assert recorded.exporter.get_finished_spans() == ()
    (inside,) = seen  # the tool body runs in the turn's unsampled trace, so its own spans stay out of it too
    assert inside.is_valid and not inside.trace_flags.sampled
    chat = {"gen_ai.operation.name": "chat"}
    assert (
        sum(
            p.count for p in recorded.points("gen_ai.client.operation.duration") if chat.items() <= p.attributes.items()
        )
        == 2
    )
    assert recorded.total("gen_ai.client.token.usage", **{"gen_ai.token.type": "input"}) == 250
    assert recorded.total("dshpy.tool.calls", **{"gen_ai.tool.name": "read_file"}) == 1
    assert recorded.total("dshpy.session.events") == len(session.events)
    session.close()


def test_flushes_and_compactions_follow_the_sampling_of_the_callers_span(otel: Recorded) -> None:
    """Outside a turn a flush is the current span's child; an unsampled one (``traceparent`` flags 00) drops it."""
    session = dshpy.open_store("memory:").create()
    session.flush()
    first = len(otel.spans(FLUSH))
    for sampled in (False, True):
        flags = TraceFlags(TraceFlags.SAMPLED if sampled else TraceFlags.DEFAULT)
        remote = SpanContext(0x5CE0, 0xF00D + sampled, is_remote=True, trace_flags=flags)
        with trace.use_span(NonRecordingSpan(remote)):
            session.append("plugin:test/note", {"sampled": sampled})
            session.flush()
            with dshpy.telemetry.compaction_span(session, reason="manual") as span:
                span.set_attribute("dshpy.compaction.events", 1)
    spans = otel.spans(FLUSH)[first:]
    assert len(spans) == 1
    assert spans[0].parent is not None and spans[0].parent.span_id == 0xF00D + 1
    assert spans[0].attributes["dshpy.store.flush.event_types"] == ("plugin:test/note",)
    (compaction,) = otel.spans("dshpy.compaction")
    assert compaction.parent is not None and compaction.parent.span_id == 0xF00D + 1
    assert otel.total("dshpy.store.flush.events") == len(session.events)  # metrics are not sampled
    session.close()
