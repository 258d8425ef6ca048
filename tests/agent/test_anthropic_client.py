"""AnthropicClient against FakeModelServer's Messages dialect over real HTTP: chunks, requests and failures."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from dshpy.llm import AnthropicClient, LlmError, ModelConfig, ModelTimeouts, make_client
from dshpy.llm.anthropic import messages_url
from dshpy.llm.client import ChatClient
from dshpy.llm.stream import AssistantStreamAccumulator
from dshpy.testing.fake_model import FakeModelServer, Reply, ToolCall, Usage


def config_for(server: FakeModelServer, **options: Any) -> ModelConfig:
    return ModelConfig.from_env(
        base_url=server.base_url, api_key="test-key", provider="deepseek-official", env={}, **options
    )


def collect(server: FakeModelServer, messages: list[dict[str, Any]], **options: Any) -> list[dict[str, Any]]:
    async def run() -> list[dict[str, Any]]:
        async with AnthropicClient(config_for(server)) as client:
            return [chunk async for chunk in client.stream(messages, **options)]

    return asyncio.run(run())


def failure(server: FakeModelServer, **config: Any) -> tuple[LlmError, list[dict[str, Any]]]:
    seen: list[dict[str, Any]] = []

    async def run() -> None:
        async with AnthropicClient(config_for(server, **config)) as client:
            async for chunk in client.stream([{"role": "user", "content": [{"type": "text", "text": "hi"}]}]):
                seen.append(chunk)

    with pytest.raises(LlmError) as caught:
        asyncio.run(run())
    return caught.value, seen


PROMPT = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": [{"type": "text", "text": "What is 2 + 2?"}]},
]
TOOLS = [{"name": "bash", "description": "Run a command.", "parameters": {"type": "object", "properties": {}}}]


def test_provider_deepseek_official_selects_the_messages_api_with_dshs_defaults():
    config = ModelConfig.from_env(api_key="k", provider="deepseek-official", env={})
    assert (config.base_url, config.model, config.context_window) == (
        "https://api.deepseek.com/anthropic",
        "deepseek-v4-flash",
        1_000_000,
    )
    assert config.wire_format == "messages"
    assert messages_url(config.base_url) == "https://api.deepseek.com/anthropic/v1/messages"
    assert messages_url("http://h:1/x/v1/") == "http://h:1/x/v1/messages"  # no second /v1
    assert isinstance(make_client(ModelConfig.from_env(api_key="k", env={})), ChatClient)
    env = {"DEEPSEEK_BASE_URL": "http://127.0.0.1:9/anthropic", "DEEPSEEK_API_KEY": "k"}
    assert ModelConfig.from_env(provider="deepseek-official", env=env).base_url == "http://127.0.0.1:9/anthropic"


def test_thinking_text_and_usage_map_to_dshs_chunks_with_the_signature_in_the_finish():
    reply = Reply.text(
        "2 + 2 = 4.", reasoning="A simple sum.", signature="sig-1", usage=Usage(300, 12, cache_hit_tokens=256)
    )
    with FakeModelServer([reply]) as server:
        chunks = collect(server, PROMPT, tools=TOOLS, max_tokens=1000, reasoning_effort="max")
        request, headers = server.requests[0], server.request_headers[0]
    kinds = [c["type"] for c in chunks]
    assert kinds[0] == "block-start" and kinds[-2:] == ["usage", "finish"]
    assert [c for c in chunks if c["type"] == "block-end"] == [
        {"type": "block-end", "index": 0, "block": {"type": "reasoning", "text": "A simple sum."}},
        {"type": "block-end", "index": 1, "block": {"type": "text", "text": "2 + 2 = 4."}},
    ]
    assert "".join(c["text"] for c in chunks if c["type"] == "text-delta") == "2 + 2 = 4."
    # disjoint buckets, dsh's key order, total = everything billed
    assert chunks[-2]["usage"] == {
        "inputTokens": 44,
        "outputTokens": 12,
        "cacheReadTokens": 256,
        "cacheWriteTokens": 0,
        "totalTokens": 312,
    }
    assert chunks[-1] == {
        "type": "finish",
        "reason": {"kind": "stop"},
        "replayState": {
            "response": {"kind": "deepseek-messages", "version": 1, "model": "deepseek-v4-flash"},
            "blocks": [{"type": "reasoning", "signature": "sig-1"}, {"type": "text"}],
        },
    }
    # the request is dsh's Messages body
    assert headers["x-api-key"] == "test-key" and headers["anthropic-version"] == "2023-06-01"
    assert request["model"] == "deepseek-v4-flash" and request["stream"] is True
    assert request["system"] == "Be brief."
    assert request["messages"] == PROMPT[1:]
    assert (request["max_tokens"], request["thinking"], request["output_config"]) == (
        1000,
        {"type": "enabled"},
        {"effort": "max"},
    )
    assert request["tools"] == [
        {"name": "bash", "description": "Run a command.", "input_schema": {"type": "object", "properties": {}}}
    ]


def test_defaults_max_tokens_and_effort_as_dsh_and_off_disables_thinking():
    with FakeModelServer([Reply.text("a"), Reply.text("b")]) as server:
        collect(server, PROMPT)
        collect(server, PROMPT, reasoning_effort="off")
        first, second = server.requests
    assert (first["max_tokens"], first["thinking"], first["output_config"]) == (
        256000,
        {"type": "enabled"},
        {"effort": "high"},
    )
    assert second["thinking"] == {"type": "disabled"} and "output_config" not in second
    with FakeModelServer([Reply.text("never sent")]) as server:
        with pytest.raises(LlmError, match="reasoning effort 'medium'"):
            collect(server, PROMPT, reasoning_effort="medium")
        assert server.requests == []


def test_tool_use_streams_its_arguments_as_tool_call_deltas():
    reply = Reply.tool_calls(ToolCall("bash", '{"command": "echo hi"}', id="toolu_1", pieces=3), text="Running it.")
    with FakeModelServer([reply]) as server:
        chunks = collect(server, PROMPT, tools=TOOLS)
    deltas = [c for c in chunks if c["type"] == "tool-call-delta"]
    assert deltas[0] == {"type": "tool-call-delta", "index": 1, "id": "toolu_1", "name": "bash", "argumentsDelta": ""}
    assert "".join(d["argumentsDelta"] for d in deltas) == '{"command": "echo hi"}'
    assert all("name" not in d for d in deltas[1:])
    end = [c for c in chunks if c["type"] == "block-end"][-1]
    assert end["block"] == {"type": "tool-call", "id": "toolu_1", "name": "bash", "arguments": '{"command": "echo hi"}'}
    assert chunks[-1]["reason"] == {"kind": "tool-calls"}
    assert chunks[-1]["replayState"]["blocks"] == [{"type": "text"}, {"type": "tool-call"}]
    # the packed stream splits the tool run where the name stops being present, as dsh's fixture does
    accumulator = AssistantStreamAccumulator()
    for number, chunk in enumerate(chunks):
        accumulator.push(chunk, 1000 + number)
    runs = [r for r in accumulator.records if r["type"] == "tool-call-chunks"]
    assert [("name" in r, len(r["args"])) for r in runs] == [(True, 1), (False, 3)]
    assert accumulator.replay_state == chunks[-1]["replayState"]


def test_max_tokens_stop_reason_finishes_max_tokens():
    with FakeModelServer([Reply.length("cut sho")]) as server:
        chunks = collect(server, PROMPT)
    assert chunks[-1]["reason"] == {"kind": "max-tokens"}


@pytest.mark.parametrize(
    ("reply", "code", "retryable", "status"),
    [
        (Reply.rate_limited(retry_after=3), "RATE_LIMITED", True, 429),
        (Reply.server_error(500), "SERVER", True, 500),
        (Reply.overloaded(), "SERVER", True, 529),
        (Reply.context_window_exceeded(window=1000, requested=2000), "CONTEXT_WINDOW_EXCEEDED", False, 400),
        (Reply.unauthorized(), "INVALID_CREDENTIAL", False, 401),
        (Reply.error(400, "tools.0: bad schema"), "INVALID_REQUEST", False, 400),
    ],
)
def test_http_errors_map_to_the_same_failure_codes_as_the_chat_client(reply, code, retryable, status):
    with FakeModelServer([reply]) as server:
        error, seen = failure(server)
    assert (error.code, error.retryable, error.failure["status"], seen) == (code, retryable, status, [])
    if status == 429:
        assert error.retry_after_ms == 3000
    if status == 529:
        assert "overloaded" in error.failure["message"]


def test_a_dropped_stream_is_interrupted_after_the_chunks_it_delivered():
    with FakeModelServer([Reply.text("one two three", reasoning="think", signature="s").cut(3)]) as server:
        error, seen = failure(server)
    assert error.code == "STREAM_INTERRUPTED" and error.retryable
    assert seen and seen[0] == {"type": "block-start", "index": 0, "blockType": "reasoning"}
    assert all(c["type"] != "finish" for c in seen)


def test_an_in_band_error_event_is_classified_by_its_type_without_a_status():
    with FakeModelServer([Reply.text("one two three").fail(2, "overloaded_error")]) as server:
        error, seen = failure(server)
    assert (error.code, error.retryable, "status" in error.failure) == ("SERVER", True, False)
    assert seen  # the partial stream stays valid
    with FakeModelServer([Reply.text("x").fail(1, "invalid_request_error")]) as server:
        error, _ = failure(server)
    assert error.code == "INVALID_REQUEST" and not error.retryable


def test_a_server_that_stalls_mid_stream_times_out_on_the_read_limit():
    with FakeModelServer([Reply.text("one two three").stall(2)]) as server:
        error, _ = failure(server, timeouts=ModelTimeouts(read=0.3))
        server.release()
    assert error.code == "TIMEOUT" and "read timeout" in error.failure["message"]


def test_an_unreachable_server_is_a_connection_failure():
    with FakeModelServer() as server:
        base = server.base_url
    config = ModelConfig.from_env(base_url=base, api_key="k", provider="deepseek-official", env={})

    async def run() -> None:
        async with AnthropicClient(config) as client:
            async for _ in client.stream(PROMPT):
                pass

    with pytest.raises(LlmError) as caught:
        asyncio.run(run())
    assert caught.value.code == "CONNECTION" and base in caught.value.failure["message"]


def test_the_chat_dialect_reports_an_in_band_error_too():
    async def run() -> None:
        config = ModelConfig.from_env(base_url=server.base_url, api_key="k", env={})
        async with ChatClient(config) as client:
            async for _ in client.stream([{"role": "user", "content": "hi"}]):
                pass

    with (
        FakeModelServer([Reply.text("one two three").fail(2, "overloaded_error")]) as server,
        pytest.raises(LlmError) as caught,
    ):
        asyncio.run(run())
    assert caught.value.code == "SERVER" and "overloaded" in caught.value.failure["message"]
