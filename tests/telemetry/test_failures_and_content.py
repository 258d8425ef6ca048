"""Retries, failed calls and tools, content capture and its redactor, compactions, switching telemetry off."""

from __future__ import annotations

import pytest
from opentelemetry.trace import StatusCode
from otel_support import Recorded, parent_id, run_turn, span_id

import dshpy
import dshpy.telemetry
from dshpy.agent import tool
from dshpy.projections import USAGE, state_of
from dshpy.testing.fake_model import Reply, Usage


def test_a_retried_call_is_one_chat_span_with_its_tries_as_events(otel: Recorded) -> None:
    session = dshpy.open_store("memory:").create()
    cut = Reply.text("partial answer that breaks", pieces=6, usage=Usage(90, 5), usage_at="first").cut(3)
    result = run_turn(session, [cut, Reply.server_error(), Reply.text("fine", usage=Usage(100, 4))])
    assert result.kind == "completed"
    chat = otel.one("chat ")
    assert chat.attributes["dshpy.llm.attempt"] == 3
    failed = [event for event in chat.events if event.name == "dshpy.llm.attempt_failed"]
    retries = [event for event in chat.events if event.name == "dshpy.llm.retry"]
    assert [event.attributes["error.type"] for event in failed] == ["STREAM_INTERRUPTED", "SERVER"]
    assert [event.attributes["dshpy.llm.attempt"] for event in failed] == [1, 2]
    assert [event.attributes["dshpy.llm.attempt"] for event in retries] == [2, 3]
    assert all(event.attributes["dshpy.llm.retry.delay_ms"] >= 0 for event in retries)
    assert chat.status.status_code is StatusCode.UNSET and "error.type" not in chat.attributes
    usage = state_of(session, USAGE).total  # the failed try's tokens were billed too
    assert chat.attributes["gen_ai.usage.input_tokens"] == usage.billed_input_tokens == 190
    assert chat.attributes["gen_ai.usage.output_tokens"] == usage.output_tokens == 9
    assert otel.total("dshpy.llm.retries") == 2
    assert otel.total("dshpy.llm.retries", **{"error.type": "SERVER"}) == 1


def test_a_failed_call_marks_the_chat_and_the_turn(otel: Recorded) -> None:
    session = dshpy.open_store("memory:").create()
    result = run_turn(session, [Reply.error(400, "bad request", type="invalid_request_error")])
    assert result.kind == "error"
    chat, turn = otel.one("chat "), otel.one("invoke_agent")
    assert chat.attributes["error.type"] == "INVALID_REQUEST" and chat.status.status_code is StatusCode.ERROR
    assert turn.attributes["error.type"] == "INVALID_REQUEST" and turn.status.status_code is StatusCode.ERROR
    assert turn.attributes["dshpy.turn.reason"] == "error"
    failed = otel.total(
        "gen_ai.client.operation.duration", **{"gen_ai.operation.name": "chat", "error.type": "INVALID_REQUEST"}
    )
    assert failed > 0


def test_a_failing_tool_is_an_error_span_and_counted(otel: Recorded) -> None:
    session = dshpy.open_store("memory:").create()

    @tool
    def explode() -> str:
        """Always fails."""
        raise RuntimeError("boom")

    replies = [Reply.tool_calls(("explode", "{}"), ("missing_tool", "{}")), Reply.text("sorry")]
    run_turn(session, replies, tools=[explode])
    spans = {span.attributes["gen_ai.tool.name"]: span for span in otel.spans("execute_tool")}
    assert spans["explode"].status.status_code is StatusCode.ERROR
    assert spans["missing_tool"].attributes["error.type"] == "TOOL_NOT_FOUND"
    assert otel.total("dshpy.tool.calls", **{"gen_ai.tool.name": "missing_tool", "error.type": "TOOL_NOT_FOUND"}) == 1
    assert otel.total("dshpy.tool.calls") == 2


def test_content_is_not_recorded_unless_asked(otel: Recorded) -> None:
    session = dshpy.open_store("memory:").create()
    run_turn(session, [Reply.text("the secret is 42")], "tell me the secret")
    for span in otel.spans():
        assert not any(
            key.startswith(("gen_ai.input", "gen_ai.output", "gen_ai.tool.call.a")) for key in span.attributes
        )
        assert "secret" not in repr(dict(span.attributes))


