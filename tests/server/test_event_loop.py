"""Heavy reads run off the event loop: a request on a huge session does not stall another client's trivial one."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from server_support import StdioServer, stdio_server

import dshpy
from dshpy.testing.builders import TurnScript

EVENTS = 50_000
BOUND = 0.5  # seconds; the heavy request takes ~1 s or more on its own


def _big_session(home: Path) -> None:
    store = dshpy.open_store(f"sqlite:///{home / 'sessions.db'}")
    with store.create(session_id="big") as session:
        script = TurnScript(session)
        while len(session) < EVENTS:
            script.turn(steps=3)
    store.close()


def _send(server: StdioServer, request_id: str, method: str, params: dict[str, Any]) -> float:
    server.write(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}).encode() + b"\n")
    return time.monotonic()


def _answers(server: StdioServer, ids: set[str]) -> dict[str, tuple[float, dict[str, Any]]]:
    """Arrival time and frame of each answer, in arrival order."""
    arrived: dict[str, tuple[float, dict[str, Any]]] = {}
    while set(arrived) != ids:
        frame = server.frame()
        if frame.get("id") in ids:
            arrived[frame["id"]] = (time.monotonic(), frame)
    return arrived


def test_a_trivial_request_is_answered_while_a_huge_session_is_read(tmp_path: Path) -> None:
    _big_session(tmp_path)
    with stdio_server(tmp_path) as server:
        assert server.call("small", "session.create", {"sessionId": "small"})["result"]
        heavies = [
            ("session.get", {"sessionId": "big"}),
            ("session.events", {"sessionId": "big", "limit": 10_000}),
            ("session/resume", {"sessionId": "big"}),  # opening for writing reads (and repairs) the whole log
        ]
        for heavy, params in heavies:
            _send(server, "heavy", heavy, params)
            time.sleep(0.05)  # the heavy request is under way
            sent = {
                "cwd": _send(server, "cwd", "session/working-directory/get", {"sessionId": "small"}),
                "page": _send(server, "page", "session.events", {"sessionId": "small"}),
            }
            arrived = _answers(server, {"heavy", "cwd", "page"})
            order = list(arrived)
            assert order[-1] == "heavy", (heavy, order)
            for name, start in sent.items():
                latency = arrived[name][0] - start
                assert latency < BOUND, (heavy, name, latency)
                assert "result" in arrived[name][1]
            result = arrived["heavy"][1]["result"]
            if heavy == "session.get":
                assert result["eventCount"] >= EVENTS and result["projections"]["as_of_seq"] == result["eventCount"] - 1
            elif heavy == "session.events":
                assert len(result["events"]) == 10_000 and result["more"] is True
            else:
                assert result == {}
