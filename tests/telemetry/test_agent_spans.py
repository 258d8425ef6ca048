"""Spans of an agent turn (in-memory exporter): the tree, the GenAI attributes, the numbers every span carries."""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.trace import SpanKind, StatusCode
from otel_support import Recorded, parent_id, run_turn, span_id

import dshpy
from dshpy.agent import tool
from dshpy.projections import USAGE, state_of
from dshpy.testing.fake_model import Reply, Usage


@tool
def read_file(path: str) -> str:
    """Read a text file."""
    return f"contents of {path}"


def two_step_turn(session: dshpy.Session) -> None:
    replies = [
        Reply.tool_calls(("read_file", '{"path": "a.txt"}', "call-1"), usage=Usage(100, 10, cache_hit_tokens=40)),
        Reply.text("It says hello.", usage=Usage(150, 7, reasoning_tokens=3)),
    ]
    result = run_turn(session, replies, "what does a.txt say?", tools=[read_file], max_tokens=500)
    assert result.kind == "completed"


def test_a_turn_is_one_tree_turn_step_chat_tool(otel: Recorded) -> None:
    store = dshpy.open_store("memory:")
    session = store.create()
    two_step_turn(session)
    turn = otel.one("invoke_agent")
    steps = sorted(otel.spans("dshpy.step"), key=lambda span: span.attributes["dshpy.step"])
    chats = sorted(otel.spans("chat "), key=lambda span: span.attributes["dshpy.step"])
    tool_span = otel.one("execute_tool")
    assert turn.name == "invoke_agent dshpy" and turn.parent is None and turn.kind is SpanKind.INTERNAL
    assert [parent_id(step) for step in steps] == [span_id(turn), span_id(turn)]
    assert [parent_id(chat) for chat in chats] == [span_id(step) for step in steps]
    assert parent_id(tool_span) == span_id(steps[0])
    assert {span.context.trace_id for span in otel.spans()} == {turn.context.trace_id}
    # every span says which session, turn and step it belongs to
    for span in [turn, *steps, *chats, tool_span, *otel.spans("dshpy.store.flush")]:
        assert span.attributes["session.id"] == session.id, span.name
        assert span.attributes["dshpy.turn"] == 1, span.name
    for span in [*steps, *chats, tool_span]:
        assert span.attributes["dshpy.step"] in (1, 2)
    assert tool_span.attributes["dshpy.step"] == 1
    session.close()


