"""Incremental derivation after a surface replace (issue #13): prunes, compactions, the system head.

Every test compares the cached history with a fold from scratch (a session restored
from the same events) and checks that a history handed out earlier never changes.
"""

import itertools

import pytest

import dshpy
from dshpy.log import history
from dshpy.testing.builders import TurnScript, assistant_data, system_data, user_message

# -- helpers ---------------------------------------------------------------------------------------------------------


def new_session():
    clock = itertools.count(1_000)
    return dshpy.Session.new(clock=lambda: next(clock))


def replace(start, end):
    return {"op": "replace", "startSeq": start, "endSeq": end}


def from_scratch(s):
    return list(dshpy.Session(s.header, s.events).derive_messages())


def assert_fresh(s):
    """The cached history equals a fresh fold over the same log."""
    messages = list(s.derive_messages())
    assert messages == from_scratch(s)
    return messages


def long_session(turns=4):
    """A system prompt at node 0 and ``turns`` 2-step turns with two tool calls each; between turns."""
    s = new_session()
    script = TurnScript(s)
    script.turn(steps=2, tools_per_step=2, system="be careful")
    for _ in range(turns - 1):
        script.turn(steps=2, tools_per_step=2)
    return s


def open_turn(s):
    turn = s.next_turn
    s.append("turn/start", {"turn": turn})
    s.append("step/start", {"turn": turn, "step": 1})
    return turn


def prune(s, seq, text="[pruned]"):
    """dsh's pruner: a compaction/prune naming the result, then the result again with new content."""
    span = {"shadowedRange": {"start": seq, "end": seq}, "shadowedSeqs": [seq], "shadowedTokenCount": 10}
    s.append("compaction/prune", span)
    data = dshpy.thaw(s.events[seq].data)
    data["message"]["content"] = [{"type": "text", "text": text}]
    return s.append("tool/result", data, surface_op=replace(seq, seq), source_event_seqs=[seq])


def compact(s, first, last, compaction_id, turn, text="summary"):
    """One successful compaction bracket whose checkpoint replaces surface positions ``first..last``."""
    shadowed = list(s.surface_nodes[first : last + 1])
    bracket = {"compactionId": compaction_id, "turn": turn}
    start = s.append("compaction/start", bracket)
    summary = s.append(
        "compaction/summary",
        {
            "compactionId": compaction_id,
            "summary": [{"type": "text", "text": text}],
            "shadowedRange": {"start": shadowed[0], "end": shadowed[-1]},
            "shadowedSeqs": shadowed,
            "shadowedTokenCount": 100,
            "provider": "deepseek",
            "model": "deepseek-chat",
        },
    )
    data = user_message(f"<compacted-summary>{text}</compacted-summary>", kind="compact-checkpoint")
    data["source"]["compactionId"] = compaction_id
    checkpoint = s.append(
        "user/message",
        data,
        surface_op=replace(shadowed[0], shadowed[-1]),
        source_event_seqs=[start.seq, summary.seq, *shadowed],
    )
    s.append("compaction/end", bracket)
    return checkpoint


def turn_start_positions(s):
    """Surface positions of the user messages that open turns (a cut there splits no tool pair)."""
    return [i for i, seq in enumerate(s.surface_nodes) if s.events[seq].type == "user/message"]


@pytest.fixture
def derivations(monkeypatch):
    """Counts the events derived into messages (``message_of`` calls made by the history)."""
    calls = []
    original = history.message_of

    def counting(event):
        calls.append(event.seq)
        return original(event)

    monkeypatch.setattr(history, "message_of", counting)
    return calls


# -- prunes -----------------------------------------------------------------------------------------------------------


