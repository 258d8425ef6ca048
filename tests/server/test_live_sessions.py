"""The live-session cap through the dispatch layer both transports share: least recently used idle sessions go first."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import dshpy
from dshpy.server.limits import ServerLimits
from dshpy.server.methods import Runtime


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
