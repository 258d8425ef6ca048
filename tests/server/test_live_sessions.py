"""The live-session cap through the dispatch layer both transports share: least recently used idle sessions go first."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import dshpy
from dshpy.server.limits import ServerLimits
from dshpy.server.methods import Runtime
from dshpy.testing.builders import TurnScript


async def _call(runtime: Runtime, method: str, params: dict[str, Any]) -> dict[str, Any]:
    frame = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
    answer = await runtime.handle_frame(frame, None)
    assert answer is not None
    reply: dict[str, Any] = json.loads(answer)
    return reply


def test_the_least_recently_used_session_is_closed_first() -> None:
    store = dshpy.open_store("memory:")

    async def scenario() -> list[str]:
        runtime = Runtime(store, limits=ServerLimits(max_live_sessions=3))
        for sid in ("a", "b", "c"):
            assert "result" in await _call(runtime, "session.create", {"sessionId": sid})
        await _call(runtime, "session/working-directory/get", {"sessionId": "a"})  # a is used again: b is oldest
        await _call(runtime, "session.create", {"sessionId": "d"})
        held = sorted(live.session.id for live in runtime.live)
        await _call(runtime, "session/resume", {"sessionId": "b"})  # reopens b, closing c
        held_after = sorted(live.session.id for live in runtime.live)
        await runtime.close()
        return [",".join(held), ",".join(held_after)]

    assert asyncio.run(scenario()) == ["a,c,d", "a,b,d"]
    # closing released every writer: each session opens for writing again, its log intact
    for sid in "abcd":
        with store.open(sid) as session:
            assert [e.type for e in session.events] == []
    store.close()


def test_concurrent_requests_on_a_closed_session_open_it_once(tmp_path: Path) -> None:
    store = dshpy.open_store(f"jsonl:///{tmp_path}")
    with store.create(session_id="shared") as session:
        TurnScript(session).turn()

    async def scenario() -> list[dict[str, Any]]:
        runtime = Runtime(store, limits=ServerLimits(max_live_sessions=2))
        calls = [_call(runtime, "session/working-directory/get", {"sessionId": "shared"}) for _ in range(20)]
        calls += [_call(runtime, "session/resume", {"sessionId": "shared"}) for _ in range(5)]
        replies = await asyncio.gather(*calls)
        assert len(runtime.live) == 1
        await runtime.close()
        return replies

    replies = asyncio.run(scenario())
    assert all("result" in reply for reply in replies), [r for r in replies if "error" in r][:1]
    events = list(store.read("shared", 0))
    assert [e.type for e in events].count("session/end-seed") == 1  # one write-open, one resume marker
    store.close()