def test_a_prune_rewrites_its_message_in_place(derivations):
    s = long_session()
    before = s.derive_messages()
    kept = list(before)
    results = [seq for seq in s.surface_nodes if s.events[seq].type == "tool/result"]
    target = results[len(results) // 2]
    index = [m.seq for m in before].index(target)
    open_turn(s)
    derivations.clear()
    pruned = prune(s, target)
    after = s.derive_messages()
    assert derivations == [pruned.seq]  # one derivation: the replacement, not the history
    assert len(after) == len(before)
    assert after[index].seq == pruned.seq
    assert after[index].text == "[pruned]"
    assert [m for i, m in enumerate(after) if i != index] == [m for i, m in enumerate(kept) if i != index]
    assert list(before) == kept  # the history handed out earlier is a snapshot
    assert_fresh(s)


def test_several_prunes_between_derivations():
    s = long_session()
    held = s.derive_messages()
    kept = list(held)
    open_turn(s)
    results = [seq for seq in s.surface_nodes if s.events[seq].type == "tool/result"]
    for seq in results[::2]:
        prune(s, seq)
    messages = assert_fresh(s)
    assert sum(m.text == "[pruned]" for m in messages) == len(results[::2])
    assert list(held) == kept


def test_a_pruned_result_pruned_again():
    s = long_session(turns=2)
    s.derive_messages()
    open_turn(s)
    seq = next(seq for seq in s.surface_nodes if s.events[seq].type == "tool/result")
    first = prune(s, seq, "[once]")
    assert_fresh(s)
    prune(s, first.seq, "[twice]")
    messages = assert_fresh(s)
    assert [m.text for m in messages].count("[twice]") == 1
    assert "[once]" not in [m.text for m in messages]


# -- compactions ------------------------------------------------------------------------------------------------------


def test_a_head_compaction_swaps_the_span_for_its_checkpoint(derivations):
    s = long_session(turns=6)
    before = s.derive_messages()
    kept = list(before)
    cut = turn_start_positions(s)[4]
    turn = open_turn(s)
    derivations.clear()
    checkpoint = compact(s, 1, cut - 1, "compaction-1", turn)
    after = s.derive_messages()
    assert derivations == [checkpoint.seq]
    retained = s.surface_nodes[2]  # the first node after the checkpoint: the turn the cut kept
    assert [m.seq for m in after] == [kept[0].seq, checkpoint.seq] + [m.seq for m in kept if m.seq >= retained]
    assert after[0].role == "system"  # the protected head stays
    assert after[1].source["kind"] == "compact-checkpoint"
    assert list(before) == kept
    assert_fresh(s)


def test_a_nested_compaction_shadows_the_earlier_checkpoint():
    s = long_session(turns=8)
    held = s.derive_messages()
    kept = list(held)
    turn = open_turn(s)
    compact(s, 1, turn_start_positions(s)[3] - 1, "compaction-1", turn, "first")
    first = s.derive_messages()
    first_kept = list(first)
    second = compact(s, 1, turn_start_positions(s)[3] - 1, "compaction-2", turn, "second")
    messages = assert_fresh(s)
    assert messages[1].seq == second.seq
    assert "first" not in " ".join(m.text for m in messages)
    assert list(held) == kept
    assert list(first) == first_kept


def test_compaction_and_prune_before_any_derivation():
    s = long_session(turns=5)
    turn = open_turn(s)
    compact(s, 1, turn_start_positions(s)[2] - 1, "compaction-1", turn)
    prune(s, next(seq for seq in s.surface_nodes if s.events[seq].type == "tool/result"))
    assert_fresh(s)


# -- the protected system head ----------------------------------------------------------------------------------------


def test_replacing_the_system_head(derivations):
    s = long_session(turns=3)
    before = s.derive_messages()
    kept = list(before)
    turn = open_turn(s)
    head = s.surface_nodes[0]
    derivations.clear()
    event = s.append(
        "system/message", system_data(turn, 1, "be brief"), surface_op=replace(head, head), source_event_seqs=[head]
    )
    after = s.derive_messages()
    assert derivations == [event.seq]
    assert after[0].seq == event.seq
    assert after[0].text == "be brief"
    assert list(after[1:]) == kept[1:]
    assert list(before) == kept
    assert_fresh(s)


def test_an_empty_system_prompt_over_the_head_removes_its_message():
    s = long_session(turns=2)
    kept = list(s.derive_messages())
    turn = open_turn(s)
    head = s.surface_nodes[0]
    s.append("system/message", system_data(turn, 1, ""), surface_op=replace(head, head), source_event_seqs=[head])
    assert s.surface_nodes[0] != head  # still on the surface, but it derives nothing
    assert list(s.derive_messages()) == kept[1:]
    assert_fresh(s)
    s.append(
        "system/message",
        system_data(turn, 1, "back"),
        surface_op=replace(s.surface_nodes[0], s.surface_nodes[0]),
        source_event_seqs=[s.surface_nodes[0]],
    )
    assert s.derive_messages()[0].text == "back"
    assert_fresh(s)


# -- where a replace falls against what was derived -------------------------------------------------------------------


def test_a_replace_reaching_past_the_derived_prefix():
    s = new_session()
    for text in "abcd":
        s.append("user/message", user_message(text), surface_op="append")
    s.derive_messages()
    for text in "ef":  # appended, not derived yet
        s.append("user/message", user_message(text), surface_op="append")
    nodes = s.surface_nodes
    s.append("user/message", user_message("cde"), surface_op=replace(nodes[2], nodes[4]), source_event_seqs=nodes[2:5])
    assert [m.text for m in assert_fresh(s)] == ["a", "b", "cde", "f"]


def test_a_replace_inside_the_underived_tail():
    s = new_session()
    for text in "ab":
        s.append("user/message", user_message(text), surface_op="append")
    s.derive_messages()
    for text in "cd":
        s.append("user/message", user_message(text), surface_op="append")
    nodes = s.surface_nodes
    s.append("user/message", user_message("D"), surface_op=replace(nodes[3], nodes[3]), source_event_seqs=[nodes[3]])
    assert [m.text for m in assert_fresh(s)] == ["a", "b", "c", "D"]


def test_a_replace_over_nodes_that_derive_nothing():
    s = new_session()
    turn = open_turn(s)
    s.append("user/message", user_message("q"), surface_op="append")
    for _ in range(2):
        s.append("assistant/message", assistant_data(turn, 1, ""), surface_op="append")  # on the surface, no message
    s.append("user/message", user_message("r"), surface_op="append")
    assert [m.text for m in s.derive_messages()] == ["q", "r"]
    nodes = s.surface_nodes
    s.append("user/message", user_message("gap"), surface_op=replace(nodes[1], nodes[2]), source_event_seqs=nodes[1:3])
    assert [m.text for m in assert_fresh(s)] == ["q", "gap", "r"]


def test_a_replace_after_nodes_that_derive_nothing():
    s = new_session()
    turn = open_turn(s)
    s.append("user/message", user_message("q"), surface_op="append")
    for _ in range(2):
        s.append("assistant/message", assistant_data(turn, 1, ""), surface_op="append")
    for text in "rs":
        s.append("user/message", user_message(text), surface_op="append")
    s.derive_messages()
    target = s.surface_nodes[3]  # position 3 on the surface, message 1 of the history
    s.append("user/message", user_message("R"), surface_op=replace(target, target), source_event_seqs=[target])
    assert [m.text for m in assert_fresh(s)] == ["q", "R", "s"]


def test_replaces_and_appends_interleaved_between_derivations():
    s = new_session()
    snapshots = []
    for round_ in range(4):
        for text in "xyz":
            s.append("user/message", user_message(f"{text}{round_}"), surface_op="append")
        nodes = s.surface_nodes
        middle = len(nodes) // 2
        s.append(
            "user/message",
            user_message(f"m{round_}"),
            surface_op=replace(nodes[middle - 1], nodes[middle]),
            source_event_seqs=nodes[middle - 1 : middle + 1],
        )
        if round_ % 2:
            history_now = s.derive_messages()
            snapshots.append((history_now, list(history_now)))
            assert list(history_now) == from_scratch(s)
    assert_fresh(s)
    for view, kept in snapshots:
        assert list(view) == kept
