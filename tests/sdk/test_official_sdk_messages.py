"""dsh's official SDK driving ``dshpy-runtime`` against a fake Anthropic-format model: dsh's SDK semantics.

The SDK asks for provider ``deepseek-official``, so the runtime talks to the fake's
``/v1/messages``, as dsh 0.2.1 talks to DeepSeek's Anthropic endpoint.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from sdk_support import dshpy_runtime as _runtime

import dshpy
from dshpy.testing.fake_model import FakeModelServer, Reply

deepseek_harness = pytest.importorskip("deepseek_harness")
errors = pytest.importorskip("deepseek_harness.errors")

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning", "ignore::pytest.PytestUnraisableExceptionWarning")


def _options(tmp_path: Path, model: FakeModelServer) -> dict[str, Any]:
    return {
        "dsh_bin": _runtime(),
        "dsh_home": str(tmp_path / "dsh-home"),
        "base_url": model.base_url,
        "api_key": "fake-key",
        "cwd": str(tmp_path),
        "env": {"DSHPY_STORE": ""},
    }


def _kinds(result: Any) -> list[str]:
    out = []
    for n in result.notifications:
        if n.method == "session.event":
            out.append(n.payload["event"]["type"])
        else:
            out.append(f"{n.method}:{n.payload.get('status', '')}")
    return out


def test_sdk_runs_on_the_messages_api_with_signatures_status_order_and_dshs_refusals(tmp_path: Path) -> None:
    replies = [
        Reply.text("Four.", reasoning="Simple sum.", signature="sig-dshpy-1"),
        Reply.text("Twelve."),
        Reply.text("Still twelve."),
    ]
    with FakeModelServer(replies) as model:
        options = _options(tmp_path, model)
        with deepseek_harness.DeepSeekHarness(**options) as harness:
            session = harness.start_session()
            first = session.run("What is 2 + 2?")
            assert (first.final_response, first.finish_reason) == ("Four.", "completed")
            # the receipt opens the run, then the status the SDK would otherwise drop, then the turn
            kinds = _kinds(first)
            assert kinds[:3] == ["agent/inbox/spliced", "session.status:running", "turn/start"]
            assert kinds[-1] == "session.status:idle" and "turn/end" in kinds
            second = session.run("And times three?")
            assert second.final_response == "Twelve."
            # dsh's refusals, with dsh's messages
            with pytest.raises(errors.JsonRpcError, match="SDK session is already open or opening"):
                harness.resume_session(session.id)
            with pytest.raises(errors.JsonRpcError, match="unknown SDK session: session-nope"):
                harness.client.request("session/wait", {"sessionId": "session-nope"}, response_model=dict)
            with pytest.raises(errors.JsonRpcError, match="unknown DeepSeek Harness SDK runtime method: session/bogus"):
                harness.client.request("session/bogus", {}, response_model=dict)
            session_id = session.id
        with deepseek_harness.DeepSeekHarness(**options) as harness:
            stored = harness.start_session(session_id)  # a stored session that was not resumed
            with pytest.raises(errors.JsonRpcError, match=f'session "{session_id}" already exists'):
                stored.run("hello?")
            with pytest.raises(errors.JsonRpcError, match="already exists"):
                stored.get_working_directory()
            resumed = harness.resume_session(session_id)
            third = resumed.run("Again?")
            assert third.final_response == "Still twelve."
        requests, headers = model.requests, model.request_headers

    assert len(requests) == 3
    assert all(h["x-api-key"] == "fake-key" and h["anthropic-version"] == "2023-06-01" for h in headers)
    first_body = requests[0]
    assert first_body["model"] == "deepseek-v4-flash" and first_body["system"].startswith("You are a software agent")
    # the second and third requests (the third from a new process, read back from the log) carry the signature
    for body in requests[1:]:
        thinking = [b for m in body["messages"] for b in m["content"] if b["type"] == "thinking"]
        assert thinking == [{"type": "thinking", "thinking": "Simple sum.", "signature": "sig-dshpy-1"}]

    # the stored session records the route, the header and the signature as dsh does
    store = dshpy.open_store(f"sqlite:///{tmp_path / 'dsh-home' / 'dshpy' / 'sessions.db'}")
    try:
        events = list(store.read(session_id))
    finally:
        store.close()
    answer = next(e for e in events if e.type == "assistant/message")
    assert answer.data["message"]["source"]["replayState"]["blocks"][0] == {
        "type": "reasoning",
        "signature": "sig-dshpy-1",
    }
    header = next(e for e in events if e.type == "request/header").data["header"]
    assert header["config"] == {
        "provider": "deepseek-official",
        "model": "deepseek-v4-flash",
        "maxTokens": 256000,
        "reasoningEffort": "high",
    }
    context = next(e for e in events if e.type == "request/context").data
    assert context == {"provider": "deepseek-official", "model": "deepseek-v4-flash", "contextWindow": 1000000}
    assert [e.type for e in events].count("session/end-seed") == 1  # the resume marker


def test_methods_before_initialize_are_refused_as_dsh_refuses_them(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DSHPY_", "DEEPSEEK_"))}
    env.update({"DSH_HOME": str(tmp_path / "home"), "DEEPSEEK_API_KEY": "k", "DSHPY_STORE": ""})
    process = subprocess.Popen(
        [_runtime()], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=tmp_path
    )
    frames = [
        {"jsonrpc": "2.0", "id": 1, "method": "session/prompt", "params": {"sessionId": "s", "contentBlocks": []}},
        {"jsonrpc": "2.0", "id": 2, "method": "session/working-directory/get", "params": {"sessionId": "s"}},
        {"jsonrpc": "2.0", "id": 3, "method": "shutdown"},
    ]
    out, _err = process.communicate(b"".join(json.dumps(f).encode() + b"\n" for f in frames), timeout=60)
    replies = {r["id"]: r for r in map(json.loads, out.splitlines()) if "id" in r}
    assert replies[1]["error"]["message"] == "SDK server is not initialized"
    assert replies[2]["error"]["message"] == "SDK server is not initialized"
    assert replies[3]["result"] == {}
    assert not list((tmp_path / "home").rglob("session.v4.jsonl*"))  # nothing was created
