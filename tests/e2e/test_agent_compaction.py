"""The agent keeps long sessions under the model's context window (issue #13), against a provider that enforces one.

``FakeModelServer(context_window=N)`` refuses any request whose counted prompt is
over ``N`` tokens with DeepSeek's context-length error, so a turn that sends too much
fails exactly as it would against the real API. The agent's compaction must prevent
that (pressure before each request) or recover from it (prune + one maximal
compaction + one retry).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from e2e_support import FAST_RETRY, of_type

import dshpy
from dshpy.agent import Agent, tool
from dshpy.compaction import PRUNE_MARKER, SUMMARY_INSTRUCTION
from dshpy.compaction.pairing import tool_link
from dshpy.llm import ChatClient, ModelConfig, to_chat_messages
from dshpy.log.messages import message_of
from dshpy.projections import USAGE, state_of
from dshpy.testing.fake_model import FakeModelServer, Reply, ToolCall, Usage, prompt_tokens

SUMMARY_NUMBERS = itertools.count(1)
SUMMARY = "## Primary Request and Intent\n- keep reading the numbered files\n\n## Next Step\n- (none)"


def is_summary_request(body: dict[str, Any]) -> bool:
    last = body["messages"][-1]
    return last["role"] == "user" and last["content"] == SUMMARY_INSTRUCTION


def responder(body: dict[str, Any]) -> Reply | None:
    """A model that reads the file the prompt names, then answers; it writes a summary when asked for one."""
    last = body["messages"][-1]
    if is_summary_request(body):
        return Reply.text(f"{SUMMARY}\n(summary {next(SUMMARY_NUMBERS)}: {len(body['messages']) - 2} messages)")
    if last["role"] == "user":
        number = last["content"].split()[1].rstrip(":")
        return Reply.tool_calls(ToolCall("read_file", json.dumps({"path": f"file-{number}.txt"}), id=f"call-{number}"))
    if last["role"] == "tool":
        return Reply.text(f"answer to {last['tool_call_id']}: the file is lorem ipsum")
    return None


@tool
def read_file(path: str) -> str:
    """Read a numbered file: every 25th is over the pruning threshold.

    Args:
        path: Path of the file.
    """
    number = int(path.removeprefix("file-").removesuffix(".txt"))
    size = 9_000 if number % 25 == 0 else 600
    return (f"{path}: " + "lorem ipsum dolor sit amet " * 400)[:size]


def client_for(server: FakeModelServer, *, window: int | None, model: str = "deepseek-chat") -> ChatClient:
    config = ModelConfig.from_env(base_url=server.base_url, api_key="k", model=model, context_window=window, env={})
    return ChatClient(config)


@contextlib.asynccontextmanager
async def agent_for(
    session: dshpy.Session, server: FakeModelServer, *, window: int | None, **options: Any
) -> AsyncIterator[Agent]:
    """An agent on a client of its own, closed afterwards."""
    options.setdefault("retry", FAST_RETRY)
    async with client_for(server, window=window) as client:
        yield Agent(session, client, **options)


async def until_a_turn_fails(agent: Agent, turns: int) -> list[str]:
    """How turn after turn ended, stopping at the first that did not complete."""
    kinds: list[str] = []
    for number in range(1, turns + 1):
        kinds.append((await agent.run(prompt(number))).kind)
        if kinds[-1] != "completed":
            break
    return kinds


def prompt(number: int) -> str:
    return f"turn {number}: read file-{number}.txt and tell me what it says"


def message_events(session: dshpy.Session) -> list[dshpy.SessionEvent]:
    """Every event that cost one request to the fake model, in request order."""
    kinds = {"assistant/message", "assistant/attempt", "compaction/summary"}
    return [e for e in session.events if e.type in kinds]


def shadowed_contents(session: dshpy.Session, seqs: list[int]) -> set[str]:
    """The chat-completions form of the shadowed nodes that derive a message (what the model must not see again)."""
    messages = [message_of(session.events[seq]) for seq in seqs]
    return {json.dumps(entry, sort_keys=True) for entry in to_chat_messages([m for m in messages if m is not None])}


def test_three_hundred_tool_turns_in_a_small_window_never_fail(tmp_path) -> None:
    """300 tool-using turns, ~95 windows' worth of tokens, a 6,000-token provider: zero failed turns."""
    window = 6_000
    store = dshpy.open_store(f"sqlite:///{tmp_path}/long.db")
    session = store.create()

    async def run() -> list[str]:
        with FakeModelServer(context_window=window, responder=responder) as server:
            async with agent_for(session, server, window=window, system_prompt="Be brief.", tools=[read_file]) as agent:
                kinds = [(await agent.run(prompt(number))).kind for number in range(1, 301)]
            requests.extend(server.requests)
            refused.append(server.refused)
        return kinds

    requests: list[dict[str, Any]] = []
    refused: list[int] = []
    kinds = asyncio.run(run())
    assert kinds == ["completed"] * 300

    dshpy.validate(session.events)
    summaries = of_type(session, "compaction/summary")
    prunes = of_type(session, "compaction/prune")
    assert len(summaries) >= 20 and len(prunes) == 12  # every 25th file was pruned once

    events = session.events
    for summary in summaries:
        seqs = list(summary.data["shadowedSeqs"])
        # tool-balanced: every call the span advertises is answered inside it, and every result in it answers one
        links = [tool_link(events[seq]) for seq in seqs]
        calls = {call for link in links if isinstance(link, tuple) for call in link}
        answers = {link for link in links if isinstance(link, str)}
        assert calls == answers, f"compaction at {summary.seq} splits a tool pair"
        assert events[summary.seq + 1].source_event_seqs == (summary.seq - 1, summary.seq, *seqs)

    # the model never sees a shadowed message again: walk the log, taking each request where it was answered
    assert len(requests) == len(message_events(session))
    pending = iter(requests)
    hidden: set[str] = set()
    for event in events:
        if event.type in ("assistant/message", "assistant/attempt", "compaction/summary"):
            body = next(pending)
            sent = {json.dumps(message, sort_keys=True) for message in body["messages"]}
            assert not sent & hidden, f"request for seq {event.seq} repeats a shadowed message"
            assert (event.type == "compaction/summary") == is_summary_request(body)
        if event.type in ("compaction/summary", "compaction/prune"):
            hidden |= shadowed_contents(session, list(event.data["shadowedSeqs"]))
    assert any(PRUNE_MARKER in body["messages"][-1].get("content", "") for body in requests)
    assert max(prompt_tokens(body) for body in requests) <= window
    assert refused == [0]

    # usage bills the summary calls
    usage = state_of(session, USAGE)
    (model,) = usage.by_model
    assert (model.model, model.summaries, usage.summaries) == ("deepseek-chat", len(summaries), len(summaries))
    billed = sum(s.data["usage"]["inputTokens"] + s.data["usage"]["cacheReadTokens"] for s in summaries)
    assert billed > 0
    answers = sum(
        e.data["usage"]["inputTokens"] + e.data["usage"]["cacheReadTokens"]
        for e in of_type(session, "assistant/message")
    )
    assert usage.total.billed_input_tokens == answers + billed

    reopened = store.inspect(session.id)
    assert reopened.derive_messages() == session.derive_messages()
    session.close()
    store.close()


