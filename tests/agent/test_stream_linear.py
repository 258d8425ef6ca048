"""Streaming cost is linear in the answer size: no block's text is rebuilt per chunk (issue #11, item 13).

The mapper and the accumulator each kept a block's text as one string and appended
every delta to it, copying the whole text so far each time: 8 MB in 1 KB deltas copied
~64 GB (tens of seconds). Collected as pieces and joined once, it is ~0.1 s; the bound
below is 20x that, far under what the quadratic version needs.
"""

from __future__ import annotations

import time

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


def _stream(chunks) -> tuple[float, list[dict]]:
    mapper = ChunkMapper()
    accumulator = AssistantStreamAccumulator()
    started = time.perf_counter()
    for chunk in chunks:
        for out in mapper.feed(chunk):
            accumulator.push(out, 0)
    for out in mapper.end():
        accumulator.push(out, 0)
    content = accumulator.content()
    return time.perf_counter() - started, content


def test_a_large_text_answer_streams_in_linear_time():
    elapsed, content = _stream(_chunks("content"))
    assert [block["type"] for block in content] == ["text"]
    assert len(content[0]["text"]) == SIZE and content[0]["text"].endswith("xé")
    assert elapsed < 2.0, f"8 MB in 1 KB deltas took {elapsed:.1f} s"


def test_large_reasoning_and_tool_arguments_stream_in_linear_time():
    elapsed, content = _stream(_chunks("reasoning_content"))
    assert [block["type"] for block in content] == ["reasoning"] and len(content[0]["text"]) == SIZE
    assert elapsed < 2.0, f"8 MB of reasoning in 1 KB deltas took {elapsed:.1f} s"
    elapsed, content = _stream(_tool_chunks())
    assert content[0]["type"] == "tool-call" and len(content[0]["arguments"]) == SIZE
    assert elapsed < 2.0, f"8 MB of tool arguments in 1 KB deltas took {elapsed:.1f} s"


def test_interrupted_text_is_joined_from_its_pieces():
    mapper = ChunkMapper()
    accumulator = AssistantStreamAccumulator()
    for chunk in list(_chunks("content"))[:4]:
        for out in mapper.feed(chunk):
            accumulator.push(out, 0)
    assert accumulator.visible_content() == [{"type": "text", "text": ("x" * (PIECE - 1) + "é") * 3}]