def test_model_call_attributes_follow_the_genai_conventions(otel: Recorded) -> None:
    session = dshpy.open_store("memory:").create()
    two_step_turn(session)
    first, second = sorted(otel.spans("chat "), key=lambda span: span.attributes["dshpy.step"])
    assert first.name == "chat deepseek-chat" and first.kind is SpanKind.CLIENT
    attributes = first.attributes
    assert attributes["gen_ai.operation.name"] == "chat"
    assert attributes["gen_ai.provider.name"] == "openai"  # an OpenAI-compatible server; server.address names it
    assert attributes["gen_ai.request.model"] == "deepseek-chat"
    assert attributes["gen_ai.request.max_tokens"] == 500
    assert attributes["gen_ai.conversation.id"] == session.id
    assert attributes["server.address"] == "127.0.0.1" and isinstance(attributes["server.port"], int)
    assert attributes["gen_ai.usage.input_tokens"] == 100  # the conventions' input includes the cached tokens
    assert attributes["gen_ai.usage.cache_read.input_tokens"] == 40
    assert attributes["gen_ai.usage.output_tokens"] == 10
    assert attributes["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert attributes["gen_ai.response.time_to_first_chunk"] >= 0
    assert attributes["dshpy.llm.attempt"] == 1
    assert "gen_ai.input.messages" not in attributes and "gen_ai.output.messages" not in attributes
    assert second.attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert second.attributes["gen_ai.usage.reasoning.output_tokens"] == 3
    assert first.status.status_code is StatusCode.UNSET


def test_tool_span_names_the_tool_and_the_call(otel: Recorded) -> None:
    session = dshpy.open_store("memory:").create()
    two_step_turn(session)
    span = otel.one("execute_tool")
    call = next(event for event in session.events if event.type == "tool/call")
    assert span.name == "execute_tool read_file" and span.kind is SpanKind.INTERNAL
    assert span.attributes["gen_ai.operation.name"] == "execute_tool"
    assert span.attributes["gen_ai.tool.name"] == "read_file"
    assert span.attributes["gen_ai.tool.call.id"] == call.data["callId"] == "call-1"
    assert span.attributes["gen_ai.tool.type"] == "function"
    assert span.attributes["gen_ai.tool.description"] == "Read a text file."
    assert "gen_ai.tool.call.arguments" not in span.attributes
    assert otel.total("dshpy.tool.calls", **{"gen_ai.tool.name": "read_file"}) == 1
    assert otel.total("gen_ai.client.operation.duration", **{"gen_ai.operation.name": "execute_tool"}) > 0


def test_turn_tokens_match_the_usage_projection(otel: Recorded) -> None:
    session = dshpy.open_store("memory:").create()
    two_step_turn(session)
    usage = state_of(session, USAGE).total
    turn = otel.one("invoke_agent")
    chats = otel.spans("chat ")
    assert turn.attributes["gen_ai.usage.input_tokens"] == usage.billed_input_tokens == 250
    assert turn.attributes["gen_ai.usage.output_tokens"] == usage.output_tokens == 17
    assert sum(chat.attributes["gen_ai.usage.input_tokens"] for chat in chats) == usage.billed_input_tokens
    assert otel.total("gen_ai.client.token.usage", **{"gen_ai.token.type": "input"}) == usage.billed_input_tokens
    assert otel.total("gen_ai.client.token.usage", **{"gen_ai.token.type": "output"}) == usage.output_tokens
    assert turn.attributes["dshpy.turn.reason"] == "completed"


def test_every_event_of_the_turn_is_a_session_event_on_its_step_or_turn(otel_per_event: Recorded) -> None:
    otel = otel_per_event
    session = dshpy.open_store("memory:").create()
    two_step_turn(session)
    recorded: dict[int, tuple[str, str]] = {}
    for span in otel.spans("invoke_agent") + otel.spans("dshpy.step"):
        for event in span.events:
            assert event.name == "session.event"
            assert event.attributes["session.id"] == session.id
            assert event.attributes["event.seq"] not in recorded
            recorded[event.attributes["event.seq"]] = (event.attributes["event.type"], span.name)
    start = next(event.seq for event in session.events if event.type == "turn/start")
    logged = {event.seq: event.type for event in session.events if event.seq >= start}
    assert {seq: kind for seq, (kind, _span) in recorded.items()} == logged
    assert recorded[start][1] == "invoke_agent dshpy"
    tool_call = next(event.seq for event in session.events if event.type == "tool/call")
    assert recorded[tool_call][1] == "dshpy.step"
    counted = otel.total("dshpy.session.events", **{"event.type": "tool/call"})
    assert counted == 1
    for point in otel.points("dshpy.session.events"):
        assert "session.id" not in point.attributes  # a metric is never split by an unbounded id


def test_metrics_of_model_calls(otel: Recorded) -> None:
    session = dshpy.open_store("memory:").create()
    two_step_turn(session)
    chat = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "deepseek-chat"}
    durations = [p for p in otel.points("gen_ai.client.operation.duration") if chat.items() <= p.attributes.items()]
    assert sum(point.count for point in durations) == 2
    assert list(durations[0].explicit_bounds)[:3] == [0.01, 0.02, 0.04]
    first_chunk = otel.points("gen_ai.client.operation.time_to_first_chunk")
    assert sum(point.count for point in first_chunk) == 2
    tokens = otel.points("gen_ai.client.token.usage")
    assert {point.attributes["gen_ai.token.type"] for point in tokens} == {"input", "output"}
    assert list(tokens[0].explicit_bounds)[:3] == [1, 4, 16]
    agent = otel.total("gen_ai.client.operation.duration", **{"gen_ai.operation.name": "invoke_agent"})
    assert agent > 0


def test_the_turn_joins_the_callers_trace(otel: Recorded) -> None:
    session = dshpy.open_store("memory:").create()
    tracer = otel.tracer_provider.get_tracer("host-app")
    with tracer.start_as_current_span("handle request") as outer:
        run_turn(session, [Reply.text("hello")])
    turn = otel.one("invoke_agent")
    assert parent_id(turn) == outer.get_span_context().span_id
    assert turn.context.trace_id == outer.get_span_context().trace_id
    assert trace.get_current_span() is trace.INVALID_SPAN


def test_a_forked_sessions_turns_link_to_the_parent(otel: Recorded) -> None:
    store = dshpy.open_store("memory:")
    parent = store.create()
    run_turn(parent, [Reply.text("first")])
    parent_turn = otel.one("invoke_agent")
    parent.flush()
    child = store.fork(parent.id)
    run_turn(child, [Reply.text("second")])
    child_turn = next(span for span in otel.spans("invoke_agent") if span.attributes["session.id"] == child.id)
    assert child_turn.attributes["dshpy.session.parent_id"] == parent.id
    assert [link.context.span_id for link in child_turn.links] == [parent_turn.context.span_id]
    assert child_turn.links[0].attributes["dshpy.session.parent_id"] == parent.id
    child.close()
    parent.close()
