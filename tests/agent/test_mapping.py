"""Chat-completions chunks → dsh StreamChunks, usage buckets, finish kinds."""

from __future__ import annotations

import pytest

from dshpy.llm.failures import LlmError
from dshpy.llm.mapping import ChunkMapper
from dshpy.llm.usage import token_usage


def delta(**fields):
    return {"choices": [{"index": 0, "delta": fields, "finish_reason": None}]}


def finish(reason, usage=None):
    chunk = {"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]}
    if usage is not None:
        chunk["usage"] = usage
    return chunk


def run(chunks):
    mapper = ChunkMapper()
    out = []
    for chunk in chunks:
        out.extend(mapper.feed(chunk))
    out.extend(mapper.end())
    return out


def test_reasoning_then_text_then_tools_open_and_close_blocks_in_order():
    out = run(
        [
            delta(role="assistant", content=""),
            delta(content=None, reasoning_content="hm"),
            delta(content="Hi"),
            delta(
                tool_calls=[{"index": 0, "id": "c1", "type": "function", "function": {"name": "ls", "arguments": ""}}]
            ),
            delta(tool_calls=[{"index": 0, "function": {"arguments": "{}"}}]),
            delta(tool_calls=[{"index": 1, "id": "c2", "function": {"name": "cat", "arguments": '{"p":1}'}}]),
            finish("tool_calls", {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}),
        ]
    )
    assert [(o["type"], o.get("index")) for o in out] == [
        ("block-start", 0),
        ("reasoning-delta", 0),
        ("block-end", 0),
        ("block-start", 1),
        ("text-delta", 1),
        ("block-end", 1),
        ("block-start", 2),
        ("tool-call-delta", 2),
        ("tool-call-delta", 2),
        ("block-end", 2),
        ("block-start", 3),
        ("tool-call-delta", 3),
        ("block-end", 3),
        ("usage", None),
        ("finish", None),
    ]
    assert out[7] == {"type": "tool-call-delta", "index": 2, "id": "c1", "name": "ls", "argumentsDelta": ""}
    assert out[8] == {"type": "tool-call-delta", "index": 2, "id": "c1", "argumentsDelta": "{}"}
    assert out[9]["block"] == {"type": "tool-call", "id": "c1", "name": "ls", "arguments": "{}"}
    assert out[-1] == {"type": "finish", "reason": {"kind": "tool-calls"}}


def test_usage_in_its_own_chunk_comes_before_finish():
    out = run(
        [delta(content="x"), finish("stop"), {"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 1}}]
    )
    assert [o["type"] for o in out] == ["block-start", "text-delta", "block-end", "usage", "finish"]


@pytest.mark.parametrize(
    ("reason", "kind"), [("stop", "stop"), ("length", "max-tokens"), ("tool_calls", "tool-calls"), ("eos", "stop")]
)
def test_finish_reasons(reason, kind):
    assert run([delta(content="x"), finish(reason)])[-1]["reason"] == {"kind": kind}


def test_stop_after_tool_calls_means_tool_calls():
    out = run(
        [delta(tool_calls=[{"index": 0, "id": "c", "function": {"name": "f", "arguments": "{}"}}]), finish("stop")]
    )
    assert out[-1]["reason"] == {"kind": "tool-calls"}


def test_a_stream_without_finish_reason_was_cut():
    mapper = ChunkMapper()
    mapper.feed(delta(content="half"))
    with pytest.raises(LlmError) as caught:
        mapper.end()
    assert caught.value.code == "STREAM_INTERRUPTED"
    assert caught.value.retryable


def test_deepseek_overload_finish_is_a_retryable_server_failure():
    mapper = ChunkMapper()
    mapper.feed(delta(content="x"))
    mapper.feed(finish("insufficient_system_resource"))
    with pytest.raises(LlmError) as caught:
        mapper.end()
    assert caught.value.code == "SERVER"


def test_missing_call_id_is_minted_and_repeated_names_are_not_doubled():
    out = run(
        [
            delta(tool_calls=[{"index": 0, "function": {"name": "read", "arguments": '{"a"'}}]),
            delta(tool_calls=[{"index": 0, "function": {"name": "read", "arguments": ":1}"}}]),
            finish("tool_calls"),
        ]
    )
    block = next(o for o in out if o["type"] == "block-end")["block"]
    assert block["name"] == "read"
    assert block["arguments"] == '{"a":1}'
    assert block["id"].startswith("call_")


def test_deepseek_usage_maps_to_disjoint_buckets():
    usage = {
        "prompt_tokens": 100,
        "completion_tokens": 30,
        "total_tokens": 130,
        "prompt_cache_hit_tokens": 64,
        "prompt_cache_miss_tokens": 36,
        "prompt_tokens_details": {"cached_tokens": 64},
        "completion_tokens_details": {"reasoning_tokens": 20},
    }
    assert token_usage(usage) == {
        "inputTokens": 36,
        "outputTokens": 30,
        "cacheReadTokens": 64,
        "reasoningTokens": 20,
        "totalTokens": 130,
    }


def test_openai_usage_subtracts_cached_tokens_from_input():
    usage = {"prompt_tokens": 50, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 20}}
    assert token_usage(usage) == {"inputTokens": 30, "outputTokens": 5, "cacheReadTokens": 20, "totalTokens": 55}
    assert token_usage(None) is None
    assert token_usage({"foo": 1}) is None


@pytest.mark.parametrize(
    ("pieces", "text"),
    [
        (["a\ud83d", "\ude00b"], "a😀b"),
        (["\ud83d", "\ude00"], "😀"),
        (["a\ud83d", "b"], "a\ud83db"),  # a high half not followed by a low one stays, in place
        (["\ud83d", "\ud83d", "\ude00"], "\ud83d😀"),
        (["x\ude00"], "x\ude00"),  # a lone low half is passed on as sent
        (["end \ud83d"], "end \ud83d"),  # released when the block ends
    ],
)
def test_surrogate_halves_split_between_deltas_are_joined_and_lone_ones_kept(pieces, text):
    out = run([delta(content=piece) for piece in pieces] + [finish("stop")])
    deltas = [o["text"] for o in out if o["type"] == "text-delta"]
    assert "".join(deltas) == text
    assert all(piece for piece in deltas)  # a delta held back entirely is not sent empty
    assert [o["block"] for o in out if o["type"] == "block-end"] == [{"type": "text", "text": text}]


def test_a_held_back_half_is_released_before_the_next_block_starts():
    out = run([delta(content="hi \ud83d"), delta(reasoning_content="\ude00"), finish("stop")])
    assert [o["block"] for o in out if o["type"] == "block-end"] == [
        {"type": "text", "text": "hi \ud83d"},
        {"type": "reasoning", "text": "\ude00"},
    ]
