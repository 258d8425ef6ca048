"""Answers streamed by the server's own agents reach watchers as they grow, and end naming the event that holds them."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from server_support import rpc, use_fake_model

import dshpy
from dshpy.server.methods import Runtime
from dshpy.testing.fake_model import FakeModelServer, Reply


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeModelServer]:
    with FakeModelServer() as server:
        use_fake_model(monkeypatch, server)
        yield server


async def call(runtime: Runtime, method: str, params: dict[str, Any]) -> dict[str, Any]:
    reply = await rpc(runtime, method, params)
    assert "error" not in reply, reply
    return reply["result"]


def text_of(frames: list[dict[str, Any]]) -> str:
    deltas = [f["chunk"] for f in frames if f["type"] == "chunk" and f["chunk"]["type"] == "text-delta"]
    return "".join(chunk["text"] for chunk in deltas)


async def until(condition: Any) -> None:
    while not condition():
        await asyncio.sleep(0.01)


def test_watchers_see_the_answer_grow_then_the_event_that_holds_it(model: FakeModelServer) -> None:
    model.add(Reply.deltas("The answer ", "grows ", "piece ", "by piece.").paused(3))
    store = dshpy.MemoryStore()
    store.create(session_id="s").close()

    async def scenario() -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any], Runtime]:
        runtime = Runtime(store)
        early: list[dict[str, Any]] = []
        runtime.streams.watch("s", early.append)
        turn = asyncio.ensure_future(call(runtime, "session.send", {"sessionId": "s", "text": "grow"}))
        await asyncio.wait_for(until(lambda: text_of(early) == "The answer grows "), 20)
        assert runtime.streams.active("s") is not None and not turn.done()
        late: list[dict[str, Any]] = []  # arrives mid-answer: the attempt so far is replayed first
        runtime.streams.watch("s", late.append)
        assert late == early
        model.release()
        result = await asyncio.wait_for(turn, 20)
        assert late == early
        await runtime.close()
        return early, late, result, runtime

    frames, _late, result, runtime = asyncio.run(scenario())
    start, *chunks, end = frames
    assert start["type"] == "start" and (start["turn"], start["step"], start["attempt"]) == (1, 1, 1)
    assert [f["index"] for f in chunks] == list(range(len(chunks)))
    assert {f["attemptId"] for f in frames} == {start["attemptId"]}
    assert text_of(frames) == result["content"] == "The answer grows piece by piece."
    (message,) = [e for e in store.read("s") if e.type == "assistant/message"]
    assert end == {
        "type": "end",
        "attemptId": start["attemptId"],
        "outcome": {"kind": "committed", "eventType": "assistant/message", "seq": message.seq},
    }
    assert runtime.streams.active("s") is None  # nothing is kept once the answer settled


def test_a_failed_attempt_ends_committed_as_an_attempt_and_the_retry_streams_anew(model: FakeModelServer) -> None:
    model.add(Reply.deltas("half an ans", "wer that breaks").cut(2), Reply.deltas("A whole answer."))
    store = dshpy.MemoryStore()
    store.create(session_id="s").close()

    async def scenario() -> tuple[list[dict[str, Any]], dict[str, Any]]:
        runtime = Runtime(store)
        frames: list[dict[str, Any]] = []
        stop = runtime.streams.watch("s", frames.append)
        result = await call(runtime, "session.send", {"sessionId": "s", "text": "try"})
        stop()
        await runtime.close()
        return frames, result

    frames, result = asyncio.run(scenario())
    ends = [f for f in frames if f["type"] == "end"]
    starts = [f for f in frames if f["type"] == "start"]
    attempt = next(e for e in store.read("s") if e.type == "assistant/attempt")
    message = next(e for e in store.read("s") if e.type == "assistant/message")
    assert [s["attempt"] for s in starts] == [1, 2] and starts[0]["attemptId"] != starts[1]["attemptId"]
    assert [e["outcome"] for e in ends] == [
        {"kind": "committed", "eventType": "assistant/attempt", "seq": attempt.seq},
        {"kind": "committed", "eventType": "assistant/message", "seq": message.seq},
    ]
    second = frames[frames.index(starts[1]) :]
    assert text_of(second) == result["content"] == "A whole answer."
