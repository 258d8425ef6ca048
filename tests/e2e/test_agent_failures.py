"""Failed model calls (logged attempts, retries, usage), and cancellation, over real HTTP."""

from __future__ import annotations

import asyncio
import time

import pytest
from e2e_support import chat_view, make_agent, of_type, read_file, stream_types, types

import dshpy
from dshpy.agent import tool
from dshpy.llm import RetryPolicy
from dshpy.projections import USAGE, state_of
from dshpy.testing.fake_model import FakeModelServer, Reply, Usage


def run_scenario(script, prompt="hi", *, session=None, **options):
    session = session or dshpy.Session.new()

    async def scenario():
        with FakeModelServer(script) as server:
            agent = make_agent(session, server, **options)
            result = await agent.run(prompt)
            await agent.client.close()
            return result, server.requests

    result, requests = asyncio.run(scenario())
    return session, result, requests


def test_retries_log_every_failed_try_and_the_usage_counts_them():
    script = [
        Reply.rate_limited(0),
        Reply.server_error(),
        Reply.text("a broken answer", pieces=5, usage=Usage(50, 5, cache_hit_tokens=10), usage_at="first").cut(4),
        Reply.text("fine", usage=Usage(200, 10)),
    ]
    session, result, requests = run_scenario(script, system_prompt="S")
    assert result.kind == "completed" and result.text == "fine"
    assert types(session)[8:] == [
        "assistant/attempt", "llm/retry", "llm/retry-started",
        "assistant/attempt", "llm/retry", "llm/retry-started",
        "assistant/attempt", "llm/retry", "llm/retry-started",
        "assistant/message", "step/end", "turn/end",
    ]  # fmt: skip
    attempts = of_type(session, "assistant/attempt")
    failures = [a.data["stream"][-1]["chunk"]["reason"] for a in attempts]
    assert [f["kind"] for f in failures] == ["error"] * 3
    assert [f["failure"]["code"] for f in failures] == ["RATE_LIMITED", "SERVER", "STREAM_INTERRUPTED"]
    assert list(attempts[0].data) == ["turn", "step", "stream"]
    assert stream_types(attempts[2].data["stream"]) == ["usage", "block-start", "text-chunks", "finish"]
    retries = of_type(session, "llm/retry")
    assert [r.data["retry"] for r in retries] == [1, 2, 3]
    assert len({r.data["retryId"] for r in retries}) == 1
    assert retries[0].data["failure"]["code"] == "RATE_LIMITED" and retries[0].data["delayMs"] == 0
    assert retries[0].data["provider"] == "openai-compatible" and retries[0].data["mode"] == "normal"
    assert [r.data["retry"] for r in of_type(session, "llm/retry-started")] == [1, 2, 3]

    # the model never saw a failed try: every request carried the same history
    assert all(request["messages"] == requests[0]["messages"] for request in requests)
    assert requests[3]["messages"] == chat_view(session, upto=session.events[-3].seq)

    # billed tokens include the broken attempt's usage chunk
    usage = state_of(session, USAGE)
    assert (usage.messages, usage.failed_attempts) == (1, 3)
    assert (usage.total.input_tokens, usage.total.cache_read_tokens, usage.total.output_tokens) == (240, 10, 15)
    assert result.usage["inputTokens"] == 240 and result.usage["outputTokens"] == 15
    dshpy.validate(session.events)


def test_retry_after_is_honoured():
    started = time.monotonic()
    session, result, _ = run_scenario([Reply.rate_limited(0.4), Reply.text("ok")], retry=RetryPolicy(base_delay=30.0))
    assert time.monotonic() - started >= 0.4
    assert of_type(session, "llm/retry")[0].data["delayMs"] == 400
    assert result.kind == "completed"


def test_exhausted_retries_end_the_turn_with_the_last_failure():
    script = [Reply.server_error(502), Reply.server_error(503), Reply.server_error(504)]
    session, result, requests = run_scenario(script, retry=RetryPolicy(max_retries=2, base_delay=0.001))
    assert len(requests) == 3
    assert result.reason["kind"] == "error"
    assert result.error["code"] == "SERVER" and result.error["status"] == 504
    assert len(of_type(session, "assistant/attempt")) == 3 and len(of_type(session, "llm/retry")) == 2
    assert types(session)[-2:] == ["step/end", "turn/end"]


@pytest.mark.parametrize(
    ("reply", "code"),
    [
        (Reply.context_window_exceeded("deepseek"), "CONTEXT_WINDOW_EXCEEDED"),
        (Reply.context_window_exceeded("openai"), "CONTEXT_WINDOW_EXCEEDED"),
        (Reply.unauthorized(), "INVALID_CREDENTIAL"),
    ],
)
def test_permanent_failures_are_not_retried(reply, code):
    session, result, requests = run_scenario([reply, Reply.text("never")])
    assert len(requests) == 1
    assert result.reason["kind"] == "error" and result.error["code"] == code
    assert not of_type(session, "llm/retry")
    assert len(of_type(session, "assistant/attempt")) == 1
    if code == "INVALID_CREDENTIAL":
        assert "DEEPSEEK_API_KEY" in result.error["message"]