def test_content_capture_goes_through_the_redactor(otel_content: Recorded) -> None:
    session = dshpy.open_store("memory:").create()

    @tool
    def lookup(key: str) -> str:
        """Look a key up."""
        return "drop-me" if key == "hidden" else f"value of {key}"

    replies = [
        Reply.tool_calls(("lookup", '{"key": "secret"}', "c1"), ("lookup", '{"key": "hidden"}', "c2")),
        Reply.text("the secret is 42"),
    ]
    run_turn(session, replies, "find the secret", tools=[lookup])
    first, second = sorted(otel_content.spans("chat "), key=lambda span: span.attributes["dshpy.step"])
    import json

    sent = json.loads(first.attributes["gen_ai.input.messages"])
    assert sent == [{"role": "user", "parts": [{"type": "text", "content": "find the [redacted]"}]}]
    answered = json.loads(second.attributes["gen_ai.output.messages"])
    assert answered == [
        {"role": "assistant", "parts": [{"type": "text", "content": "the [redacted] is 42"}], "finish_reason": "stop"}
    ]
    tools = {span.attributes["gen_ai.tool.call.id"]: span for span in otel_content.spans("execute_tool")}
    assert tools["c1"].attributes["gen_ai.tool.call.arguments"] == '{"key": "[redacted]"}'
    assert tools["c1"].attributes["gen_ai.tool.call.result"] == "value of [redacted]"
    assert "gen_ai.tool.call.result" not in tools["c2"].attributes  # the redactor dropped it
    assert "gen_ai.input.messages" not in second.attributes  # the history now holds it: dropped whole


def test_sent_messages_in_the_conventions_shape() -> None:
    from dshpy.telemetry.content import input_messages

    sent = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {
            "role": "assistant",
            "content": "",
            "reasoning_content": "think",
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "42"},
    ]
    assert input_messages(sent) == [
        {"role": "system", "parts": [{"type": "text", "content": "Be brief."}]},
        {"role": "user", "parts": [{"type": "text", "content": "hi"}]},
        {
            "role": "assistant",
            "parts": [
                {"type": "reasoning", "content": "think"},
                {"type": "tool_call", "id": "c1", "name": "f", "arguments": "{}"},
            ],
        },
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": "42"}]},
    ]


def test_a_redactor_that_raises_records_nothing() -> None:
    from otel_support import Recorded as Fresh

    recorded = Fresh()

    def broken(_name: str, _value: object) -> object:
        raise ValueError("bad rule")

    dshpy.telemetry.enable(
        tracer_provider=recorded.tracer_provider,
        meter_provider=recorded.meter_provider,
        capture_content=True,
        redact=broken,
    )
    try:
        run_turn(dshpy.open_store("memory:").create(), [Reply.text("private answer")], "private question")
    finally:
        dshpy.telemetry.disable()
    chat = recorded.one("chat ")
    assert "gen_ai.input.messages" not in chat.attributes and "gen_ai.output.messages" not in chat.attributes


def test_flush_spans_and_metrics_per_backend(otel: Recorded, tmp_path) -> None:
    import sqlite3

    from dshpy.core.events import encode_event

    store = dshpy.open_store(f"sqlite:///{tmp_path}/s.db")
    session = store.create()
    run_turn(session, [Reply.text("stored")])
    session.close()
    flushes = otel.spans("dshpy.store.flush")
    assert flushes and all(span.attributes["dshpy.store.backend"] == "sqlite" for span in flushes)
    assert sum(span.attributes["dshpy.store.flush.events"] for span in flushes) == len(session.events)
    raw = sqlite3.connect(tmp_path / "s.db")  # the rows SQLite wrote: bodies as stored (v6 compresses larger ones)
    (expected,) = raw.execute("SELECT sum(length(body)) FROM events WHERE session_id = ?", (session.id,)).fetchone()
    raw.close()
    assert expected < sum(len(encode_event(event, seq_ranges=False)) for event in session.events)
    assert sum(span.attributes["dshpy.store.flush.bytes"] for span in flushes) == expected  # recorded spans only
    turn = otel.one("invoke_agent")
    steps = {span_id(step) for step in otel.spans("dshpy.step")}
    assert all(parent_id(span) in steps | {span_id(turn)} for span in flushes)
    assert any(parent_id(span) in steps for span in flushes)  # the checkpoint before the model request
    assert otel.total("dshpy.store.flush.events", **{"dshpy.store.backend": "sqlite"}) == len(session.events)
    durations = otel.points("dshpy.store.flush.duration")
    assert sum(point.count for point in durations) == len(flushes)
    store.close()


