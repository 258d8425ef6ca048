"""The agent loop on the Messages API (provider ``deepseek-official``): thinking signatures logged and sent back."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from e2e_support import FAST_RETRY, of_type, read_file, stream_types

import dshpy
from dshpy.agent import Agent
from dshpy.llm import AnthropicClient, ModelConfig
from dshpy.testing.fake_model import FakeModelServer, Reply, ToolCall

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures/dsh/sessions/plain"


@pytest.fixture
def store(tmp_path):
    opened = dshpy.open_store(f"jsonl:///{tmp_path}/sessions")
    yield opened
    opened.close()


def messages_agent(session: dshpy.Session, server: FakeModelServer, model: str | None = None, **options) -> Agent:
    config = ModelConfig.from_env(
        base_url=server.base_url, api_key="k", provider="deepseek-official", model=model, env={}
    )
    options.setdefault("retry", FAST_RETRY)
    return Agent(session, AnthropicClient(config), **options)


def test_a_thinking_tool_turn_logs_dshs_replay_state_and_sends_the_signature_back(store):
    script = [
        Reply.tool_calls(
            ToolCall("read_file", '{"path": "hello.txt"}', id="toolu_1"),
            text="I'll read it.",
            reasoning="Need the file.",
            signature="sig-step-1",
        ),
        Reply.text("It says hi.", reasoning="Got it.", signature="sig-step-2"),
        Reply.text("Still hi."),
    ]
    session = store.create(cwd="/srv/app")

    async def scenario():
        with FakeModelServer(script) as server:
            agent = messages_agent(session, server, system_prompt="Be terse.", tools=[read_file])
            first = await agent.run("What does hello.txt say?")
            second = await agent.run("And now?")
            await agent.aclose()
            await agent.client.close()
            return first, second, server.requests

    first, second, requests = asyncio.run(scenario())
    assert (first.kind, first.text, second.text) == ("completed", "It says hi.", "Still hi.")

    answer = of_type(session, "assistant/message")[0].data
    source = answer["message"]["source"]
    replay = {
        "response": {"kind": "deepseek-messages", "version": 1, "model": "deepseek-v4-flash"},
        "blocks": [{"type": "reasoning", "signature": "sig-step-1"}, {"type": "text"}, {"type": "tool-call"}],
    }
    assert source == {
        "kind": "model",
        "provider": "deepseek-official",
        "model": "deepseek-v4-flash",
        "replayState": replay,
    }
    assert answer["message"]["content"][0] == {"type": "reasoning", "text": "Need the file."}  # no signature inline
    finish = answer["stream"][-1]["chunk"]
    assert finish == {"type": "finish", "reason": {"kind": "tool-calls"}, "replayState": replay}
    assert stream_types(answer["stream"])[-2:] == ["usage", "finish"]
    assert of_type(session, "request/context")[0].data == {
        "provider": "deepseek-official",
        "model": "deepseek-v4-flash",
        "contextWindow": 1000000,
    }

    # step 2 sends the step-1 answer back natively: signed thinking, text, tool_use, then the tool_result
    step2 = requests[1]
    assert step2["system"] == "Be terse."
    assert step2["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "What does hello.txt say?"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "Need the file.", "signature": "sig-step-1"},
                {"type": "text", "text": "I'll read it."},
                {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "hello.txt"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": [{"type": "text", "text": "contents of hello.txt: hi"}],
                    "is_error": False,
                }
            ],
        },
    ]
    # the next turn still carries both signatures (dsh sends every thinking block)
    third = requests[2]["messages"]
    signatures = [b.get("signature") for m in third for b in m["content"] if b["type"] == "thinking"]
    assert signatures == ["sig-step-1", "sig-step-2"]

    # the replay state is durable: a cold read of dsh's file layout gives it back
    session.flush()
    stored = [m for m in store.inspect(session.id).derive_messages() if m.role == "assistant"]
    assert stored[0].source["replayState"] == replay
    assert stored[1].source["replayState"]["blocks"][0] == {"type": "reasoning", "signature": "sig-step-2"}


def test_a_signature_is_not_replayed_to_another_model(store):
    session = store.create(cwd="/srv/app")

    async def scenario():
        with FakeModelServer([Reply.text("a", reasoning="r", signature="sig-flash"), Reply.text("b")]) as server:
            agent = messages_agent(session, server)
            await agent.run("one")
            await agent.client.close()
            other = messages_agent(session, server, model="deepseek-v4-pro", resume_marker=False)
            await other.run("two")
            await other.client.close()
            return server.requests

    requests = asyncio.run(scenario())
    thinking = [b for m in requests[1]["messages"] for b in m["content"] if b["type"] == "thinking"]
    assert thinking == [{"type": "thinking", "thinking": "r"}]  # the text goes, the foreign signature does not
    assert requests[1]["model"] == "deepseek-v4-pro"


def test_dshs_own_fixture_replays_its_signature_from_the_log():
    """The real runtime's session, read by dshpy, converts to the request dsh itself would send next."""
    path = next(FIXTURE.glob("*/text-2-prompts/session.v4.jsonl"))
    store = dshpy.open_store(f"jsonl:///{path.parents[2]}?compression=none")
    view = store.inspect("text-2-prompts")
    client = AnthropicClient(ModelConfig.from_env(api_key="k", provider="deepseek-official", env={}))
    messages = client.history().convert(view.derive_messages())
    asyncio.run(client.close())
    assert messages[0]["role"] == "system" and messages[0]["content"].startswith("You are an AI agent")
    assistant = messages[2] if messages[1]["role"] == "user" else messages[1]
    assert assistant["role"] == "assistant"
    assert assistant["content"][0] == {
        "type": "thinking",
        "thinking": "The user asks for a simple sum.",
        "signature": "sig-fixture-thinking-1",
    }


