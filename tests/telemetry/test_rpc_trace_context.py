"""A JSON-RPC request's W3C ``traceparent`` is the parent of the turn the server runs for it.

In process (the runtime's frame handler, over which both transports dispatch) for
``params._meta`` and the HTTP header, for a turn answered at once and one queued;
then over real HTTP against ``dshpy serve --http --otel`` exporting to a loopback receiver.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from otel_support import Recorded
from otlp_support import attributes, exporting_env

import dshpy
from dshpy.server.methods import Runtime, ServerSettings
from dshpy.testing.fake_model import FakeModelServer, Reply
from dshpy.testing.otlp_receiver import OtlpReceiver

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"


def frame(request_id: int, method: str, params: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}).encode()


async def serve(model: FakeModelServer, calls: list[tuple[bytes, dict[str, str] | None]]) -> list[dict[str, Any]]:
    runtime = Runtime(dshpy.open_store("memory:"), ServerSettings(base_url=model.base_url))
    try:
        answers = []
        for raw, headers in calls:
            answer = await runtime.handle_frame(raw, None, headers)
            assert answer is not None
            answers.append(json.loads(answer))
        return answers
    finally:
        await runtime.close()


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("DEEPSEEK_API_KEY", "test-key")
    with FakeModelServer(default=Reply.text("ok")) as server:
        yield server


def turn_of(otel: Recorded, session_id: str):
    return next(span for span in otel.spans("invoke_agent") if span.attributes["session.id"] == session_id)


def test_params_meta_traceparent_parents_the_turn(otel: Recorded, model: FakeModelServer) -> None:
    params = {"sessionId": "s1", "text": "hi", "create": True, "_meta": {"traceparent": TRACEPARENT}}
    (answer,) = asyncio.run(serve(model, [(frame(1, "session.send", params), None)]))
    assert answer["result"]["finishReason"] == "completed"
    turn = turn_of(otel, "s1")
    assert turn.parent is not None and turn.parent.is_remote
    assert f"{turn.parent.span_id:016x}" == PARENT_ID
    assert f"{turn.context.trace_id:032x}" == TRACE_ID


def test_the_http_header_parents_a_queued_turn(otel: Recorded, model: FakeModelServer) -> None:
    prompt = {"sessionId": "s2", "contentBlocks": [{"type": "text", "text": "hi"}]}
    other = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    calls = [
        (frame(1, "session/prompt", prompt), {"traceparent": TRACEPARENT}),
        (frame(2, "session/prompt", prompt), {"traceparent": other}),
        (frame(3, "session/wait", {"sessionId": "s2"}), None),
    ]
    answers = asyncio.run(serve(model, calls))
    assert answers[2]["result"] == {}
    turns = sorted(
        (span for span in otel.spans("invoke_agent") if span.attributes["session.id"] == "s2"),
        key=lambda span: span.attributes["dshpy.turn"],
    )
    assert [f"{span.context.trace_id:032x}" for span in turns] == [TRACE_ID, "0af7651916cd43dd8448eb211c80319c"]
    assert [f"{span.parent.span_id:016x}" for span in turns] == [PARENT_ID, "b7ad6b7169203331"]


def test_without_a_traceparent_the_turn_is_a_root(otel: Recorded, model: FakeModelServer) -> None:
    asyncio.run(serve(model, [(frame(1, "session.send", {"sessionId": "s3", "text": "hi", "create": True}), None)]))
    assert turn_of(otel, "s3").parent is None


def test_over_http_the_client_trace_continues_into_the_exported_turn(tmp_path: Path) -> None:
    with OtlpReceiver() as receiver, FakeModelServer(default=Reply.text("ok")) as model:
        env = exporting_env(tmp_path / "home", receiver.endpoint, model.base_url, OTEL_METRICS_EXPORTER="none")
        process = subprocess.Popen(
            [sys.executable, "-m", "dshpy", "--store", "memory:", "serve", "--http", "--port", "0", "--otel"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=env,
        )
        try:
            assert process.stderr is not None
            url = None
            deadline = time.monotonic() + 20
            while url is None and time.monotonic() < deadline:
                match = re.search(r"serving (http://\S+)", process.stderr.readline().decode())
                url = match.group(1) if match else None
            assert url is not None, "the server did not start"
            request = urllib.request.Request(
                url + "/",
                data=frame(1, "session.send", {"sessionId": "h1", "text": "hi", "create": True}),
                headers={"Content-Type": "application/json", "traceparent": TRACEPARENT},
            )
            with urllib.request.urlopen(request, timeout=30) as response:
                assert json.loads(response.read())["result"]["finishReason"] == "completed"
            turn = None
            deadline = time.monotonic() + 20
            while turn is None and time.monotonic() < deadline:  # the batch processor exports while the server runs
                turn = next((span for span in receiver.spans() if span.name.startswith("invoke_agent")), None)
                time.sleep(0.02)
            assert turn is not None, "the turn's span was never exported"
        finally:
            process.terminate()
            process.wait(10)
            if process.stderr is not None:
                process.stderr.close()
    assert turn.trace_id.hex() == TRACE_ID
    assert turn.parent_span_id.hex() == PARENT_ID
    assert attributes(turn)["session.id"] == "h1"
