"""Hooks and injection: turn-start, pre-step, tool-call, turn-stopping, agent.inject."""

from __future__ import annotations

import asyncio

import pytest
from e2e_support import make_agent, of_type, read_file, types

import dshpy
from dshpy.testing.fake_model import FakeModelServer, Reply


def run_with(script, setup, prompt="hi", **options):
    session = dshpy.Session.new()

    async def scenario():
        with FakeModelServer(script) as server:
            agent = make_agent(session, server, **options)
            setup(agent)
            result = await agent.run(prompt)
            await agent.client.close()
            return result, server.requests

    result, requests = asyncio.run(scenario())
    return session, result, requests


def test_turn_start_injection_enters_the_first_step_after_the_prompt():
    seen = []

    def setup(agent):
        def on_start(payload):
            seen.append((payload.turn, payload.prompt["content"][0]["text"]))
            payload.agent.inject("Context: the user is in Paris.", source={"kind": "plugin:location"})

        agent.on("turn-start", on_start)

    session, _, requests = run_with([Reply.text("Bonjour")], setup)
    assert seen == [(1, "hi")]
    assert types(session)[:8] == [
        "agent/inbox/spliced", "turn/start", "agent/inbox/spliced", "agent/inbox/spliced", "agent/inbox/spliced",
        "step/start", "system/message", "user/message",
    ]  # fmt: skip
    insert, claim = session.events[3].data, session.events[4].data
    assert (insert["target"], insert["start"], claim["target"], claim["removedCount"]) == (
        "next-step",
        0,
        "next-step",
        1,
    )
    assert requests[0]["messages"] == [
        {"role": "user", "content": "hi"},
        {"role": "user", "content": "Context: the user is in Paris."},
    ]
    assert session.derive_messages()[1].source == {"kind": "plugin:location"}


def test_pre_step_block_ends_the_turn_blocked_without_a_step():
    session, result, requests = run_with([], lambda a: a.on("pre-step", lambda p: p.block("quota")))
    assert result.reason == {"kind": "blocked"} and result.blocked_reason == "quota"
    assert types(session) == ["agent/inbox/spliced", "turn/start", "agent/inbox/spliced", "turn/end"]
    assert requests == []


def test_tool_call_hook_can_deny_a_call():
    def setup(agent):
        async def guard(payload):
            if "secret" in payload.arguments:
                payload.deny("reading secrets is not allowed")

        agent.on("tool-call", guard)

    script = [Reply.tool_calls(("read_file", '{"path": "secret.txt"}')), Reply.text("ok")]
    session, result, _ = run_with(script, setup, tools=[read_file])
    denied = of_type(session, "tool/result")[0]
    assert denied.data["error"] == {"name": "ToolDeniedError", "code": "TOOL_DENIED"}
    assert denied.source_event_seqs == (of_type(session, "tool/call")[0].seq,)
    assert result.kind == "completed"


def test_turn_stopping_injection_continues_the_turn():
    def setup(agent):
        def once(payload):
            if payload.step == 1:
                assert payload.text == "Done."
                payload.agent.inject("Also check the tests.")

        agent.on("turn-stopping", once)

    _session, result, requests = run_with([Reply.text("Done."), Reply.text("Tests pass.")], setup)
    assert (result.kind, result.steps, result.text) == ("completed", 2, "Tests pass.")
    assert requests[1]["messages"][-2:] == [
        {"role": "assistant", "content": "Done."},
        {"role": "user", "content": "Also check the tests."},
    ]


def test_hooks_are_validated_and_removable():
    agent = dshpy.agent.Agent(dshpy.Session.new(), client=object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown hook"):
        agent.on("post-step", print)
    remove = agent.on("pre-step", print)
    remove()
    remove()


def test_a_failing_hook_ends_the_turn_and_raises():
    session = dshpy.Session.new()

    def broken(_payload):
        raise RuntimeError("plugin bug")

    async def scenario():
        with FakeModelServer() as server:
            agent = make_agent(session, server)
            agent.on("turn-start", broken)
            try:
                with pytest.raises(RuntimeError, match="plugin bug"):
                    await agent.run("hi")
            finally:
                await agent.client.close()

    asyncio.run(scenario())
    end = session.events[-1]
    assert end.type == "turn/end" and end.data["reason"]["error"]["code"] == "UNKNOWN"
    assert "plugin bug" in end.data["reason"]["error"]["message"]