def test_a_refused_flush_is_an_error_span(otel: Recorded, tmp_path, monkeypatch) -> None:
    from dshpy.errors import StoreUnavailableError

    store = dshpy.open_store(f"sqlite:///{tmp_path}/s.db")
    session = store.create()
    session.append("session/title", {"title": "t", "messageSeqs": [], "source": {"kind": "user"}})

    def unreachable(*_args: object) -> None:
        raise StoreUnavailableError("the disk went away")

    monkeypatch.setattr(store, "_append_checked", unreachable)
    with pytest.raises(StoreUnavailableError):
        session.flush()
    refused = otel.spans("dshpy.store.flush")[-1]
    assert refused.attributes["error.type"] == "StoreUnavailableError"
    assert refused.status.status_code is StatusCode.ERROR
    assert otel.total("dshpy.store.flush.duration", **{"error.type": "StoreUnavailableError"}) > 0
    monkeypatch.undo()
    session.close()
    store.close()


def test_compaction_span_helper(otel: Recorded) -> None:
    session = dshpy.open_store("memory:").create()
    with dshpy.telemetry.compaction_span(session, reason="context-window", **{"dshpy.compaction.events": 12}) as span:
        span.set_attribute("dshpy.compaction.summary_tokens", 300)
    with (
        pytest.raises(RuntimeError),
        dshpy.telemetry.compaction_span(session, reason="manual"),
    ):
        raise RuntimeError("summary failed")
    done, failed = otel.spans("dshpy.compaction")
    assert done.attributes["session.id"] == session.id
    assert done.attributes["dshpy.compaction.reason"] == "context-window"
    assert done.attributes["dshpy.compaction.events"] == 12
    assert done.attributes["dshpy.compaction.summary_tokens"] == 300
    assert failed.status.status_code is StatusCode.ERROR and failed.attributes["error.type"] == "RuntimeError"


def test_logged_compactions_are_counted(otel: Recorded) -> None:
    session = dshpy.open_store("memory:").create()
    session.append("compaction/start", {"compactionId": "c1", "turn": None})
    session.append("compaction/end", {"compactionId": "c1", "turn": None, "error": "the model failed"})
    assert otel.total("dshpy.compactions") == 1
    assert otel.total("dshpy.compactions", **{"error.type": "compaction_failed"}) == 1


def test_off_records_nothing_and_helpers_are_no_ops() -> None:
    assert not dshpy.telemetry.enabled()
    session = dshpy.open_store("memory:").create()
    with dshpy.telemetry.compaction_span(session, reason="manual") as span:
        assert span is None
    assert dshpy.telemetry.captured_context() is None


def test_disable_stops_recording(otel: Recorded) -> None:
    store = dshpy.open_store("memory:")
    session = store.create()
    run_turn(session, [Reply.text("one")])
    before = len(otel.spans())
    dshpy.telemetry.disable()
    run_turn(session, [Reply.text("two")])
    session.flush()
    assert len(otel.spans()) == before


def test_the_engine_wraps_a_manual_compaction_and_its_refusal_in_spans(otel: Recorded) -> None:
    from dshpy.compaction import CompactionEngine
    from dshpy.errors import NothingToCompactError
    from dshpy.testing.builders import TurnScript

    store = dshpy.open_store("memory:")
    session = store.create()
    for index in range(3):
        TurnScript(session).turn(f"task {index}: " + "please read the configuration file again " * 20, steps=2)
    session.flush()
    result = CompactionEngine().compact(session, lambda _request: "The user asked for three reads; all done.")
    empty = store.create()
    with pytest.raises(NothingToCompactError):
        CompactionEngine().compact(empty, lambda _request: "unused")
    done, refused = otel.spans("dshpy.compaction")
    assert done.attributes["session.id"] == session.id
    assert done.attributes["dshpy.compaction.reason"] == "manual"
    assert done.status.status_code is not StatusCode.ERROR
    assert refused.attributes["session.id"] == empty.id
    assert refused.status.status_code is StatusCode.ERROR
    assert refused.attributes["error.type"] == "NothingToCompactError"
    assert otel.total("dshpy.compactions") == 1  # counted from the logged compaction/end of the one that landed
    assert session.events[result.end_seq].type == "compaction/end"
