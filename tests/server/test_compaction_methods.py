"""``session.compact`` and ``session.get``'s ``context`` through the dispatch layer both transports share."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from server_support import rpc as call
from server_support import use_fake_model

import dshpy
from dshpy.compaction import SUMMARY_INSTRUCTION
from dshpy.log import records
from dshpy.server.methods import Runtime
from dshpy.testing.builders import TurnScript
from dshpy.testing.fake_model import FakeModelServer, Reply

SUMMARY = "## Primary Request and Intent\n- read a.txt\n\n## Next Step\n- (none)"


def is_summary(body: dict[str, Any]) -> bool:
    return body["messages"][-1] == {"role": "user", "content": SUMMARY_INSTRUCTION}


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeModelServer]:
    with FakeModelServer(default=Reply.text(SUMMARY)) as server:
        use_fake_model(monkeypatch, server)
        yield server


def stored_session(store: dshpy.BaseStore, session_id: str = "s", turns: int = 3) -> int:
    with store.create(session_id=session_id) as session:
        script = TurnScript(session)
        for index in range(turns):
            script.turn(f"prompt {index}", steps=2, system="Be brief." if index == 0 else None)
        return len(session)


def test_compact_a_stored_session(model: FakeModelServer) -> None:
    store = dshpy.MemoryStore()
    length = stored_session(store)

    async def scenario() -> tuple[dict[str, Any], dict[str, Any]]:
        runtime = Runtime(store)
        answer = await call(runtime, "session.compact", {"sessionId": "s"})
        info = await call(runtime, "session.get", {"sessionId": "s", "projections": False})
        await runtime.close()
        return answer, info

    answer, info = asyncio.run(scenario())
    result = answer["result"]
    assert result["sessionId"] == "s" and result["summarySeq"] == result["startSeq"] + 1
    assert result["startSeq"] == length + 1  # after the resume marker of the write-open
    assert result["context"] == info["result"]["context"]
    assert info["result"]["context"]["window"] == 128_000
    events = list(store.read("s"))
    assert [e.type for e in events[result["startSeq"] :]] == [
        "compaction/start",
        "compaction/summary",
        "user/message",
        "compaction/end",
    ]
    dshpy.validate(events)
    assert [is_summary(body) for body in model.requests] == [True]


def test_a_dry_run_writes_nothing_and_needs_no_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    store = dshpy.MemoryStore()
    length = stored_session(store)

    async def scenario() -> tuple[dict[str, Any], dict[str, Any], int]:
        runtime = Runtime(store)
        stored = await call(runtime, "session.compact", {"sessionId": "s", "dryRun": True})
        live = len(runtime.live)
        refused = await call(runtime, "session.compact", {"sessionId": "s"})
        await runtime.close()
        return stored, refused, live

    stored, refused, live = asyncio.run(scenario())
    assert stored["result"]["dryRun"] is True and live == 0  # planned on a read-only view
    assert stored["result"]["shadowedRange"]["start"] == stored["result"]["shadowedSeqs"][0]
    assert refused["error"]["code"] == -32006  # compacting needs the model
    assert [e.type for e in store.read("s")][length:] == ["session/end-seed"]  # the write-open's marker only


@pytest.mark.parametrize("dry_run", [False, True])
def test_an_empty_session_is_refused(model: FakeModelServer, dry_run: bool) -> None:
    store = dshpy.MemoryStore()
    store.create(session_id="empty").close()

    async def scenario() -> dict[str, Any]:
        runtime = Runtime(store)
        answer = await call(runtime, "session.compact", {"sessionId": "empty", "dryRun": dry_run})
        await runtime.close()
        return answer

    error = asyncio.run(scenario())["error"]
    assert error["code"] == -32000
    assert error["data"] == {"error": "NothingToCompactError", "code": "empty", "sessionId": "empty"}
    assert list(store.read("empty")) == []
    assert model.requests == []


def test_unknown_session_and_bad_params() -> None:
    store = dshpy.MemoryStore()

    async def scenario() -> list[dict[str, Any]]:
        runtime = Runtime(store)
        answers = [
            await call(runtime, "session.compact", {"sessionId": "nope"}),
            await call(runtime, "session.compact", {"sessionId": "nope", "dryRun": True}),
            await call(runtime, "session.compact", {"sessionId": "../x"}),
            await call(runtime, "session.compact", {"sessionId": "s", "dryRun": "yes"}),
        ]
        await runtime.close()
        return answers

    codes = [answer["error"]["code"] for answer in asyncio.run(scenario())]
    assert codes == [-32001, -32001, -32602, -32602]


@pytest.mark.parametrize(("answer", "code"), [("", "summary"), ("x" * 60_000, "summary")])
def test_an_unusable_summary_writes_nothing(model: FakeModelServer, answer: str, code: str) -> None:
    store = dshpy.MemoryStore()
    length = stored_session(store)
    model.add(Reply.text(answer))

    async def scenario() -> dict[str, Any]:
        runtime = Runtime(store)
        reply = await call(runtime, "session.compact", {"sessionId": "s"})
        await runtime.close()
        return reply

    error = asyncio.run(scenario())["error"]
    assert (error["code"], error["data"]["code"]) == (-32000, code)
    assert [e.type for e in store.read("s")][length:] == ["session/end-seed"]


def test_busy_while_a_turn_runs_and_prompts_queue_behind_a_compaction(model: FakeModelServer) -> None:
    """A running turn makes compaction -32002 busy; a prompt sent during a compaction runs after it."""
    store = dshpy.MemoryStore()
    stored_session(store)
    model.add(Reply.text("slow answer", chunk_delay=0.05))

    async def scenario() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        runtime = Runtime(store)
        turn = asyncio.ensure_future(call(runtime, "session.send", {"sessionId": "s", "text": "hi"}))
        while not (runtime.live.get("s") and runtime.live.get("s").running):  # type: ignore[union-attr]
            await asyncio.sleep(0.01)
        busy = await call(runtime, "session.compact", {"sessionId": "s"})
        await turn
        model.add(Reply.text(SUMMARY, chunk_delay=0.05), Reply.text("after the compaction"))
        compaction = asyncio.ensure_future(call(runtime, "session.compact", {"sessionId": "s"}))
        await asyncio.sleep(0.02)
        queued = await call(runtime, "session.send", {"sessionId": "s", "text": "queued", "events": False})
        done = await compaction
        await runtime.close()
        return busy, done, queued

    busy, done, queued = asyncio.run(scenario())
    assert busy["error"]["code"] == -32002 and busy["error"]["data"]["code"] == "busy"
    assert queued["result"]["content"] == "after the compaction"
    events = list(store.read("s"))
    last_start = max(e.seq for e in events if e.type == "turn/start")
    assert done["result"]["endSeq"] < last_start  # the prompt's turn began after the compaction ended
    dshpy.validate(events)


def test_an_open_bracket_is_busy(model: FakeModelServer) -> None:
    store = dshpy.MemoryStore()
    length = stored_session(store)

    async def scenario() -> dict[str, Any]:
        runtime = Runtime(store)
        await call(runtime, "session/resume", {"sessionId": "s"})
        live = runtime.live.get("s")
        assert live is not None
        live.session.append("compaction/start", records.compaction_bracket_data("c-1", None))  # another compactor
        reply = await call(runtime, "session.compact", {"sessionId": "s"})
        live.session.append("compaction/end", records.compaction_bracket_data("c-1", None, error="gave up"))
        await runtime.close()
        return reply

    error = asyncio.run(scenario())["error"]
    assert (error["code"], error["data"]["code"]) == (-32002, "busy")
    assert [e.type for e in store.read("s")][length:] == ["session/end-seed", "compaction/start", "compaction/end"]
    assert model.requests == []
