"""Numeric params: an integer that is not a non-negative safe integer is -32602 naming the param, never -32603."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from server_support import stdio_server

import dshpy
from dshpy.testing.builders import TurnScript

BAD_NUMBERS: list[Any] = [2**63, 2**64 + 1, 2**53, -1, -(2**63), True, 1.5, "3"]


def _stored_session(home: Path) -> None:
    """A session in the server's default store that the server does not hold open (reads go to the store)."""
    store = dshpy.open_store(f"sqlite:///{home / 'sessions.db'}")
    with store.create(session_id="stored") as session:
        TurnScript(session).turn()
    store.close()


@pytest.mark.parametrize(
    ("method", "field", "extra"),
    [
        ("session.events", "fromSeq", {}),
        ("session.events", "limit", {}),
        ("session.fork", "boundary", {}),
        ("initialize", "maxTokens", {"cwd": ".", "provider": "deepseek-official", "model": "m"}),
    ],
)
def test_out_of_range_integers_are_invalid_params(
    tmp_path: Path, method: str, field: str, extra: dict[str, Any]
) -> None:
    _stored_session(tmp_path)
    with stdio_server(tmp_path) as server:
        for number, value in enumerate(BAD_NUMBERS):
            reply = server.call(number, method, {"sessionId": "stored", **extra, field: value})
            assert "error" in reply, (field, value, reply)
            error = reply["error"]
            assert error["code"] == -32602, (field, value, error)
            assert error["data"] == {"field": field}
            assert field in error["message"]
        # the largest safe integer is in range: an empty page (a boundary past the end is a fork error)
        reply = server.call("max", "session.events", {"sessionId": "stored", "fromSeq": 2**53 - 1})
        assert reply["result"] == {"events": [], "nextSeq": 2**53 - 1, "more": False}
        assert server.call("alive", "session.list")["result"]["sessions"][0]["id"] == "stored"
