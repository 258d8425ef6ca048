"""dshpy's agent continues a session the real dsh runtime wrote (tests/fixtures/dsh), in place."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

from e2e_support import chat_view, make_agent, types

import dshpy
from dshpy.agent.prologue import system_head
from dshpy.testing.fake_model import FakeModelServer, Reply

PLAIN = Path(__file__).resolve().parents[1] / "fixtures" / "dsh" / "sessions" / "plain"


def test_continuing_a_real_dsh_session(tmp_path):
    root = tmp_path / "sessions"
    shutil.copytree(PLAIN, root)
    store = dshpy.open_store(f"jsonl:///{root}?compression=none")
    session = store.open("text-2-prompts")
    before = len(session)
    head = system_head(session)
    assert head is not None
    prompt = "".join(block["text"] for block in head.data["message"]["content"])

    async def scenario():
        with FakeModelServer([Reply.text("12 + 1 = 13.")]) as server:
            agent = make_agent(session, server, system_prompt=prompt)
            result = await agent.run("Plus one?")
            await agent.client.close()
            return result, server.requests

    result, requests = asyncio.run(scenario())
    assert (result.kind, result.turn) == ("completed", 3)
    assert types(session, before) == [
        "session/end-seed", "agent/inbox/spliced", "turn/start", "agent/inbox/spliced", "step/start",
        "user/message", "request/header", "request/context", "assistant/message", "step/end", "turn/end",
    ]  # fmt: skip
    header = session.events[before + 6]
    assert header.data["reason"] == "resume"  # dsh logged a header before: this agent resumes the series
    # the model gets dsh's system prompt, the runtime-context message and both earlier answers (old reasoning dropped)
    sent = requests[0]["messages"]
    assert sent == chat_view(session, upto=session.events[-3].seq)
    assert [m["role"] for m in sent] == ["system", "user", "user", "assistant", "user", "assistant", "user"]
    assert all("reasoning_content" not in m for m in sent)
    session.close()
    reopened = store.open("text-2-prompts")
    dshpy.validate(reopened.events)
    reopened.close()
    store.close()
