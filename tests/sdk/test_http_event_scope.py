"""Token mode: one client's ``/events`` stream carries its own sessions, not another client's (issue #11 item 12)."""

from __future__ import annotations

import queue
from pathlib import Path
from typing import Any

from server_support import http_server

import dshpy
from dshpy.testing.fake_model import FakeModelServer, Reply


def _drain(q: queue.Queue[Any], settle: float = 0.5) -> list[tuple[str, dict[str, Any]]]:
    items: list[tuple[str, dict[str, Any]]] = []
    while True:
        try:
            item = q.get(timeout=settle)
        except queue.Empty:
            return items
        if item is not None:
            items.append(item)


def _sessions_in(items: list[tuple[str, dict[str, Any]]]) -> set[str]:
    return {params["sessionId"] for method, params in items if method == "session.event"}


def test_an_event_stream_carries_only_the_sessions_its_client_opened_or_subscribed(tmp_path: Path) -> None:
    with (
        FakeModelServer(default=Reply.text("pong")) as model,
        http_server(tmp_path, model.base_url, "--token", "tok") as (url, _process),
        dshpy.HarnessClient(url=url, token="tok") as alice,
        dshpy.HarnessClient(url=url, token="tok") as bob,
    ):
        alice_events = alice.transport.subscribe()
        mine = alice.create_session("alice-1")
        assert alice.send_message(mine.id, "hi").content == "pong"

        theirs = bob.create_session("bob-1")
        bob_types = [event["type"] for event in bob.stream(theirs.id, "hello")]
        assert bob_types[-1] == "turn/end"  # bob's own stream carries bob's session

        seen = _drain(alice_events)
        assert _sessions_in(seen) == {"alice-1"}, "alice's stream carried another client's session events"

        # asking explicitly still works (one token = one trusted principal)
        alice.request("session.subscribe", {"sessionId": theirs.id})
        assert bob.send_message(theirs.id, "again").content == "pong"
        assert _sessions_in(_drain(alice_events)) == {"bob-1"}
