"""The stdio server: dsh's methods and notifications, bad input, fuzzing, the size limit."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from server_support import stdio_server

from dshpy.testing.fake_model import FakeModelServer, Reply


@pytest.fixture
def model() -> FakeModelServer:
    with FakeModelServer(default=Reply.text("pong")) as server:
        yield server


def test_bad_input_gets_the_documented_codes(tmp_path: Path) -> None:
    with stdio_server(tmp_path) as server:
        server.write(b"not json\n")
        assert server.frame()["error"]["code"] == -32700
        server.write(b"[1, 2]\n")
        assert server.frame()["error"]["code"] == -32600
        server.write(b'{"jsonrpc": "2.0", "id": 7, "result": {}}\n')
        assert server.frame()["error"]["code"] == -32600
        assert server.call(1, "no/such")["error"]["code"] == -32601
        reply = server.call(2, "session.events", {"sessionId": "../../etc"})
        assert reply["error"]["code"] == -32602 and reply["error"]["data"] == {"field": "sessionId"}
        reply = server.call(3, "session.events", {"sessionId": "s", "limit": "ten"})
        assert reply["error"]["data"] == {"field": "limit"}
        reply = server.call(4, "session.events", [1])
        assert reply["error"]["code"] == -32602 and reply["error"]["data"] == {"field": "params"}
        reply = server.call(5, "session.get", {"sessionId": "missing"})
        assert reply["error"]["code"] == -32001
        reply = server.call(6, "session/wait", {"sessionId": "missing"})
        assert reply["error"]["code"] == -32001
        reply = server.call(8, "initialize", {"cwd": ".", "provider": "acme", "model": "m"})
        assert reply["error"]["data"] == {"field": "provider"}
        reply = server.call(
            9, "initialize", {"cwd": ".", "provider": "deepseek-official", "model": "m", "maxTokens": 0}
        )
        assert reply["error"]["data"] == {"field": "maxTokens"}
        assert server.call(10, "session.list")["result"] == {"sessions": []}


def test_oversized_frames_are_refused_and_the_server_keeps_going(tmp_path: Path) -> None:
    with stdio_server(tmp_path, None, "--max-request-bytes", "4096") as server:
        huge = b'{"jsonrpc":"2.0","id":1,"method":"session.list","params":{"x":"' + b"a" * 100_000 + b'"}}\n'
        server.write(huge)
        error = server.frame()
        assert error["id"] is None and error["error"]["code"] == -32600 and error["error"]["data"] == {"limit": 4096}
        assert server.call(2, "session.list")["result"] == {"sessions": []}


def _malformed(rng: random.Random) -> bytes:
    kind = rng.randrange(8)
    if kind == 0:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200))).replace(b"\n", b" ")
    if kind == 1:
        return json.dumps(rng.choice([1, "x", None, True, [], [{"id": 1}], 2.5])).encode()
    if kind == 2:
        return json.dumps(
            {"jsonrpc": "2.0", "id": rng.choice([10**30, 2**60, 1.5, True, [1], {}]), "method": "x"}
        ).encode()
    if kind == 3:
        depth = rng.randrange(100, 5000)
        return b'{"jsonrpc":"2.0","id":1,"method":"session.get","params":' + b"[" * depth + b"]" * depth + b"}"
    if kind == 4:
        return json.dumps({"jsonrpc": "2.0", "id": "x" * rng.randrange(200, 5000), "method": "session.list"}).encode()
    if kind == 5:
        method = rng.choice(["session.send", "session.events", "session.fork", "session/prompt", "session.get"])
        params = {"sessionId": rng.choice([1, None, "", "..", "a/b", "x" * 300, [], {}]), "text": rng.choice([1, None])}
        return json.dumps({"jsonrpc": "2.0", "id": rng.randrange(1000), "method": method, "params": params}).encode()
    if kind == 6:
        return json.dumps(
            {"jsonrpc": rng.choice(["1.0", 2, None]), "id": 1, "method": rng.choice([1, "", None])}
        ).encode()
    return b'{"jsonrpc":"2.0","id":1,"method":"session.list"'  # truncated


def test_fuzz_thousands_of_malformed_frames_then_a_valid_request(tmp_path: Path) -> None:
    rng = random.Random(7)
    frames = [_malformed(rng) for _ in range(3000)]
    with stdio_server(tmp_path) as server:
        server.write(b"\n".join(frames) + b"\n")
        server.write(b'{"jsonrpc":"2.0","id":"final","method":"session.create","params":{"sessionId":"alive"}}\n')
        reply = server.response("final")
        assert reply["result"]["id"] == "alive"
        assert server.process.poll() is None
        assert server.call("again", "session.list")["result"]["sessions"][0]["id"] == "alive"


def test_dsh_prompt_receipt_status_and_wait(tmp_path: Path, model: FakeModelServer) -> None:
    with stdio_server(tmp_path, model.base_url) as server:
        init = server.call(1, "initialize", {"cwd": str(tmp_path), "provider": "deepseek-official", "model": "m"})
        assert init["result"]["serverInfo"]["name"] == "dshpy"
        reply = server.call(
            2, "session/prompt", {"sessionId": "s-1", "contentBlocks": [{"type": "text", "text": "hi"}]}
        )
        message_id = reply["result"]["messageId"]
        assert server.call(3, "session/wait", {"sessionId": "s-1"})["result"] == {}
        events = [n["params"]["event"] for n in server.notifications if n["method"] == "session.event"]
        receipt = next(e for e in events if e["type"] == "agent/inbox/spliced" and e["data"]["inserted"])
        assert receipt["data"]["inserted"][0]["id"] == message_id
        assert events[-1]["type"] == "turn/end" and events[-1]["data"]["reason"]["kind"] == "completed"
        statuses = [n["params"]["status"] for n in server.notifications if n["method"] == "session.status"]
        assert statuses[0] == "running"
        cwd = server.call(4, "session/working-directory/set", {"sessionId": "s-1", "path": ".."})["result"]["cwd"]
        assert cwd == str(tmp_path.parent)
        assert server.call(5, "session/working-directory/get", {"sessionId": "s-1"})["result"]["cwd"] == cwd
        assert server.call(6, "shutdown")["result"] == {}
        assert server.process.wait(10) == 0
