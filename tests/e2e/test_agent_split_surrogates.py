"""An emoji the server split between two stream chunks reaches the text whole (issue #11, item 1).

The server's JSON holds ``\\ud83d`` at the end of one SSE chunk and ``\\ude00`` at the
start of the next; each chunk decodes to a string with half a character. The agent
must hand the model's text, the live chunks and the stored stream the real 😀, while
a truly lone half at the end of the stream stays exactly as the server sent it.
"""

from __future__ import annotations

import asyncio
import http.client
import json

from e2e_support import client_for, make_agent, of_type

import dshpy
from dshpy.llm import expand_stream
from dshpy.testing.fake_model import FakeModelServer, Reply

HIGH, LOW = "\ud83d", "\ude00"


def _has_surrogate(text: str) -> bool:
    return any("\ud800" <= char <= "\udfff" for char in text)


def run_agent(script, **options):
    session = dshpy.Session.new()
    live: list[str] = []

    async def scenario():
        with FakeModelServer(script) as server:
            agent = make_agent(session, server, **options)
            result = await agent.run("smile", on_chunk=lambda update: live.append(update.text or ""))
            await agent.client.close()
            return result

    return session, asyncio.run(scenario()), "".join(live)


def test_the_wire_really_splits_the_pair():
    with FakeModelServer([Reply.deltas("a" + HIGH, LOW + "b")]) as server:
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
        connection.request("POST", "/chat/completions", json.dumps({"model": "m", "messages": []}))
        body = connection.getresponse().read().decode()
        connection.close()
    assert '"content": "a\\ud83d"' in body and '"content": "\\ude00b"' in body


def test_an_emoji_split_between_chunks_is_joined_in_text_live_chunks_and_stored_stream():
    session, result, live = run_agent([Reply.deltas("smile " + HIGH, LOW + " done", " and " + HIGH, LOW)])
    assert result.kind == "completed"
    assert result.text == "smile 😀 done and 😀"
    assert live == "smile 😀 done and 😀"
    message = of_type(session, "assistant/message")[0]
    assert message.data["message"]["content"] == [{"type": "text", "text": "smile 😀 done and 😀"}]
    deltas = [chunk["text"] for _, chunk in expand_stream(message.data["stream"]) if chunk["type"] == "text-delta"]
    assert "".join(deltas) == "smile 😀 done and 😀" and not any(_has_surrogate(d) for d in deltas)
    assert session.derive_messages()[-1].text == "smile 😀 done and 😀"


def test_a_half_alone_in_its_chunk_and_split_reasoning_and_tool_arguments_are_joined():
    call = {"index": 0, "id": "c1", "type": "function", "function": {"name": "echo", "arguments": '{"s": "' + HIGH}}
    chunks = (
        {"delta": {"role": "assistant", "content": ""}},
        {"delta": {"content": None, "reasoning_content": "think " + HIGH}},
        {"delta": {"content": None, "reasoning_content": LOW}},
        {"delta": {"content": HIGH}},
        {"delta": {"content": LOW + "!"}},
        {"delta": {"tool_calls": [call]}},
        {"delta": {"tool_calls": [{"index": 0, "function": {"arguments": LOW + '"}'}}]}},
        {"delta": {}, "finish_reason": "tool_calls"},
    )
    calls: list[str] = []

    def echo(s: str) -> str:
        """Echo.

        Args:
            s: Text.
        """
        calls.append(s)
        return s

    session, result, _live = run_agent([Reply(chunks=chunks), Reply.text("ok")], tools=[echo])
    assert result.kind == "completed"
    content = of_type(session, "assistant/message")[0].data["message"]["content"]
    assert content[0] == {"type": "reasoning", "text": "think 😀"}
    assert content[1] == {"type": "text", "text": "😀!"}
    assert json.loads(content[2]["arguments"]) == {"s": "😀"}
    assert calls == ["😀"]


def test_a_truly_lone_half_at_the_end_of_the_stream_stays_as_sent():
    async def scenario():
        with FakeModelServer([Reply.deltas("end " + HIGH)]) as server:
            async with client_for(server) as client:
                return [chunk async for chunk in client.stream([{"role": "user", "content": "x"}])]

    chunks = asyncio.run(scenario())
    texts = [chunk["text"] for chunk in chunks if chunk["type"] == "text-delta"]
    assert "".join(texts) == "end " + HIGH
    ends = [chunk["block"] for chunk in chunks if chunk["type"] == "block-end"]
    assert ends == [{"type": "text", "text": "end " + HIGH}]
    assert chunks[-1] == {"type": "finish", "reason": {"kind": "stop"}}