def test_overflow_is_recovered_by_one_compaction_and_one_retry() -> None:
    """The config claims a bigger window than the provider has: pressure does not fire, the provider refuses,
    the agent prunes + compacts (keeping what the summary call has no room for) and retries once; from then on
    it budgets with the window the refusal named."""
    session = dshpy.MemoryStore().create()

    async def run() -> tuple[list[str], int]:
        with FakeModelServer(context_window=2_500, responder=responder) as server:
            async with agent_for(session, server, window=100_000, tools=[read_file]) as agent:
                kinds = [(await agent.run(prompt(number))).kind for number in range(1, 16)]
            return kinds, server.refused

    kinds, refused = asyncio.run(run())
    assert kinds == ["completed"] * 15
    assert refused == 1  # the refusal named the real window: later turns compact for it before sending
    attempts = of_type(session, "assistant/attempt")
    assert len(attempts) == refused
    for attempt in attempts:
        failure = attempt.data["stream"][-1]["chunk"]["reason"]["failure"]
        assert failure["code"] == "CONTEXT_WINDOW_EXCEEDED"
        after = session.events[attempt.seq + 1 : attempt.seq + 5]
        assert [e.type for e in after] == ["compaction/start", "compaction/summary", "user/message", "compaction/end"]
        assert session.events[attempt.seq + 5].type == "assistant/message"  # the retry, same step, no llm/retry
    dshpy.validate(session.events)


