"""Prompts queued behind a hung model are bounded per session and in bytes; over a limit: -32007, nothing queued."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from server_support import StdioServer, stdio_server

from dshpy.testing.fake_model import FakeModelServer, Reply

LIMIT_EXCEEDED = -32007


@pytest.fixture
def hung() -> FakeModelServer:
    with FakeModelServer(default=Reply.hang()) as server:
        yield server


def _prompt(server: StdioServer, request_id: Any, session_id: str, text: str) -> dict[str, Any]:
    blocks = [{"type": "text", "text": text}]
    return server.call(request_id, "session/prompt", {"sessionId": session_id, "contentBlocks": blocks})


def test_a_sessions_queue_is_bounded(tmp_path: Path, hung: FakeModelServer) -> None:
    with stdio_server(tmp_path, hung.base_url, "--max-queued-prompts", "3") as server:
        assert "messageId" in _prompt(server, "running", "s", "first")["result"]
        hung.wait_for_requests(1)  # the first prompt is the running turn, not queued
        for number in range(3):
            assert "messageId" in _prompt(server, number, "s", f"queued {number}")["result"]
        error = _prompt(server, "over", "s", "one too many")["error"]
        assert error["code"] == LIMIT_EXCEEDED
        assert error["data"] == {"limit": "queuedPrompts", "max": 3, "sessionId": "s"}
        assert "3 prompts waiting" in error["message"]
        frame = {"jsonrpc": "2.0", "id": "send", "method": "session.send", "params": {"sessionId": "s", "text": "x"}}
        server.write(json.dumps(frame).encode() + b"\n")
        assert server.response("send")["error"]["code"] == LIMIT_EXCEEDED  # session.send shares the queue

        # another session has its own queue; cancelling empties this one, and it takes prompts again
        assert "messageId" in _prompt(server, "other", "t", "elsewhere")["result"]
        assert server.call("cancel", "session.cancel", {"sessionId": "s"})["result"]["dropped"] == 3
        assert "messageId" in _prompt(server, "after", "s", "again")["result"]


def test_queued_bytes_are_bounded_across_sessions(tmp_path: Path, hung: FakeModelServer) -> None:
    big = "x" * 200_000
    with stdio_server(tmp_path, hung.base_url, "--max-queued-bytes", "500000") as server:
        for number in range(3):  # three running turns: nothing queued yet
            assert "messageId" in _prompt(server, f"run-{number}", f"s-{number}", "start")["result"]
        hung.wait_for_requests(3)
        assert "messageId" in _prompt(server, "q0", "s-0", big)["result"]
        assert "messageId" in _prompt(server, "q1", "s-1", big)["result"]
        error = _prompt(server, "q2", "s-2", big)["error"]
        assert error["code"] == LIMIT_EXCEEDED
        assert error["data"] == {"limit": "queuedBytes", "max": 500_000, "sessionId": "s-2"}
        assert "500000 bytes" in error["message"]
        refused = _prompt(server, "new", "s-new", big)["error"]
        assert refused["data"] == {"limit": "queuedBytes", "max": 500_000, "sessionId": "s-new"}
        assert server.call("absent", "session.get", {"sessionId": "s-new"})["error"]["code"] == -32001  # not created
        assert "messageId" in _prompt(server, "small", "s-2", "a small one still fits")["result"]
        server.call("cancel", "session.cancel", {"sessionId": "s-0"})
        assert "messageId" in _prompt(server, "q3", "s-2", big)["result"]  # the cancelled prompt's bytes came back


def test_when_every_live_session_is_busy_another_is_refused(tmp_path: Path, hung: FakeModelServer) -> None:
    with stdio_server(tmp_path, hung.base_url, "--max-live-sessions", "2") as server:
        _prompt(server, 1, "a", "go")
        _prompt(server, 2, "b", "go")
        hung.wait_for_requests(2)
        error = server.call(3, "session.create", {"sessionId": "c"})["error"]
        assert error["code"] == LIMIT_EXCEEDED and error["data"] == {"limit": "liveSessions", "max": 2}
        assert _prompt(server, 4, "c", "go")["error"]["code"] == LIMIT_EXCEEDED
        assert server.call(5, "session.get", {"sessionId": "a"})["result"]["running"] is True
        server.call(6, "session.cancel", {"sessionId": "a"})
        server.call(7, "session/wait", {"sessionId": "a"})
        assert server.call(8, "session.create", {"sessionId": "c"})["result"]["id"] == "c"
        assert server.call(9, "session.list")["result"]["sessions"]


def test_requests_in_flight_over_stdio_are_bounded_and_cancel_still_gets_through(
    tmp_path: Path, hung: FakeModelServer
) -> None:
    """1,074 ``session/wait``s pile up behind a hung turn: 1,024 are held, 50 refused at once, and the
    ``session.cancel`` sent after them is still read and answered (it ends the turn, which answers the waits)."""
    from dshpy.server.stdio import DEFAULT_MAX_IN_FLIGHT

    extra = 50
    with stdio_server(tmp_path, hung.base_url) as server:
        assert "messageId" in _prompt(server, "run", "s", "start")["result"]
        hung.wait_for_requests(1)
        frames = [
            json.dumps({"jsonrpc": "2.0", "id": n, "method": "session/wait", "params": {"sessionId": "s"}}).encode()
            for n in range(DEFAULT_MAX_IN_FLIGHT + extra)
        ]
        cancel = {"jsonrpc": "2.0", "id": "cancel", "method": "session.cancel", "params": {"sessionId": "s"}}
        server.write(b"\n".join([*frames, json.dumps(cancel).encode()]) + b"\n")
        answers: dict[Any, dict[str, Any]] = {}
        while len(answers) < len(frames) + 1:
            frame = server.frame()
            if "id" in frame:
                answers[frame["id"]] = frame
    refused = [n for n in range(len(frames)) if "error" in answers[n]]
    assert len(refused) == extra
    for n in refused:
        assert answers[n]["error"]["code"] == LIMIT_EXCEEDED
        assert answers[n]["error"]["data"] == {"limit": "inFlightRequests", "max": DEFAULT_MAX_IN_FLIGHT}
    assert "result" in answers["cancel"]
    held = [answers[n]["result"] for n in range(len(frames)) if n not in refused]
    assert len(held) == DEFAULT_MAX_IN_FLIGHT and all(result == held[0] for result in held)
