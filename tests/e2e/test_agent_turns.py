"""The agent loop against FakeModelServer over real HTTP: the events it writes and what the model is sent."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from e2e_support import DSH_ONLY, chat_view, make_agent, of_type, read_file, stream_types, types

import dshpy
from dshpy.agent import tool
from dshpy.core.events import encode_event
from dshpy.testing.fake_model import FakeModelServer, Reply, ToolCall, Usage

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures/dsh/sessions/plain"


@pytest.fixture
def store(tmp_path):
    opened = dshpy.open_store(f"sqlite:///{tmp_path}/agent.db")
    yield opened
    opened.close()


def dsh_fixture_types(name: str) -> list[str]:
    path = next(FIXTURE.glob(f"*/{name}/session.v4.jsonl"))
    out = []
    for line in path.read_text().splitlines()[1:]:
        event = json.loads(line)
        runtime_context = event["type"] == "user/message" and event["data"]["source"]["kind"] != "user"
        if event["type"] not in DSH_ONLY and not runtime_context:
            out.append(event["type"])
    return out


def test_a_multi_step_tool_turn_writes_dshs_events_and_the_model_sees_exactly_the_log(store):
    script = [
        Reply.tool_calls(("read_file", '{"path": "hello.txt"}'), text="I'll read the file.", reasoning="Read it."),
        Reply.text("It says: hi", usage=Usage(300, 8, cache_hit_tokens=256)),
    ]
    session = store.create(cwd="/srv/app")

    async def scenario():
        with FakeModelServer(script) as server:
            agent = make_agent(session, server, system_prompt="You are terse.", tools=[read_file])
            result = await agent.run("What does hello.txt say?")
            await agent.client.close()
            return result, server.requests

    result, requests = asyncio.run(scenario())
    assert (result.kind, result.text, result.steps) == ("completed", "It says: hi", 2)

    # the event sequence is dsh's own (the real runtime's tool-turn fixture, minus its plugins' events)
    assert types(session) == dsh_fixture_types("tool-turn")
    assert types(session) == [
        "agent/inbox/spliced", "turn/start", "agent/inbox/spliced", "step/start", "system/message", "user/message",
        "request/header", "request/context", "assistant/message", "tool/call", "tool/result", "step/end",
        "step/start", "assistant/message", "step/end", "turn/end",
    ]  # fmt: skip
    events = session.events
    assert events[0].data["inserted"][0]["id"] == events[5].data["id"]
    assert dict(events[2].data) == {"target": "next-turn", "start": 0, "removedCount": 1, "inserted": []}
    assert events[4].surface_op == "append" and events[4].data["message"]["source"] == {"kind": "system-prompt"}
    assert dshpy.thaw(events[6].data) == {
        "header": {
            "config": {"provider": "openai-compatible", "model": "deepseek-chat"},
            "tools": [read_file.schema()],
        },
        "reason": "initial",
    }
    assert dshpy.thaw(events[7].data) == {
        "provider": "openai-compatible",
        "model": "deepseek-chat",
        "contextWindow": 131072,
    }
    first = events[8].data
    assert first["message"]["source"] == {"kind": "model", "provider": "openai-compatible", "model": "deepseek-chat"}
    assert [b["type"] for b in first["message"]["content"]] == ["reasoning", "text", "tool-call"]
    assert list(first) == ["turn", "step", "message", "usage", "stream"]
    assert stream_types(first["stream"]) == [
        "block-start", "reasoning-chunks", "block-end", "block-start", "text-chunks", "block-end",
        "block-start", "tool-call-chunks", "tool-call-chunks", "block-end", "usage", "finish",
    ]  # fmt: skip
    call, result_event = events[9], events[10]
    assert dshpy.thaw(call.data) == {
        "turn": 1,
        "step": 1,
        "callId": "call_fake_0",
        "name": "read_file",
        "arguments": '{"path": "hello.txt"}',
    }
    assert result_event.source_event_seqs == (call.seq,)
    message = result_event.data["message"]
    assert list(message) == ["role", "source", "toolCallId", "content", "isError", "id"]
    assert (message["role"], message["toolCallId"], message["isError"]) == ("tool", "call_fake_0", False)
    assert message["source"] == {"kind": "tool", "callId": "call_fake_0"}
    assert events[13].data["usage"] == {
        "inputTokens": 44,
        "outputTokens": 8,
        "cacheReadTokens": 256,
        "totalTokens": 308,
    }

    # what the server received is the derived history, converted — nothing more, nothing less
    assert requests[0]["messages"] == chat_view(session, upto=events[8].seq)
    assert requests[1]["messages"] == chat_view(session, upto=events[13].seq)
    assert requests[1]["messages"][2]["reasoning_content"] == "Read it."
    assert requests[1]["tools"] == [{"type": "function", "function": read_file.schema()}]
    assert requests[1]["stream"] is True and requests[1]["stream_options"] == {"include_usage": True}

    # the stored log is what the live session holds, and dsh's validation accepts it
    session.close()
    reopened = store.open(session.id)
    assert [encode_event(e) for e in reopened.events] == [encode_event(e) for e in events]
    dshpy.validate(reopened.events)
    reopened.close()


def test_parallel_tool_calls_run_together_and_results_follow_model_order():
    arrived: list[str] = []
    both = asyncio.Event()

    @tool
    async def meet(name: str, linger: float) -> str:
        """Return only once both calls are running (so it deadlocks if calls run one by one)."""
        arrived.append(name)
        if len(arrived) == 2:
            both.set()
        await asyncio.wait_for(both.wait(), 5)
        await asyncio.sleep(linger)
        return name

    calls = [("meet", '{"name": "slow", "linger": 0.2}', "c1"), ("meet", '{"name": "fast", "linger": 0}', "c2")]
    session = dshpy.Session.new()

    async def scenario():
        with FakeModelServer([Reply.tool_calls(*calls), Reply.text("done")]) as server:
            agent = make_agent(session, server, tools=[meet])
            result = await agent.run("go")
            await agent.client.close()
            return result

    assert asyncio.run(scenario()).kind == "completed"
    assert arrived == ["slow", "fast"]
    kinds = [
        (e.type, e.data.get("callId") or e.data.get("message", {}).get("toolCallId"))
        for e in session.events
        if e.type in ("tool/call", "tool/result")
    ]
    assert kinds == [("tool/call", "c1"), ("tool/call", "c2"), ("tool/result", "c1"), ("tool/result", "c2")]
    assert [m.text for m in session.derive_messages() if m.role == "tool"] == ["slow", "fast"]


def test_tool_failures_become_results_the_model_reads():
    @tool
    def explode() -> str:
        """Always fails."""
        raise RuntimeError("disk on fire")

    session = dshpy.Session.new()
    script = [
        Reply.tool_calls(("nope", "{}"), ("read_file", '{"file": 1}'), ("explode", "{}")),
        Reply.text("I see the errors."),
    ]

    async def scenario():
        with FakeModelServer(script) as server:
            agent = make_agent(session, server, tools=[read_file, explode])
            result = await agent.run("try")
            await agent.client.close()
            return result, server.requests

    result, requests = asyncio.run(scenario())
    assert result.kind == "completed"
    results = of_type(session, "tool/result")
    assert [r.data["error"]["code"] for r in results] == ["TOOL_NOT_FOUND", "INVALID_TOOL_INPUT", "TOOL_ERROR"]
    assert all(r.data["message"]["isError"] is True for r in results)
    tool_messages = [m for m in requests[1]["messages"] if m["role"] == "tool"]
    assert "no tool named" in tool_messages[0]["content"]
    assert "RuntimeError: disk on fire" in tool_messages[2]["content"]


def test_max_tokens_ends_the_turn_and_drops_an_unfinished_tool_call():
    session = dshpy.Session.new()
    script = [Reply.stream(text="Let me call", calls=[ToolCall("read_file", '{"path": "a')], finish="length")]

    async def scenario():
        with FakeModelServer(script) as server:
            agent = make_agent(session, server, tools=[read_file], max_tokens=16)
            result = await agent.run("go")
            await agent.client.close()
            return result, server.requests

    result, requests = asyncio.run(scenario())
    assert result.reason == {"kind": "max-tokens"}
    assert requests[0]["max_tokens"] == 16
    assert of_type(session, "request/header")[0].data["header"]["config"]["maxTokens"] == 16
    message = of_type(session, "assistant/message")[0].data
    assert [b["type"] for b in message["message"]["content"]] == ["text"]
    assert message["stream"][-1]["chunk"] == {"type": "finish", "reason": {"kind": "max-tokens"}}
    assert not of_type(session, "tool/call")
    assert types(session)[-2:] == ["step/end", "turn/end"]


def test_max_steps_bounds_a_turn():
    session = dshpy.Session.new()

    async def scenario():
        with FakeModelServer(default=Reply.tool_calls(("read_file", '{"path": "x"}'))) as server:
            agent = make_agent(session, server, tools=[read_file], max_steps=2)
            result = await agent.run("loop forever")
            await agent.client.close()
            return result

    result = asyncio.run(scenario())
    assert result.kind == "error" and result.error["code"] == "MAX_STEPS"
    assert result.steps == 2
    assert len(of_type(session, "step/start")) == 2


def test_stream_iterator_and_callbacks_get_chunks_live():
    session = dshpy.Session.new()

    async def scenario():
        with FakeModelServer([Reply.text("Hello there"), Reply.text("Again")]) as server:
            agent = make_agent(session, server)
            seen = []
            async for update in agent.stream("hi"):
                seen.append(update)
            texts = []
            await agent.run("more", on_chunk=lambda u: texts.append(u.text))
            await agent.client.close()
            return agent, seen, texts

    agent, seen, texts = asyncio.run(scenario())
    chunk_text = "".join(u.text for u in seen if isinstance(u, dshpy.agent.ChunkUpdate))
    assert chunk_text == "Hello there"
    assert [u.event.type for u in seen if isinstance(u, dshpy.agent.EventUpdate)][-1] == "turn/end"
    assert "".join(texts) == "Again"
    assert agent.last_result.turn == 2
    assert not any(e.type.startswith("plugin:") or "chunk" in e.type for e in session.events)  # never per chunk


def test_an_empty_system_prompt_still_reserves_the_head_and_a_new_prompt_replaces_it():
    session = dshpy.Session.new()

    async def scenario():
        with FakeModelServer(default=Reply.text("ok")) as server:
            agent = make_agent(session, server)
            await agent.run("one")
            agent.system_prompt = "Now be formal."
            await agent.run("two")
            await agent.run("three")  # unchanged: nothing new logged
            await agent.client.close()
            return server.requests

    requests = asyncio.run(scenario())
    heads = of_type(session, "system/message")
    assert len(heads) == 2
    assert heads[0].data["message"]["content"] == [] and heads[0].surface_op == "append"
    assert heads[1].surface_op == dshpy.SurfaceReplace(heads[0].seq, heads[0].seq)
    assert heads[1].source_event_seqs == (heads[0].seq,)
    assert session.surface_nodes[0] == heads[1].seq
    assert requests[0]["messages"] == [{"role": "user", "content": "one"}]
    assert requests[1]["messages"][0] == {"role": "system", "content": "Now be formal."}
    assert requests[2]["messages"] == chat_view(session, upto=session.events[-3].seq)


def test_request_header_and_context_are_logged_only_when_they_change():
    session = dshpy.Session.new()

    async def scenario():
        with FakeModelServer(default=Reply.text("ok")) as server:
            agent = make_agent(session, server)
            await agent.run("one")
            await agent.run("two")
            agent.add_tool(read_file)
            await agent.run("three")
            await agent.client.close()

    asyncio.run(scenario())
    headers = of_type(session, "request/header")
    assert [h.data["reason"] for h in headers] == ["initial", "change"]
    assert "tools" not in headers[0].data["header"] and headers[1].data["header"]["tools"][0]["name"] == "read_file"
    assert len(of_type(session, "request/context")) == 1
