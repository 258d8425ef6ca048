"""Large answers stream whole: blocks are collected as pieces and joined once (issue #11, item 13).

The mapper and the accumulator each kept a block's text as one string and appended
every delta to it, copying the whole text so far each time (8 MB in 1 KB deltas took
tens of seconds). Whether the cost is now linear is measured, not asserted here:
``benchmarks/agent.py --large-answers`` prints seconds per answer size. These tests
hold the piecewise path to producing exactly the text, reasoning and arguments sent.
"""

from __future__ import annotations

from dshpy.llm import AssistantStreamAccumulator
from dshpy.llm.mapping import ChunkMapper

SIZE = 8_000_000
PIECE = 1_000


def _chunks(field: str):
    piece = "x" * (PIECE - 1) + "é"
    yield {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]}
    for _ in range(SIZE // PIECE):
        yield {"choices": [{"index": 0, "delta": {field: piece}, "finish_reason": None}]}
    yield {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}


def _tool_chunks():
    first = {"index": 0, "id": "c1", "type": "function", "function": {"name": "write", "arguments": ""}}
    yield {"choices": [{"index": 0, "delta": {"tool_calls": [first]}, "finish_reason": None}]}
    piece = "y" * PIECE
    for _ in range(SIZE // PIECE):
        fragment = {"index": 0, "function": {"arguments": piece}}
        yield {"choices": [{"index": 0, "delta": {"tool_calls": [fragment]}, "finish_reason": None}]}
    yield {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}


def _stream(chunks) -> list[dict]:
    mapper = ChunkMapper()
    accumulator = AssistantStreamAccumulator()
    for chunk in chunks:
        for out in mapper.feed(chunk):
            accumulator.push(out, 0)
    for out in mapper.end():
        accumulator.push(out, 0)
    return accumulator.content()


def test_a_large_text_answer_streams_whole():
    content = _stream(_chunks("content"))
    assert [block["type"] for block in content] == ["text"]
    assert content[0]["text"] == ("x" * (PIECE - 1) + "é") * (SIZE // PIECE)


def test_large_reasoning_and_tool_arguments_stream_whole():
    content = _stream(_chunks("reasoning_content"))
    assert [block["type"] for block in content] == ["reasoning"]
    assert content[0]["text"] == ("x" * (PIECE - 1) + "é") * (SIZE // PIECE)
    content = _stream(_tool_chunks())
    assert content[0]["type"] == "tool-call" and content[0]["arguments"] == "y" * SIZE


def test_interrupted_text_is_joined_from_its_pieces():
    mapper = ChunkMapper()
    accumulator = AssistantStreamAccumulator()
    for chunk in list(_chunks("content"))[:4]:
        for out in mapper.feed(chunk):
            accumulator.push(out, 0)
    assert accumulator.visible_content() == [{"type": "text", "text": ("x" * (PIECE - 1) + "é") * 3}]
