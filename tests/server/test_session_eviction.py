"""Idle live sessions are closed beyond a cap (releasing their locks) and reopen transparently on the next request."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from server_support import StdioServer, stdio_server

import dshpy
from dshpy.testing.fake_model import FakeModelServer, Reply

CAP = 4


def _fds(server: StdioServer) -> int:
    return len(os.listdir(f"/proc/{server.process.pid}/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc")
def test_many_more_sessions_than_the_cap_keep_descriptors_bounded_and_all_answer(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    count = 120
    with stdio_server(tmp_path, None, "--store", f"jsonl:///{root}", "--max-live-sessions", str(CAP)) as server:
        assert server.call("first", "session.create", {"sessionId": "s-0"})["result"]["id"] == "s-0"
        baseline = _fds(server)
        peak = baseline
        for number in range(1, count):
            reply = server.call(number, "session.create", {"sessionId": f"s-{number}"})
            assert reply["result"]["id"] == f"s-{number}", reply
            peak = max(peak, _fds(server))
        # a live JSONL session holds its lock (and its log) open: only the cap's worth may stay open
        assert peak - baseline <= 2 * CAP + 2, (baseline, peak)

        # a closed session's lock is released: another writer can take it (and give it back)
        store = dshpy.open_store(f"jsonl:///{root}")
        with store.open("s-0") as session:
            session.append("plugin:test/note", {"by": "another process"})
        store.close()

        # every session still answers, reopening on demand (and closing others again)
        for number in range(count):
            reply = server.call(f"cwd-{number}", "session/working-directory/get", {"sessionId": f"s-{number}"})
            assert reply["result"]["cwd"], reply
            peak = max(peak, _fds(server))
        assert peak - baseline <= 2 * CAP + 2, (baseline, peak)
        events = server.call("events", "session.events", {"sessionId": "s-0"})["result"]["events"]
        assert [e["type"] for e in events] == ["plugin:test/note"]  # no resume marker for a reopen of our own
        listed = server.call("list", "session.list")["result"]["sessions"]
        assert len(listed) == count


def test_a_turn_in_flight_is_never_closed_and_a_closed_session_continues(tmp_path: Path) -> None:
    slow = Reply.text("slow answer", pieces=8, chunk_delay=0.1)
    with (
        FakeModelServer([slow], default=Reply.text("pong")) as model,
        stdio_server(tmp_path, model.base_url, "--max-live-sessions", "2") as server,
    ):
        params = {"sessionId": "busy", "text": "go", "create": True}
        sent = {"jsonrpc": "2.0", "id": "turn", "method": "session.send", "params": params}
        server.write(json.dumps(sent).encode() + b"\n")
        model.wait_for_requests(1)
        for number in range(6):  # churn through the one free slot while the turn runs
            assert server.call(number, "session.create", {"sessionId": f"idle-{number}"})["result"]
        turn = server.response("turn")["result"]
        assert turn["content"] == "slow answer" and turn["finishReason"] == "completed"

        # idle-0 was closed long ago: a turn on it reopens it and runs as if it had stayed open
        again = server.call("again", "session.send", {"sessionId": "idle-0", "text": "hi"})["result"]
        assert again["content"] == "pong"
        types = [e["type"] for e in server.call("ev", "session.events", {"sessionId": "idle-0"})["result"]["events"]]
        assert "session/end-seed" not in types and types.count("turn/end") == 1
        assert server.call("wait", "session/wait", {"sessionId": "idle-3"})["result"] == {}


def test_idle_sessions_are_closed_after_the_idle_timeout(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    args = ("--store", f"jsonl:///{root}", "--idle-timeout", "0.5")
    with stdio_server(tmp_path, None, *args) as server:
        server.call(1, "session.create", {"sessionId": "lonely"})
        store = dshpy.open_store(f"jsonl:///{root}")
        with pytest.raises(dshpy.ConflictError):
            store.open("lonely")  # held by the server
        deadline = time.monotonic() + 10
        while True:
            try:
                store.open("lonely").close()
                break
            except dshpy.ConflictError:
                assert time.monotonic() < deadline, "the idle session was never closed"
                time.sleep(0.1)
        store.close()
        assert server.call(2, "session/resume", {"sessionId": "lonely"})["result"] == {}


def test_a_session_holding_an_injected_notice_is_kept_until_its_next_turn(tmp_path: Path) -> None:
    with (
        FakeModelServer(default=Reply.text("pong")) as model,
        stdio_server(tmp_path, model.base_url, "--max-live-sessions", "1") as server,
    ):
        moved = server.call(1, "session/working-directory/set", {"sessionId": "a", "path": str(tmp_path)})
        assert moved["result"]["cwd"] == str(tmp_path)
        refused = server.call(2, "session.create", {"sessionId": "b"})["error"]
        assert refused["code"] == -32007 and refused["data"]["limit"] == "liveSessions"
        assert server.call(3, "session.send", {"sessionId": "a", "text": "hi"})["result"]["content"] == "pong"
        sent = json.dumps(model.requests[-1]["messages"])
        assert "The working directory changed" in sent  # the notice reached the model
        assert server.call(4, "session.create", {"sessionId": "b"})["result"]["id"] == "b"
