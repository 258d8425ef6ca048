"""Real processes: a session resumed by a new process, and agents killed with SIGKILL mid-request and mid-tool."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from e2e_support import chat_view, make_agent, of_type, types

import dshpy
from dshpy.testing.fake_model import FakeModelServer, Reply

WORKER = Path(__file__).with_name("agent_worker.py")

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


@pytest.fixture(params=["sqlite", "jsonl"])
def store_url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/sessions.db"
    return f"jsonl:///{tmp_path}/sessions?compression=zstd"


def start_worker(store_url: str, server: FakeModelServer, prompt: str, *extra: str) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen(
        [sys.executable, str(WORKER), store_url, server.base_url, prompt, *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = process.stdout.readline()
    if not line:
        raise AssertionError(f"worker died: {process.stderr.read()}")
    return process, json.loads(line)["session"]


def finish_worker(process: subprocess.Popen) -> dict:
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def kill(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGKILL)
    process.communicate(timeout=30)
    assert process.returncode == -signal.SIGKILL


def test_a_session_resumed_in_a_new_process_continues_where_it_left_off(store_url):
    with FakeModelServer([Reply.text("Noted: kiwi."), Reply.text("You said kiwi.")]) as server:
        first, session_id = start_worker(store_url, server, "Remember the word kiwi.")
        assert finish_worker(first) == {"kind": "completed", "text": "Noted: kiwi.", "turn": 1}
        second, same_id = start_worker(store_url, server, "Which word?", "--session", session_id)
        assert same_id == session_id
        assert finish_worker(second) == {"kind": "completed", "text": "You said kiwi.", "turn": 2}
        requests = server.requests

    store = dshpy.open_store(store_url)
    session = store.inspect(session_id)
    kinds = types(session)
    resumed = kinds.index("session/end-seed")
    assert kinds[resumed:] == [
        "session/end-seed", "agent/inbox/spliced", "turn/start", "agent/inbox/spliced", "step/start",
        "user/message", "request/header", "assistant/message", "step/end", "turn/end",
    ]  # fmt: skip
    marker = session.events[resumed]
    assert dict(marker.data) == {} and marker.surface_op is None
    assert of_type(session, "request/header")[-1].data["reason"] == "resume"
    assert len(of_type(session, "system/message")) == 1 and len(of_type(session, "request/context")) == 1
    assert session.events[resumed + 2].data == {"turn": 2}
    assert requests[1]["messages"] == chat_view(session, upto=session.events[-3].seq)
    assert [m["role"] for m in requests[1]["messages"]] == ["system", "user", "assistant", "user"]
    dshpy.validate(session.events)
    store.close()


def test_sigkill_during_the_model_request_leaves_an_interrupted_turn_without_an_answer(store_url):
    with FakeModelServer([Reply.hang()], default=Reply.text("Here it is.")) as server:
        process, session_id = start_worker(store_url, server, "Count to five.")
        server.wait_for_requests(1, timeout=30)
        kill(process)

        store = dshpy.open_store(store_url)
        session = store.open(session_id)  # repairs: closes the interrupted turn durably
        assert types(session) == [
            "agent/inbox/spliced", "turn/start", "agent/inbox/spliced", "step/start", "system/message",
            "user/message", "request/header", "request/context", "step/end", "turn/end",
        ]  # fmt: skip
        assert session.events[-1].data["reason"] == {"kind": "interrupted"}
        assert not of_type(session, "assistant/message") and not of_type(session, "assistant/attempt")

        # the session goes on: turn 2, and the model sees the unanswered prompt followed by the new one
        async def go_on():
            agent = make_agent(session, server, system_prompt="You are a test agent.")
            result = await agent.run("Try again.")
            await agent.client.close()
            return result

        result = asyncio.run(go_on())
        assert (result.kind, result.turn) == ("completed", 2)
        assert [m["content"] for m in server.requests[-1]["messages"]] == [
            "You are a test agent.",
            "Count to five.",
            "Try again.",
        ]
        session.close()
        store.close()


def test_sigkill_inside_a_tool_body_gives_an_outcome_unknown_result(store_url, tmp_path):
    marker = tmp_path / "started.txt"
    arguments = json.dumps({"marker": str(marker)})
    with FakeModelServer(
        [Reply.tool_calls(("slow_write", arguments, "call_w"))], default=Reply.text("I will check before retrying.")
    ) as server:
        process, session_id = start_worker(store_url, server, "Write it.")
        deadline = time.monotonic() + 30
        while not marker.exists():
            assert time.monotonic() < deadline, "the tool body never started"
            time.sleep(0.01)
        kill(process)

        store = dshpy.open_store(store_url)
        session = store.open(session_id)
        kinds = types(session)
        assert kinds[-5:] == ["assistant/message", "tool/call", "tool/result", "step/end", "turn/end"]
        call, result = of_type(session, "tool/call")[0], of_type(session, "tool/result")[0]
        assert result.data["error"] == {"name": "ToolOutcomeUnknownError", "code": "TOOL_OUTCOME_UNKNOWN"}
        assert result.source_event_seqs == (call.seq,)
        text = result.data["message"]["content"][0]["text"]
        assert "Do not retry blindly." in text
        assert session.events[-1].data["reason"] == {"kind": "interrupted"}

        # what the model sees next is that synthetic result
        async def go_on():
            agent = make_agent(session, server, system_prompt="You are a test agent.")
            outcome = await agent.run("What happened?")
            await agent.client.close()
            return outcome

        assert asyncio.run(go_on()).kind == "completed"
        sent = server.requests[-1]["messages"]
        assert {"role": "tool", "tool_call_id": "call_w", "content": text} in sent
        assert sent == chat_view(session, upto=session.events[-3].seq)
        session.close()
        store.close()