def test_an_unreachable_server_is_retried_then_reported():
    session = dshpy.Session.new()
    with FakeModelServer() as server:
        agent = make_agent(session, server, retry=RetryPolicy(max_retries=1, base_delay=0.001))
    # the server is closed now: connections are refused

    async def scenario():
        result = await agent.run("anyone?")
        await agent.client.close()
        return result

    result = asyncio.run(scenario())
    assert result.error["code"] == "CONNECTION"
    assert len(of_type(session, "assistant/attempt")) == 2


def cancel_on_first_text(agent):
    def on_chunk(update):
        if update.text:
            agent.cancel()

    return on_chunk


def test_cancel_mid_stream_keeps_the_streamed_text_as_an_interrupted_message():
    session = dshpy.Session.new()

    async def scenario():
        with FakeModelServer(
            [Reply.text("Hello world, this is long", pieces=5).stall(3)], default=Reply.text("ok")
        ) as server:
            agent = make_agent(session, server)
            aborted = await agent.run("talk", on_chunk=cancel_on_first_text(agent))
            following = await agent.run("again")
            await agent.client.close()
            return aborted, following, server.requests

    aborted, following, requests = asyncio.run(scenario())
    assert aborted.reason == {"kind": "aborted", "reason": {"kind": "user"}}
    assert aborted.text in ("Hello", "Hello worl")  # what had arrived when the cancel landed
    message = of_type(session, "assistant/message")[0]
    assert message.data["interrupted"] is True
    assert message.data["message"]["content"] == [{"type": "text", "text": aborted.text}]
    assert message.data["stream"][-1]["chunk"]["reason"]["kind"] == "aborted"
    assert types(session)[8:11] == ["assistant/message", "step/end", "turn/end"]
    assert following.kind == "completed"
    assert {"role": "assistant", "content": aborted.text} in requests[1]["messages"]
    dshpy.validate(session.events)


def test_cancel_before_any_text_logs_an_attempt():
    session = dshpy.Session.new()

    async def scenario():
        with FakeModelServer([Reply.hang()]) as server:
            agent = make_agent(session, server)
            turn = asyncio.ensure_future(agent.run("hello?"))
            await asyncio.to_thread(server.wait_for_requests, 1)
            assert agent.cancel()
            result = await turn
            await agent.client.close()
            return result

    result = asyncio.run(scenario())
    assert result.kind == "aborted"
    assert types(session)[-3:] == ["assistant/attempt", "step/end", "turn/end"]
    assert not of_type(session, "assistant/message")


def test_cancel_during_tools_answers_every_call():
    release = asyncio.Event()

    @tool
    async def block(name: str) -> str:
        """Wait for a release that never comes."""
        await release.wait()
        return name

    session = dshpy.Session.new()
    script = [Reply.tool_calls(("block", '{"name": "a"}', "c1"), ("block", '{"name": "b"}', "c2"))]

    async def scenario():
        with FakeModelServer(script) as server:
            agent = make_agent(session, server, tools=[block], parallel_tools=False)
            turn = asyncio.ensure_future(agent.run("go"))
            while not of_type(session, "tool/call"):
                await asyncio.sleep(0.01)
            agent.cancel()
            result = await turn
            await agent.client.close()
            return result

    result = asyncio.run(scenario())
    assert result.kind == "aborted"
    assert types(session)[-6:] == ["tool/call", "tool/result", "tool/call", "tool/result", "step/end", "turn/end"]
    first, second = of_type(session, "tool/result")
    assert first.data["error"] == {"name": "AbortError", "code": "TOOL_ABORTED"}
    assert "Do not retry blindly" in first.data["message"]["content"][0]["text"]
    assert second.data["error"] == {"name": "AbortError", "code": "TOOL_ABORTED_BEFORE_DISPATCH"}
    assert second.data["message"]["content"][0]["text"] == "Error: tool call aborted before dispatch"
    calls = of_type(session, "tool/call")
    assert first.source_event_seqs == (calls[0].seq,) and second.source_event_seqs == (calls[1].seq,)
    dshpy.validate(session.events)


def test_cancelling_the_caller_closes_the_turn_and_propagates():
    session = dshpy.Session.new()

    async def scenario():
        with FakeModelServer([Reply.hang()]) as server:
            agent = make_agent(session, server, tools=[read_file])
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(agent.run("hello?"), 0.3)
            await agent.client.close()

    asyncio.run(scenario())
    assert session.events[-1].type == "turn/end"
    assert session.events[-1].data["reason"]["kind"] == "aborted"
