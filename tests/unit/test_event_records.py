"""Sessions built by the shipped test builders have dsh's byte layout, the same as the agent writes.

The builders in :mod:`dshpy.testing.builders` and the agent both build event data
through :mod:`dshpy.log.records`, so a test log has the key order of a real dsh log
(tests/fixtures/dsh), not one of its own.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import dshpy
from dshpy.agent import Agent
from dshpy.agent.records import user_message as agent_user_message
from dshpy.llm import ChatClient, ModelConfig, RetryPolicy
from dshpy.testing.builders import TurnScript, assistant_data, system_data, tool_result_data, user_message
from dshpy.testing.fake_model import FakeModelServer, Reply

DSH_TOOL_TURN = (
    Path(__file__).resolve().parents[1]
    / "fixtures/dsh/sessions/plain/--tmp-dshpy-dsh-fixtures-workspace--/tool-turn/session.v4.jsonl"
)
MESSAGE_TYPES = ("system/message", "user/message", "assistant/message", "tool/result", "agent/inbox/spliced")


def _layout(line: dict[str, Any]) -> tuple[Any, ...]:
    """The key order of an event's data, of its message and of the messages it splices in."""
    data = line["data"]
    message = list(data["message"]) if "message" in data else None
    inserted = [list(m) for m in data.get("inserted", [])]
    keys = [k for k in data if k != "meta"]  # dsh's tool results carry tool meta; the builders add none
    return tuple(keys), message, inserted


def _layouts(path: Path) -> dict[str, set[tuple[Any, ...]]]:
    out: dict[str, set[tuple[Any, ...]]] = {}
    for raw in path.read_text().splitlines()[1:]:
        line = json.loads(raw)
        if line["type"] in MESSAGE_TYPES:
            layout = _layout(line)
            out.setdefault(line["type"], set()).add((layout[0], tuple(layout[1] or ()), tuple(map(tuple, layout[2]))))
    return out


def test_turn_script_logs_have_dshs_key_order(tmp_path: Path) -> None:
    store = dshpy.open_store(f"jsonl:///{tmp_path}?compression=none")
    session = store.create(cwd="/work")
    TurnScript(session).turn("read a.txt", steps=2, system="Be brief.")
    session.flush()
    session.close()
    (written,) = tmp_path.glob("*/*/session.v4.jsonl")
    ours, dsh = _layouts(written), _layouts(DSH_TOOL_TURN)
    assert set(ours) == set(MESSAGE_TYPES)
    for kind in MESSAGE_TYPES:
        assert ours[kind] <= dsh[kind], kind
    store.close()


def test_builders_and_agent_build_the_same_shapes() -> None:
    assert list(user_message("hi")) == list(agent_user_message("hi")) == ["content", "source", "role", "id"]
    assert list(system_data(1, 1, "sys")["message"]) == ["role", "content", "source", "id"]
    assistant = assistant_data(1, 1, "ok")
    assert list(assistant) == ["turn", "step", "message", "usage", "stream"]
    assert list(assistant["message"]) == ["role", "content", "source", "id"]
    result = tool_result_data(1, 1, "call-1", "out")
    assert list(result["message"]) == ["role", "source", "toolCallId", "content", "isError", "id"]


def test_agent_retry_records_keep_their_wire_layout() -> None:
    """``llm/retry`` and ``llm/retry-started`` (built in log/records, no longer inline in the loop) keep their keys."""
    session = dshpy.Session.new()

    async def scenario() -> None:
        with FakeModelServer([Reply.server_error(), Reply.text("fine")]) as server:
            client = ChatClient(ModelConfig.from_env(base_url=server.base_url, api_key="k", env={}))
            agent = Agent(session, client, retry=RetryPolicy(base_delay=0.001, jitter=0.0))
            await agent.run("hi")
            await client.close()

    asyncio.run(scenario())
    by_type = {event.type: event.to_wire()["data"] for event in session.events}
    assert list(by_type["llm/retry"]) == [
        "retryId", "turn", "step", "provider", "mode", "policyKey", "retry", "maxRetries", "delayMs", "failure",
    ]  # fmt: skip
    assert list(by_type["llm/retry-started"]) == ["retryId", "turn", "step", "retry"]
    assert list(by_type["assistant/attempt"]) == ["turn", "step", "stream"]
    dshpy.validate(session.events)