def test_overflow_without_anything_to_compact_keeps_the_original_error() -> None:
    session = dshpy.MemoryStore().create()

    async def run() -> dshpy.agent.TurnResult:
        with FakeModelServer([Reply.text("never")], context_window=200) as server:
            async with agent_for(session, server, window=None) as agent:
                return await agent.run("x " * 1_000)

    result = asyncio.run(run())
    assert result.kind == "error"
    assert result.error is not None and result.error["code"] == "CONTEXT_WINDOW_EXCEEDED"
    assert not [e for e in session.events if e.type.startswith("compaction/")]


def test_auto_compact_off_lets_the_window_fill() -> None:
    session = dshpy.MemoryStore().create()

    async def run() -> list[str]:
        with FakeModelServer(context_window=2_500, responder=responder) as server:
            async with agent_for(session, server, window=2_500, tools=[read_file], auto_compact=False) as agent:
                return await until_a_turn_fails(agent, 15)

    kinds = asyncio.run(run())
    assert kinds[-1] == "error"
    assert not [e for e in session.events if e.type.startswith("compaction/")]


def test_a_failing_summary_call_writes_nothing_and_the_turn_goes_on(caplog) -> None:
    """The provider fails every summary request: each pressure compaction is logged as a warning, the turn
    continues while the request still fits, and no compaction event is ever written."""

    def no_summaries(body: dict[str, Any]) -> Reply | None:
        return Reply.server_error(400, "bad summary request") if is_summary_request(body) else responder(body)

    session = dshpy.MemoryStore().create()

    async def run() -> list[str]:
        with FakeModelServer(context_window=2_500, responder=no_summaries) as server:
            async with agent_for(session, server, window=2_500, tools=[read_file]) as agent:
                return await until_a_turn_fails(agent, 15)

    with caplog.at_level(logging.WARNING, logger="dshpy.agent.compaction"):
        kinds = asyncio.run(run())
    assert kinds[0] == "completed"
    assert "step compaction failed" in caplog.text
    assert not [e for e in session.events if e.type.startswith("compaction/") and e.type != "compaction/prune"]
    dshpy.validate(session.events)


def test_the_summary_request_is_the_conversation_prefix_then_the_instruction() -> None:
    session = dshpy.MemoryStore().create()
    seen: list[dict[str, Any]] = []

    def recording(body: dict[str, Any]) -> Reply | None:
        if is_summary_request(body):
            seen.append(body)
        return responder(body)

    async def run() -> None:
        with FakeModelServer(context_window=3_000, responder=recording) as server:
            async with agent_for(session, server, window=3_000, system_prompt="Be brief.", tools=[read_file]) as agent:
                for number in range(1, 12):
                    await agent.run(prompt(number))

    asyncio.run(run())
    assert seen
    summary = of_type(session, "compaction/summary")[0]
    body = seen[0]
    assert body["messages"][0] == {"role": "system", "content": "Be brief."}
    assert body["messages"][-1] == {"role": "user", "content": SUMMARY_INSTRUCTION}
    assert len(body["messages"]) == len(summary.data["shadowedSeqs"]) + 2
    assert body["max_tokens"] == summary.data["maxTokens"] == 375  # 3,000 // 8: an eighth of the window
    assert [t["function"]["name"] for t in body["tools"]] == ["read_file"]
    assert "reasoning_content" not in json.dumps(body["messages"])


def test_request_context_records_the_configured_window() -> None:
    session = dshpy.MemoryStore().create()

    async def run() -> None:
        with FakeModelServer([Reply.text("hi", usage=Usage(prompt_tokens=10))]) as server:
            async with agent_for(session, server, window=50_000) as agent:
                await agent.run("hello")

    asyncio.run(run())
    (context,) = of_type(session, "request/context")
    assert dict(context.data) == {"provider": "openai-compatible", "model": "deepseek-chat", "contextWindow": 50_000}


@pytest.mark.parametrize(("window", "model", "cap", "threshold"), [(131_072, "deepseek-chat", 8_192, 104_857)])
def test_runtime_budgets_compact_at_eighty_percent_of_deepseek_chat(window, model, cap, threshold) -> None:
    from dshpy.agent.compaction import runtime_policy

    policy = runtime_policy(window, model)
    assert policy.summary_max_tokens == cap
    assert policy.budgets(window, 0).threshold_tokens == threshold
    assert policy.budgets(window, 8_192).threshold_tokens == threshold
