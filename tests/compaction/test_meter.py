"""The token meter: dsh's fixed-density prices, the usage anchor, windows, and the incremental fold."""

from __future__ import annotations

import math

import orjson
from compaction_support import TOOLS, Agent, agent_session, new_session

from dshpy.compaction import (
    DEFAULT_CONTEXT_WINDOWS,
    ContextUsage,
    TokenMeter,
    context_usage,
    estimate_content,
    estimate_message,
    estimate_tools,
)
from dshpy.log import records
from dshpy.testing.builders import TurnScript

# -- the estimate (dsh-token-meter/estimate, 0.2.1rc2) -----------------------------------------------------------


def test_text_and_reasoning_blocks_cost_a_token_per_four_characters_plus_four() -> None:
    assert estimate_content([{"type": "text", "text": "abcde"}]) == 2 + 4
    assert estimate_content([{"type": "reasoning", "text": "abcd"}]) == 1 + 4
    assert estimate_content([{"type": "text", "text": ""}]) == 4


def test_lengths_are_utf16_code_units_as_javascript_counts_them() -> None:
    assert estimate_content([{"type": "text", "text": "😀😀😀"}]) == math.ceil(6 / 4) + 4  # 3 characters, 6 units
    assert estimate_content([{"type": "text", "text": "ééééé"}]) == 2 + 4  # BMP: one unit each


def test_a_tool_call_prices_its_name_and_arguments_apart() -> None:
    block = {"type": "tool-call", "id": "c1", "name": "read_file", "arguments": '{"path":"a.txt"}'}
    assert estimate_content([block]) == math.ceil(9 / 4) + math.ceil(16 / 4) + 4


def test_other_blocks_cost_their_compact_json_and_an_image_drops_its_offload_mark() -> None:
    image = {"type": "image", "attachment": {"attachmentId": "a", "mediaType": "image/png"}}
    expected = 4 + math.ceil(len(orjson.dumps(image)) / 4)
    assert estimate_content([image]) == expected
    assert estimate_content([{**image, "offloaded": True}]) == expected
    addition = {"type": "tool-addition", "toolName": "bash"}
    assert estimate_content([addition]) == 4 + math.ceil(len(orjson.dumps(addition)) / 4)


def test_a_message_adds_four_and_a_system_prompt_is_one_string() -> None:
    user = {"role": "user", "content": [{"type": "text", "text": "abcd"}, {"type": "text", "text": "abcd"}]}
    assert estimate_message(user) == (1 + 4) * 2 + 4
    system = {"role": "system", "content": [{"type": "text", "text": "abcd"}, {"type": "text", "text": "abcd"}]}
    assert estimate_message(system) == math.ceil(8 / 4) + 4
    assert estimate_message({"role": "system", "content": []}) == 0
    tool = {"role": "tool", "toolCallId": "c", "content": [{"type": "text", "text": "12345678"}]}
    assert estimate_message(tool) == 2 + 4 + 4


def test_tool_schemas_cost_their_json_and_nothing_without_any() -> None:
    assert estimate_tools(TOOLS) == math.ceil(len(orjson.dumps(TOOLS)) / 4) + 4
    assert estimate_tools(None) == estimate_tools([]) == 0


# -- measuring a session --------------------------------------------------------------------------------------------


def surface_price(session) -> int:
    return sum(estimate_message(m.data) for m in session.derive_messages())


def test_an_empty_session_measures_nothing() -> None:
    measurement = TokenMeter().measure(new_session())
    assert (measurement.total_tokens, measurement.baseline, measurement.nodes) == (0, "none", ())


def test_without_usage_the_estimate_is_tools_plus_the_derived_messages() -> None:
    session = agent_session(2)
    meter = TokenMeter()
    measurement = meter.measure(session)
    assert measurement.baseline == "estimated"
    assert measurement.surface_tokens == surface_price(session)
    assert measurement.tools_tokens == estimate_tools(TOOLS)
    assert measurement.total_tokens == measurement.surface_tokens + measurement.tools_tokens
    assert [node.seq for node in measurement.nodes] == list(session.surface_nodes)
    assert measurement.log_length == len(session)


