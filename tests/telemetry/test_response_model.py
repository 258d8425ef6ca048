"""``gen_ai.response.model``: the model the server says answered, on the chat span and the call's metrics."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from otel_support import Recorded

import dshpy
from dshpy.agent import Agent, TurnResult
from dshpy.llm import AnthropicClient, ChatClient, ModelConfig, ResponseInfo
from dshpy.llm.retry import RetryPolicy
from dshpy.testing.fake_model import FakeModelServer, Reply

SNAPSHOT = "deepseek-chat-2026-03-01"


def turn(replies: Sequence[Reply], response_model: str | None, *, messages_api: bool = False) -> TurnResult:
    async def run() -> TurnResult:
        with FakeModelServer(replies, response_model=response_model) as server:
            if messages_api:
                config = ModelConfig.from_env(
                    base_url=server.base_url,
                    api_key="test",
                    provider="deepseek-official",
                    model="deepseek-chat",
                    env={},
                )
            else:
                config = ModelConfig.from_env(base_url=server.base_url, api_key="test", env={})
            async with AnthropicClient(config) if messages_api else ChatClient(config) as client:
                agent = Agent(dshpy.open_store("memory:").create(), client, retry=RetryPolicy(base_delay=0.001))
                return await agent.run("hi")

    return asyncio.run(run())


def test_the_server_named_model_is_the_response_model_of_span_and_metrics(otel: Recorded) -> None:
    assert turn([Reply.text("ok")], SNAPSHOT).kind == "completed"
    chat = otel.one("chat ")
    assert chat.name == "chat deepseek-chat"  # the span is named by the model asked for
    assert chat.attributes["gen_ai.request.model"] == "deepseek-chat"
    assert chat.attributes["gen_ai.response.model"] == SNAPSHOT
    for metric in ("gen_ai.client.token.usage", "gen_ai.client.operation.time_to_first_chunk"):
        points = otel.points(metric)
        assert points and all(point.attributes["gen_ai.response.model"] == SNAPSHOT for point in points), metric
    durations = otel.points("gen_ai.client.operation.duration")
    by_operation = {point.attributes["gen_ai.operation.name"]: point.attributes for point in durations}
    assert by_operation["chat"]["gen_ai.response.model"] == SNAPSHOT
    assert "gen_ai.response.model" not in by_operation["invoke_agent"]  # a turn may span several calls


def test_the_messages_api_reports_the_model_of_its_message_start(otel: Recorded) -> None:
    assert turn([Reply.text("ok")], SNAPSHOT, messages_api=True).kind == "completed"
    chat = otel.one("chat ")
    assert chat.attributes["gen_ai.request.model"] == "deepseek-chat"
    assert chat.attributes["gen_ai.response.model"] == SNAPSHOT


def test_a_retried_call_reports_the_model_of_the_try_that_answered(otel: Recorded) -> None:
    replies = [Reply.error(503, "overloaded"), Reply.text("ok")]
    assert turn(replies, SNAPSHOT).kind == "completed"
    chat = otel.one("chat ")
    assert chat.attributes["dshpy.llm.attempt"] == 2
    assert chat.attributes["gen_ai.response.model"] == SNAPSHOT


def test_a_call_that_never_got_an_answer_has_no_response_model(otel: Recorded) -> None:
    result = turn([Reply.error(400, "bad request")], SNAPSHOT)
    assert result.kind == "error"
    chat = otel.one("chat ")
    assert "gen_ai.response.model" not in chat.attributes
    assert chat.attributes["error.type"]


def test_the_client_reports_what_the_server_named() -> None:
    async def stream(response_model: str | None) -> ResponseInfo:
        with FakeModelServer([Reply.text("ok")], response_model=response_model) as server:
            config = ModelConfig.from_env(base_url=server.base_url, api_key="test", env={})
            async with ChatClient(config) as client:
                info = ResponseInfo()
                async for _chunk in client.stream([{"role": "user", "content": "hi"}], info=info):
                    pass
                return info

    named = asyncio.run(stream(SNAPSHOT))
    assert named.model == SNAPSHOT and named.id is not None and named.id.startswith("chatcmpl-fake-")
    assert asyncio.run(stream(None)).model == "deepseek-chat"  # by default the server echoes the request's model