def test_request_header_logs_dshs_adapter_defaults_and_agents_md_enters_once(store, tmp_path):
    (tmp_path / "AGENTS.md").write_text("Run the tests with make check.\n")
    session = store.create(cwd=str(tmp_path))

    async def scenario():
        with FakeModelServer([Reply.text("ok"), Reply.text("ok again"), Reply.text("third")]) as server:
            agent = messages_agent(
                session, server, system_prompt="S", tools=[read_file], instructions_dir=str(tmp_path)
            )
            await agent.run("first")
            await agent.run("second")
            (tmp_path / "AGENTS.md").write_text("Run the tests with make test.\n")
            await agent.run("third")
            await agent.client.close()
            return server.requests

    requests = asyncio.run(scenario())
    header = of_type(session, "request/header")[0].data
    assert list(header["header"]) == ["config", "adapterDefaults", "tools"]
    assert header["header"]["config"] == {
        "provider": "deepseek-official",
        "model": "deepseek-v4-flash",
        "maxTokens": 256000,
        "reasoningEffort": "high",
    }
    assert header["header"]["adapterDefaults"] == {"reasoningEffort": True, "maxTokens": True}
    assert [t["name"] for t in header["header"]["tools"]] == ["read_file"]
    assert header["reason"] == "initial"

    instructions = [e for e in of_type(session, "user/message") if e.data["source"]["kind"] == "agent-instructions"]
    assert len(instructions) == 2  # written at turn 1, not again at turn 2, again when the file changed
    source = instructions[0].data["source"]
    assert (source["form"], source["baseline"]) == ("instructions", True)
    assert source["changes"][0]["action"] == "set" and source["changes"][0]["path"] == "AGENTS.md"
    assert source["changes"][0]["scope"] == ".\0AGENTS.md"
    assert source["changes"][0]["digest"] != instructions[1].data["source"]["changes"][0]["digest"]
    text = instructions[0].data["content"][0]["text"]
    assert text.startswith("<system-reminder>") and "Instructions from: AGENTS.md" in text and "make check" in text
    # it follows the prompt in the same step, and the model sees it as user content
    turn1 = [e.type for e in session.events[: instructions[0].seq + 1]]
    assert turn1[-3:] == ["system/message", "user/message", "user/message"]
    first_user = requests[0]["messages"][0]
    assert first_user["role"] == "user" and first_user["content"][0]["text"] == "first"
    assert "make check" in first_user["content"][1]["text"]


def test_explicit_max_tokens_and_effort_are_not_adapter_defaults(store):
    session = store.create(cwd="/srv/app")

    async def scenario():
        with FakeModelServer([Reply.text("ok")]) as server:
            agent = messages_agent(session, server, max_tokens=4096, reasoning_effort="low")
            await agent.run("hi")
            await agent.client.close()
            return server.requests

    requests = asyncio.run(scenario())
    header = of_type(session, "request/header")[0].data["header"]
    assert header == {
        "config": {
            "provider": "deepseek-official",
            "model": "deepseek-v4-flash",
            "maxTokens": 4096,
            "reasoningEffort": "low",
        }
    }
    assert (requests[0]["max_tokens"], requests[0]["output_config"]) == (4096, {"effort": "low"})
