"""Properties of compaction and pruning over generated sessions (``dshpy.testing.strategies``).

* every compaction that lands is tool-balanced: no tool call inside the span has its
  result outside it, and no result inside answers a call left outside;
* ``dshpy.validate`` accepts the log after every compaction and pruning pass, and a
  refused one (nothing compactable, a summary too big) leaves the log untouched;
* the model never sees a shadowed message again, and a session restored from the
  stored events derives exactly the same history;
* the token meter, folding as the log grows, always prices exactly the current
  surface (its derived messages) and keeps the same tool-pairing cuts as a walk
  from scratch;
* pruning keeps head + marker + tail by code point, never splits a surrogate pair,
  and a second pass finds nothing.
"""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dshpy
from dshpy import Session
from dshpy.compaction import (
    PRUNE_MARKER,
    CompactionEngine,
    SummaryOutput,
    TokenMeter,
    ToolResultPruner,
    estimate_message,
)
from dshpy.compaction.pairing import balanced_cuts, tool_link
from dshpy.errors import CompactionError
from dshpy.log import records
from dshpy.testing.strategies import SURROGATES, replay, session_scripts, texts

PROPERTY = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def new_session() -> Session:
    clock = itertools.count(1_700_000_000_000, 3)
    return Session.new(session_id="prop-compaction", clock=lambda: next(clock))


def visible_pairs(session: Session) -> tuple[dict[str, int], dict[str, int]]:
    """Tool calls and results on the current surface: call id → the node that holds it."""
    calls: dict[str, int] = {}
    results: dict[str, int] = {}
    for seq in session.surface_nodes:
        event = session.events[seq]
        if event.type == "assistant/message":
            for block in event.data["message"]["content"]:
                if block.get("type") == "tool-call":
                    calls[block["id"]] = seq
        elif event.type == "tool/result":
            results[event.data["message"]["toolCallId"]] = seq
    return calls, results


def summarizer(text: str) -> Any:
    return lambda request: SummaryOutput.text(text, provider="deepseek", model="deepseek-chat")


@PROPERTY
@given(
    ops=session_scripts(min_ops=5, max_ops=60, closed=True),
    retain=st.integers(0, 200),
    summary=st.sampled_from(["s", "## Primary Request and Intent\n- x", "long " * 400]),
    twice=st.booleans(),
)
def test_compaction_is_tool_balanced_valid_and_hides_what_it_replaced(
    ops: list[Any], retain: int, summary: str, twice: bool
) -> None:
    session = new_session()
    replay(ops, session)
    for index in range(3):  # enough text after the drawn log that a checkpoint is worth its preamble
        session.append("user/message", records.user_message(f"note {index} " * 60), surface_op="append")
    engine = CompactionEngine()
    shadowed: set[int] = set()
    for _ in range(2 if twice else 1):
        calls, results = visible_pairs(session)
        before = list(session.events)
        try:
            result = engine.compact(session, summarizer(summary), retain_tokens=retain)
        except CompactionError:
            assert list(session.events) == before
            continue
        span = set(result.shadowed_seqs)
        for call_id, seq in calls.items():
            if call_id in results:
                assert (seq in span) == (results[call_id] in span), f"call {call_id} separated from its result"
        for call_id, seq in results.items():
            if seq in span and call_id in calls:
                assert calls[call_id] in span
        shadowed |= span
        dshpy.validate(session.events)
    derived = [m.seq for m in session.derive_messages()]
    assert not shadowed & set(derived)
    restored = Session(session.header, list(session.events))
    assert [m.to_dict() for m in restored.derive_messages()] == [m.to_dict() for m in session.derive_messages()]


@PROPERTY
@given(ops=session_scripts(max_ops=80))
def test_the_meter_follows_the_surface_exactly(ops: list[Any]) -> None:
    session = new_session()
    meter = TokenMeter()
    for op in ops:
        op.apply(session)
        measurement = meter.measure(session)
        assert measurement.seqs == tuple(session.surface_nodes)
        assert measurement.surface_tokens == sum(estimate_message(m.data) for m in session.derive_messages())
        assert list(measurement.cuts) == balanced_cuts(tool_link(session.events[seq]) for seq in measurement.seqs)
    assert meter.measure(session) == TokenMeter().measure(session)


def split_units(text: str) -> list[str]:
    """Code points, a high + low surrogate pair as one (written apart from the pruner's own walk)."""
    units: list[str] = []
    for char in text:
        if units and "\udc00" <= char <= "\udfff" and len(units[-1]) == 1 and "\ud800" <= units[-1] <= "\udbff":
            units[-1] += char
        else:
            units.append(char)
    return units


_unit = st.one_of(st.characters(), st.sampled_from([*SURROGATES, "😀", "\ud83d\ude00"]))


@PROPERTY
@given(
    units=st.lists(_unit, min_size=0, max_size=400),
    head=st.integers(0, 60),
    tail=st.integers(0, 60),
    slack=st.integers(0, 100),
)
def test_pruning_keeps_head_and_tail_whole_and_is_idempotent(
    units: list[str], head: int, tail: int, slack: int
) -> None:
    text = "".join(units)
    threshold = head + len(PRUNE_MARKER) + tail + slack
    pruner = ToolResultPruner(threshold_chars=threshold, head_chars=head, tail_chars=tail)
    pruned = pruner.prune_content([{"type": "text", "text": text}])
    whole = split_units(text)
    if len(whole) <= threshold:
        assert pruned is None
        return
    assert pruned is not None
    expected = "".join(whole[:head]) + PRUNE_MARKER + "".join(whole[len(whole) - tail :])
    assert pruned == [{"type": "text", "text": expected}]
    assert pruner.prune_content(pruned) is None


@PROPERTY
@given(
    ops=session_scripts(min_ops=0, max_ops=40, closed=True),
    outputs=st.lists(texts(max_size=30, surrogates=True).map(lambda t: t * 40), min_size=1, max_size=4),
)
def test_a_pruning_pass_is_valid_idempotent_and_restorable(ops: list[Any], outputs: list[str]) -> None:
    session = new_session()
    replay(ops, session)
    turn = session.next_turn
    session.append("turn/start", {"turn": turn})
    session.append("step/start", {"turn": turn, "step": 1})
    ids = [f"big-{i}" for i in range(len(outputs))]
    content = [{"type": "tool-call", "id": cid, "name": "bash", "arguments": "{}"} for cid in ids]
    data = records.assistant_data(turn, 1, content, provider="p", model="m", stream=[], usage=None)
    session.append("assistant/message", data, surface_op="append")
    for cid, output in zip(ids, outputs, strict=True):
        call = session.append("tool/call", records.tool_call_data(turn, 1, cid, "bash", "{}"))
        result = records.tool_result_data(turn, 1, cid, [{"type": "text", "text": output}], is_error=False)
        session.append("tool/result", result, surface_op="append", source_event_seqs=[call.seq])
    pruner = ToolResultPruner(threshold_chars=200, head_chars=40, tail_chars=20)
    first = pruner.prune(session, clock=lambda: 1)
    dshpy.validate(session.events)
    length = len(session)
    assert not pruner.prune(session, clock=lambda: 1)
    assert len(session) == length
    for pruned in first.pruned:
        assert pruned.chars_after <= 200 < pruned.chars_before
        assert pruned.original_seq not in [m.seq for m in session.derive_messages()]
    restored = Session(session.header, list(session.events))
    assert [m.to_dict() for m in restored.derive_messages()] == [m.to_dict() for m in session.derive_messages()]