def test_provider_usage_anchors_the_estimate_and_later_messages_add_their_price() -> None:
    session = new_session()
    agent = Agent(session)
    turn = agent.open_turn("hello")
    agent.answer(turn, 1, "hi there", usage={"inputTokens": 900, "outputTokens": 60, "cacheReadTokens": 100})
    meter = TokenMeter()
    assert meter.measure(session).total_tokens == 1060
    assert meter.measure(session).baseline == "usage"
    session.append("step/end", {"turn": turn, "step": 1})
    session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
    prompt = session.append("user/message", records.user_message("next question " * 3), surface_op="append")
    assert meter.measure(session).total_tokens == 1060 + estimate_message(prompt.data)


def test_usage_below_the_estimate_is_not_trusted() -> None:
    session = new_session()
    agent = Agent(session)
    turn = agent.open_turn("hello " * 200)
    agent.answer(turn, 1, "hi", usage={"inputTokens": 3, "outputTokens": 1})
    measurement = TokenMeter().measure(session)
    assert measurement.baseline == "estimated"
    assert measurement.total_tokens == estimate_tools(TOOLS) + surface_price(session)


def test_a_changed_request_header_drops_the_anchor() -> None:
    session = new_session()
    agent = Agent(session)
    turn = agent.open_turn("hello")
    agent.answer(turn, 1, "hi", usage={"inputTokens": 5000, "outputTokens": 10})
    meter = TokenMeter()
    assert meter.measure(session).total_tokens == 5010
    header = records.request_header("deepseek", "deepseek-chat", tools=TOOLS[:1])
    session.append("request/header", records.request_header_data(header, "change"))
    measurement = meter.measure(session)
    assert measurement.baseline == "estimated"
    assert measurement.total_tokens == estimate_tools(TOOLS[:1]) + surface_price(session)


def test_a_replacement_takes_the_shadowed_prices_off_the_total() -> None:
    session = agent_session(3)
    meter = TokenMeter()
    before = meter.measure(session)
    nodes = session.surface_nodes
    summary = records.user_message("short", {"kind": "runtime-context"})
    replace = {"op": "replace", "startSeq": nodes[1], "endSeq": nodes[4]}
    session.append("user/message", summary, surface_op=replace, source_event_seqs=list(nodes[1:5]))
    after = meter.measure(session)
    shadowed = sum(node.tokens for node in before.nodes[1:5])
    assert after.surface_tokens == before.surface_tokens - shadowed + estimate_message(summary)
    assert after.surface_tokens == surface_price(session)


def test_the_incremental_fold_equals_a_fresh_one_after_every_event() -> None:
    source = agent_session(3)
    session = new_session()
    meter = TokenMeter()
    for event in source.events:
        session.append_events([event])
        assert meter.measure(session) == TokenMeter().measure(session)


# -- the window and the usage read ------------------------------------------------------------------------------


def test_the_window_comes_from_request_context_then_the_model_table_then_the_caller() -> None:
    session = agent_session(1, window=4096)
    assert context_usage(session).window == 4096
    assert context_usage(session, window=1000).window == 1000
    assert context_usage(agent_session(1, window=None)).window == DEFAULT_CONTEXT_WINDOWS["deepseek-chat"] == 131_072
    unknown = new_session()
    unknown.append("turn/start", {"turn": 1})
    unknown.append("request/context", records.request_context_data("acme", "acme-1"))
    assert context_usage(unknown).window is None
    assert context_usage(new_session()).window is None


def test_the_builders_context_window_is_read() -> None:
    session = new_session()
    TurnScript(session).turn("hi")
    assert context_usage(session).window == 128_000


def test_context_usage_reads_as_a_share_of_the_window() -> None:
    usage = ContextUsage(used=620, window=1000, baseline="usage")
    assert (usage.ratio, usage.percent) == (0.62, 62)
    assert usage.to_dict() == {"used": 620, "window": 1000, "ratio": 0.62}
    assert ContextUsage(used=5000, window=1000, baseline="usage").percent == 100
    assert ContextUsage(used=5, window=None, baseline="estimated").ratio is None


def test_a_negative_count_makes_usage_unusable() -> None:
    session = new_session()
    agent = Agent(session)
    turn = agent.open_turn("hello")
    agent.answer(turn, 1, "hi", usage={"inputTokens": -1, "outputTokens": 20_000})
    assert TokenMeter().measure(session).baseline == "estimated"
