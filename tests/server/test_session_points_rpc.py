"""The store's session lifecycle points reach clients as notifications, under the seed's names."""

from __future__ import annotations

import itertools
from pathlib import Path

from server_support import stdio_server

from dshpy.testing.fake_model import FakeModelServer, Reply


def test_created_flush_ranges_and_disposed_are_notified(tmp_path: Path) -> None:
    with FakeModelServer(default=Reply.text("pong")) as model, stdio_server(tmp_path, model.base_url) as server:
        server.call(1, "initialize", {"cwd": str(tmp_path), "provider": "deepseek-official", "model": "m"})
        assert server.call(2, "session.create", {"sessionId": "s-1"})["result"]["id"] == "s-1"
        server.call(3, "session/prompt", {"sessionId": "s-1", "contentBlocks": [{"type": "text", "text": "hi"}]})
        assert server.call(4, "session/wait", {"sessionId": "s-1"})["result"] == {}
        fork = server.call(5, "session.fork", {"sessionId": "s-1", "childSessionId": "s-2"})
        assert fork["result"]["id"] == "s-2"
        assert server.call(6, "shutdown")["result"] == {}
        assert server.process.wait(10) == 0
    points = [n for n in server.notifications if n["method"].startswith("session/")]
    assert points[0] == {
        "jsonrpc": "2.0",
        "method": "session/created",
        "params": {"sessionId": "s-1", "how": "created"},
    }
    events = [n["params"]["event"] for n in server.notifications if n["method"] == "session.event"]
    parent_last = max(e["seq"] for e in events if e["type"] == "turn/end")
    flushes = [n["params"] for n in points if n["method"] == "session/flush" and n["params"]["sessionId"] == "s-1"]
    assert flushes[0]["fromSeq"] == 0
    for before, after in itertools.pairwise(flushes):
        assert after["fromSeq"] == before["toSeq"] + 1  # contiguous: every event made durable exactly once
    assert flushes[-1]["toSeq"] >= parent_last
    assert {"sessionId": "s-2", "how": "forked"} in [n["params"] for n in points if n["method"] == "session/created"]
    disposed = [n["params"]["sessionId"] for n in points if n["method"] == "session/disposed"]
    assert sorted(disposed) == ["s-1", "s-2"]  # the server closed both on shutdown
    assert points[-1]["method"] == "session/disposed"
