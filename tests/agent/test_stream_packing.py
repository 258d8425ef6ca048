"""Packing model streams into dsh's AssistantStreamRecord runs (dsh-v4 §3.4), checked against real dsh streams."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dshpy.llm import chunks as c
from dshpy.llm.stream import AssistantStreamAccumulator, expand_stream, pack_stream

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "dsh" / "sessions" / "plain"


def fixture_streams():
    streams = []
    for path in sorted(FIXTURES.glob("*/*/session.v4.jsonl")):
        for line in path.read_text().splitlines()[1:]:
            event = json.loads(line)
            if event["type"] == "assistant/message":
                streams.append(pytest.param(event["data"]["stream"], id=f"{path.parent.name}-{event['seq']}"))
    return streams


@pytest.mark.parametrize("records", fixture_streams())
def test_repacking_a_real_dsh_stream_gives_the_same_records(records):
    assert pack_stream(expand_stream(records)) == records


@pytest.mark.parametrize("records", fixture_streams())
def test_the_content_folded_from_a_real_stream_is_its_block_ends(records):
    accumulator = AssistantStreamAccumulator()
    for time, chunk in expand_stream(records):
        accumulator.push(chunk, time)
    ends = [r["chunk"]["block"] for r in records if r["type"] == "chunk" and r["chunk"]["type"] == "block-end"]
    assert accumulator.content() == ends
    assert accumulator.finish_reason["kind"] in ("stop", "tool-calls")


def test_runs_extend_with_time_deltas_and_split_on_block_or_type():
    chunks = [
        (100, c.block_start(0, "reasoning")),
        (101, c.reasoning_delta(0, "a")),
        (101, c.reasoning_delta(0, "b")),
        (104, c.reasoning_delta(0, "c")),
        (104, c.block_end(0, {"type": "reasoning", "text": "abc"})),
        (105, c.block_start(1, "text")),
        (106, c.text_delta(1, "x")),
        (103, c.text_delta(1, "y")),  # a clock step back: gaps may be negative
    ]
    records = pack_stream(chunks)
    assert records[1] == {"type": "reasoning-chunks", "time0": 101, "index": 0, "dt": [0, 3], "texts": ["a", "b", "c"]}
    assert records[4] == {"type": "text-chunks", "time0": 106, "index": 1, "dt": [-3], "texts": ["x", "y"]}
    assert expand_stream(records) == chunks


def test_tool_runs_split_on_name_presence_and_id():
    chunks = [
        (1, c.block_start(0, "tool-call")),
        (2, c.tool_call_delta(0, "call_1", "", name="read")),
        (3, c.tool_call_delta(0, "call_1", '{"a"')),
        (3, c.tool_call_delta(0, "call_1", ": 1}")),
        (4, c.tool_call_delta(0, "call_2", "{}")),
    ]
    records = pack_stream(chunks)
    assert records[1:] == [
        {"type": "tool-call-chunks", "time0": 2, "index": 0, "dt": [], "id": "call_1", "name": "read", "args": [""]},
        {"type": "tool-call-chunks", "time0": 3, "index": 0, "dt": [0], "id": "call_1", "args": ['{"a"', ": 1}"]},
        {"type": "tool-call-chunks", "time0": 4, "index": 0, "dt": [], "id": "call_2", "args": ["{}"]},
    ]
    assert expand_stream(records) == chunks


def test_degenerate_tool_call_deltas_stay_single_chunk_records():
    chunks = [(1, c.tool_call_delta(0, "", "{")), (2, c.tool_call_delta(0, "call_1", "}", name=""))]
    records = pack_stream(chunks)
    assert [r["type"] for r in records] == ["chunk", "chunk"]
    assert expand_stream(records) == chunks


def test_visible_content_keeps_unfinished_text_but_no_tool_calls():
    accumulator = AssistantStreamAccumulator()
    for time, chunk in [
        (1, c.block_start(0, "reasoning")),
        (1, c.reasoning_delta(0, "think")),
        (2, c.block_end(0, {"type": "reasoning", "text": "think"})),
        (3, c.block_start(1, "text")),
        (3, c.text_delta(1, "half an ans")),
        (4, c.usage_chunk({"inputTokens": 5, "outputTokens": 2})),
    ]:
        accumulator.push(chunk, time)
    assert accumulator.content() == [{"type": "reasoning", "text": "think"}]
    assert accumulator.visible_content() == [
        {"type": "reasoning", "text": "think"},
        {"type": "text", "text": "half an ans"},
    ]
    assert accumulator.usage == {"inputTokens": 5, "outputTokens": 2}
    assert accumulator.finish_reason is None
