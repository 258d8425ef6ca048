"""Surface rules (dsh v4 §2.2, §3.2; dataplane §1.6): surfaceOp, replace by position, sources, head protection."""

import itertools

import pytest

import dshpy
from dshpy.testing.builders import assistant_data, attempt_data, system_data, tool_result_data, user_message

# -- helpers ---------------------------------------------------------------------------------------------------------


def new_session():
    clock = itertools.count(1_000)
    return dshpy.Session.new(clock=lambda: next(clock))


def replace(start, end):
    return {"op": "replace", "startSeq": start, "endSeq": end}


def user(s, text, **kw):
    kw.setdefault("surface_op", "append")
    return s.append("user/message", user_message(text), **kw)


def open_step(s):
    """Open the next turn and its step 1; returns the turn number."""
    turn = s.next_turn
    s.append("turn/start", {"turn": turn})
    s.append("step/start", {"turn": turn, "step": 1})
    return turn


def tool_step(s, call_ids=("c1",)):
    """Open a turn/step whose assistant message calls ``call_ids``; every call started and answered.

    Returns (turn, {call id: result seq}); the step stays open.
    """
    turn = open_step(s)
    calls = [(cid, "read_file", '{"path":"a.txt"}') for cid in call_ids]
    s.append("assistant/message", assistant_data(turn, 1, "calling", tool_calls=calls), surface_op="append")
    results = {}
    for cid, name, args in calls:
        call = s.append("tool/call", {"turn": turn, "step": 1, "callId": cid, "name": name, "arguments": args})
        result = s.append(
            "tool/result",
            tool_result_data(turn, 1, cid, f"output of {cid}"),
            surface_op="append",
            source_event_seqs=[call.seq],
        )
        results[cid] = result.seq
    return turn, results


def state(s):
    return list(s.events), list(s.derive_messages()), s.surface_nodes, s.pending_count


def refused(s, error_type, match, type, data, **kw):
    """Assert that appending is refused with ``error_type`` and leaves the session untouched."""
    before = state(s)
    with pytest.raises(error_type, match=match) as info:
        s.append(type, data, **kw)
    assert info.value.seq == len(before[0])
    assert state(s) == before
    return info.value


def texts(s):
    return [m.text for m in s.derive_messages()]


def rewritten(result_event, **message_changes):
    """A copy of a tool/result's data with new content (and optional other message changes)."""
    data = dshpy.thaw(result_event.data)
    data["message"]["content"] = [{"type": "text", "text": "[pruned]"}]
    data["message"].update(message_changes)
    return data


# -- surfaceOp required / forbidden ---------------------------------------------------------------------------------


def _surface_candidates():
    """Data for each surface type, valid in turn 1 step 1 once call c1 has started."""
    return {
        "system/message": system_data(1, 1, "sys"),
        "developer/message": {
            "turn": 1,
            "step": 1,
            "message": {"id": "dev-1", "role": "developer", "content": [], "source": {"kind": "runtime-context"}},
        },
        "user/message": user_message("hi"),
        "assistant/message": assistant_data(1, 1, "more"),
        "tool/result": tool_result_data(1, 1, "c1", "late"),
    }


@pytest.mark.parametrize("kind", sorted(dshpy.SURFACE_EVENT_TYPES))
def test_surface_types_require_surface_op(kind):
    s = new_session()
    open_step(s)
    s.append("assistant/message", assistant_data(1, 1, "x", tool_calls=[("c1", "f", "{}")]), surface_op="append")
    s.append("tool/call", {"turn": 1, "step": 1, "callId": "c1", "name": "f", "arguments": "{}"})
    data = _surface_candidates()[kind]
    if kind == "system/message":  # a system prompt may only open the surface
        s = new_session()
        open_step(s)
    refused(s, dshpy.SurfaceError, "requires a surfaceOp marker", kind, data)
    # the same data with a marker is fine, so the refusal was about the marker
    s.append(kind, data, surface_op="append")
    assert s.surface_nodes[-1] == len(s.events) - 1


@pytest.mark.parametrize(
    ("kind", "data"),
    [
        ("turn/start", {"turn": 1}),
        ("todo/write", {"todos": []}),
        ("session/end-seed", {}),
        ("command/run", {"commandId": "cmd-1", "name": "compact"}),
    ],
)
@pytest.mark.parametrize("op", ["append", replace(0, 0)])
def test_non_surface_types_refuse_surface_op(kind, data, op):
    s = new_session()
    user(s, "first")
    refused(s, dshpy.SurfaceError, "not surface-eligible and cannot carry surfaceOp", kind, data, surface_op=op)


def test_non_surface_in_step_types_refuse_surface_op():
    s = new_session()
    open_step(s)
    refused(s, dshpy.SurfaceError, "not surface-eligible", "assistant/attempt", attempt_data(1, 1), surface_op="append")
    refused(s, dshpy.SurfaceError, "not surface-eligible", "step/end", {"turn": 1, "step": 1}, surface_op="append")


@pytest.mark.parametrize(("kind", "data"), [("turn/start", {"turn": 1}), ("todo/write", {"todos": []})])
def test_non_surface_types_refuse_source_event_seqs(kind, data):
    s = new_session()
    user(s, "first")
    refused(s, dshpy.SurfaceError, "cannot carry sourceEventSeqs", kind, data, source_event_seqs=[0])


@pytest.mark.parametrize(
    "op",
    [
        "replace",
        "Append",
        "",
        1,
        ["append"],
        {"op": "append"},
        {"op": "replace", "startSeq": 0},
        {"op": "replace", "endSeq": 0},
        {"op": "replace", "startSeq": 0, "endSeq": 0, "extra": 1},
        {"op": "replace", "start": 0, "end": 0},  # v0 spelling, retired in v4
        {"op": "REPLACE", "startSeq": 0, "endSeq": 0},
        {"startSeq": 0, "endSeq": 0},
        {"op": "replace", "startSeq": -1, "endSeq": 0},
        {"op": "replace", "startSeq": 0, "endSeq": -1},
        {"op": "replace", "startSeq": 0.0, "endSeq": 0},
        {"op": "replace", "startSeq": 0, "endSeq": 1.5},
        {"op": "replace", "startSeq": True, "endSeq": 0},
        {"op": "replace", "startSeq": "0", "endSeq": 0},
        {"op": "replace", "startSeq": None, "endSeq": 0},
        {"op": "replace", "startSeq": 2**53, "endSeq": 0},
    ],
)
def test_invalid_surface_op_shapes_are_refused(op):
    s = new_session()
    user(s, "a")
    user(s, "b")
    refused(s, dshpy.SurfaceError, "invalid", "user/message", user_message("c"), surface_op=op, source_event_seqs=[0])


def test_surface_replace_object_with_bool_seqs_is_refused():
    s = new_session()
    user(s, "a")
    user(s, "b")
    refused(
        s,
        dshpy.SurfaceError,
        "surfaceOp",
        "user/message",
        user_message("c"),
        surface_op=dshpy.SurfaceReplace(True, True),
        source_event_seqs=[1],
    )


def test_surface_replace_object_is_accepted_like_its_wire_form():
    s = new_session()
    user(s, "a")
    user(s, "b")
    event = user(s, "c", surface_op=dshpy.SurfaceReplace(0, 1), source_event_seqs=[0, 1])
    assert event.to_wire()["surfaceOp"] == {"op": "replace", "startSeq": 0, "endSeq": 1}
    assert s.surface_nodes == (2,)


# -- replace ----------------------------------------------------------------------------------------------------------


def test_append_pushes_nodes_in_order():
    s = new_session()
    for text in "abc":
        user(s, text)
    s.append("todo/write", {"todos": []})
    user(s, "d")
    assert s.surface_nodes == (0, 1, 2, 4)
    assert texts(s) == ["a", "b", "c", "d"]


def test_replace_swaps_the_visible_span_for_one_node():
    s = new_session()
    for text in "abcd":
        user(s, text)
    event = user(s, "summary", surface_op=replace(1, 2), source_event_seqs=[1, 2])
    assert event.surface_op == dshpy.SurfaceReplace(1, 2)
    assert s.surface_nodes == (0, 4, 3)
    assert texts(s) == ["a", "summary", "d"]
    # the log keeps everything
    assert [e.data["content"][0]["text"] for e in s.events] == ["a", "b", "c", "d", "summary"]


def test_single_node_replace():
    s = new_session()
    for text in "abc":
        user(s, text)
    user(s, "B", surface_op=replace(1, 1), source_event_seqs=[1])
    assert s.surface_nodes == (0, 3, 2)
    assert texts(s) == ["a", "B", "c"]


def test_replace_is_by_surface_position_not_numeric_range():
    s = new_session()
    for text in "abc":
        user(s, text)
    user(s, "ab", surface_op=replace(0, 1), source_event_seqs=[0, 1])
    assert s.surface_nodes == (3, 2)
    # numerically 2 < 3, but on the surface seq 3 comes first: {startSeq: 2, endSeq: 3} is backwards ...
    refused(
        s,
        dshpy.SurfaceError,
        "is after",
        "user/message",
        user_message("x"),
        surface_op=replace(2, 3),
        source_event_seqs=[2, 3],
    )
    # ... and {startSeq: later, endSeq: earlier} is the valid spelling of the whole surface
    user(s, "abc", surface_op=replace(3, 2), source_event_seqs=[2, 3])
    assert s.surface_nodes == (4,)
    assert texts(s) == ["abc"]


def test_nested_replace_shadows_an_earlier_replacement():
    s = new_session()
    for text in "abc":
        user(s, text)
    user(s, "ab", surface_op=replace(0, 1), source_event_seqs=[0, 1])
    user(s, "ab2", surface_op=replace(3, 3), source_event_seqs=[3])
    assert s.surface_nodes == (4, 2)
    user(s, "all", surface_op=replace(4, 2), source_event_seqs=[4, 2, 0])
    assert s.surface_nodes == (5,)
    assert texts(s) == ["all"]


@pytest.mark.parametrize(
    ("start", "end", "which"),
    [
        (0, 1, "start seq 0"),  # 0 was shadowed by seq 2
        (1, 3, "end seq 3"),  # 3 is a non-surface event
        (3, 1, "start seq 3"),
        (2, 2, None),  # control: the replacement node itself is on the surface
    ],
)
def test_replace_start_and_end_must_be_on_the_current_surface(start, end, which):
    s = new_session()
    user(s, "a")
    user(s, "b")
    user(s, "A", surface_op=replace(0, 0), source_event_seqs=[0])
    s.append("todo/write", {"todos": []})
    assert s.surface_nodes == (2, 1)
    if which is None:
        user(s, "AA", surface_op=replace(start, end), source_event_seqs=[start])
        assert s.surface_nodes == (4, 1)
        return
    refused(
        s,
        dshpy.SurfaceError,
        f"{which} not found in surface",
        "user/message",
        user_message("x"),
        surface_op=replace(start, end),
        source_event_seqs=[0, 1, 2, 3],
    )


@pytest.mark.parametrize(("start", "end"), [(2, 0), (0, 2), (2, 2), (0, 5)])
def test_replace_bounds_must_be_earlier_than_the_event(start, end):
    s = new_session()
    user(s, "a")
    user(s, "b")
    refused(
        s,
        dshpy.SurfaceError,
        "earlier events",
        "user/message",
        user_message("x"),
        surface_op=replace(start, end),
        source_event_seqs=[0, 1],
    )


def test_replace_start_after_end_is_refused():
    s = new_session()
    for text in "abc":
        user(s, text)
    refused(
        s,
        dshpy.SurfaceError,
        r"start seq 2 \(index 2\) is after end seq 0 \(index 0\)",
        "user/message",
        user_message("x"),
        surface_op=replace(2, 0),
        source_event_seqs=[0, 1, 2],
    )


# -- sourceEventSeqs --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sources", "match"),
    [
        ([], "must not be empty"),
        ([0, 0], "duplicates"),
        ([0, 1, 1], "duplicates"),
        ([2], "earlier events"),
        ([5], "earlier events"),
        ([0, -1], "non-negative safe integers"),
        ([0.0], "non-negative safe integers"),
        ([True], "non-negative safe integers"),
        (["0"], "non-negative safe integers"),
        ("01", "non-negative safe integers"),
    ],
)
def test_invalid_source_event_seqs_are_refused(sources, match):
    s = new_session()
    user(s, "a")
    user(s, "b")
    refused(
        s, dshpy.SurfaceError, match, "user/message", user_message("c"), surface_op="append", source_event_seqs=sources
    )


def test_source_event_seqs_on_an_appended_surface_event_are_kept_in_any_order():
    s = new_session()
    user(s, "a")
    user(s, "b")
    event = user(s, "c", source_event_seqs=[1, 0])
    assert event.source_event_seqs == (1, 0)
    assert event.to_wire()["sourceEventSeqs"] == [1, 0]


def test_replace_must_cite_every_shadowed_node():
    s = new_session()
    for text in "abc":
        user(s, text)
    refused(
        s,
        dshpy.SurfaceError,
        "must include every shadowed surface node; missing 1",
        "user/message",
        user_message("x"),
        surface_op=replace(0, 2),
        source_event_seqs=[0, 2],
    )
    refused(s, dshpy.SurfaceError, "missing 0, 1, 2", "user/message", user_message("x"), surface_op=replace(0, 2))


def test_replace_may_cite_more_than_it_shadows():
    s = new_session()
    for text in "abc":
        user(s, text)
    s.append("todo/write", {"todos": []})
    user(s, "x", surface_op=replace(1, 1), source_event_seqs=[3, 1, 0])
    assert s.surface_nodes == (0, 4, 2)


def test_assistant_message_cannot_carry_source_event_seqs():
    s = new_session()
    open_step(s)
    user(s, "hi")
    for sources in ([2], []):
        refused(
            s,
            dshpy.SurfaceError,
            "assistant/message embeds its source stream",
            "assistant/message",
            assistant_data(1, 1, "x"),
            surface_op="append",
            source_event_seqs=sources,
        )
    s.append("assistant/message", assistant_data(1, 1, "x"), surface_op="append")


def test_assistant_message_replacement_cannot_carry_source_event_seqs_either():
    s = new_session()
    open_step(s)
    s.append("assistant/message", assistant_data(1, 1, "x"), surface_op="append")
    refused(
        s,
        dshpy.SurfaceError,
        "assistant/message embeds",
        "assistant/message",
        assistant_data(1, 1, "y"),
        surface_op=replace(2, 2),
        source_event_seqs=[2],
    )


# -- tool/result replacement ------------------------------------------------------------------------------------------


def test_tool_result_replacement_may_change_content():
    s = new_session()
    _, results = tool_step(s)
    seq = results["c1"]
    original = s.events[seq]
    event = s.append("tool/result", rewritten(original), surface_op=replace(seq, seq), source_event_seqs=[seq])
    assert s.surface_nodes == (2, event.seq)
    expected = {**dshpy.thaw(original.data["message"]), "content": [{"type": "text", "text": "[pruned]"}]}
    assert s.derive_messages()[-1].to_dict() == expected
    # the original is still in the log, unchanged
    assert s.events[seq] is original


def test_tool_result_replacement_allowed_in_a_later_turn():
    s = new_session()
    _, results = tool_step(s)
    seq = results["c1"]
    s.append("step/end", {"turn": 1, "step": 1})
    s.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    s.append("turn/start", {"turn": 2})
    s.append("tool/result", rewritten(s.events[seq]), surface_op=replace(seq, seq), source_event_seqs=[seq])
    assert s.derive_messages()[-1].text == "[pruned]"


def test_tool_result_replacement_must_rewrite_exactly_one_node():
    s = new_session()
    _, results = tool_step(s, ("c1", "c2"))
    first, second = results["c1"], results["c2"]
    refused(
        s,
        dshpy.SurfaceError,
        "exactly one current node",
        "tool/result",
        rewritten(s.events[first]),
        surface_op=replace(first, second),
        source_event_seqs=[first, second - 1, second],
    )


def test_tool_result_replacement_must_target_a_tool_result():
    s = new_session()
    _, results = tool_step(s)
    assistant_seq = 2
    refused(
        s,
        dshpy.SurfaceError,
        "must target a current tool/result",
        "tool/result",
        rewritten(s.events[results["c1"]]),
        surface_op=replace(assistant_seq, assistant_seq),
        source_event_seqs=[assistant_seq],
    )


@pytest.mark.parametrize(
    "change",
    [
        {"id": "other-id"},
        {"isError": True},
        {"toolCallId": "c9", "source": {"kind": "tool", "callId": "c9"}},
        {"source": {"kind": "tool", "callId": "c1", "extra": 1}},
        {"extra": "field"},
    ],
)
def test_tool_result_replacement_may_change_only_content(change):
    s = new_session()
    _, results = tool_step(s)
    seq = results["c1"]
    refused(
        s,
        dshpy.SurfaceError,
        "may change only content",
        "tool/result",
        rewritten(s.events[seq], **change),
        surface_op=replace(seq, seq),
        source_event_seqs=[seq],
    )


@pytest.mark.parametrize("change", [{"meta": {"pruned": True}}, {"step": 2}])
def test_tool_result_replacement_keeps_the_envelope_data(change):
    s = new_session()
    _, results = tool_step(s)
    seq = results["c1"]
    data = {**rewritten(s.events[seq]), **change}
    refused(
        s,
        dshpy.SurfaceError,
        "may change only content",
        "tool/result",
        data,
        surface_op=replace(seq, seq),
        source_event_seqs=[seq],
    )


def test_tool_result_replacement_cannot_add_error_metadata():
    s = new_session()
    _, results = tool_step(s)
    seq = results["c1"]
    data = rewritten(s.events[seq], isError=True)
    data["error"] = {"name": "Pruned", "code": "PRUNED"}
    refused(
        s,
        dshpy.SurfaceError,
        "may change only content",
        "tool/result",
        data,
        surface_op=replace(seq, seq),
        source_event_seqs=[seq],
    )


# -- protected system head --------------------------------------------------------------------------------------------


def head_session():
    """turn 1 step 1 open; surface = [system@2, user@3, user@4]."""
    s = new_session()
    open_step(s)
    s.append("system/message", system_data(1, 1, "you are helpful"), surface_op="append")
    user(s, "a")
    user(s, "b")
    assert s.surface_nodes == (2, 3, 4)
    return s


def test_first_system_message_becomes_protected_head():
    s = head_session()
    assert texts(s) == ["you are helpful", "a", "b"]
    # a later system/message append is allowed once the head exists
    s.append("system/message", system_data(1, 1, "more rules"), surface_op="append")
    assert texts(s)[-1] == "more rules"


@pytest.mark.parametrize(("start", "end"), [(2, 2), (2, 3), (2, 4)])
def test_user_message_cannot_shadow_the_protected_head(start, end):
    s = head_session()
    refused(
        s,
        dshpy.SurfaceError,
        "cannot shadow the protected system head",
        "user/message",
        user_message("summary"),
        surface_op=replace(start, end),
        source_event_seqs=[2, 3, 4],
    )


def test_user_message_may_replace_after_the_head():
    s = head_session()
    user(s, "ab", surface_op=replace(3, 4), source_event_seqs=[3, 4])
    assert s.surface_nodes == (2, 5)


@pytest.mark.parametrize("end", [3, 4])
def test_system_message_may_not_shadow_more_than_the_head(end):
    s = head_session()
    refused(
        s,
        dshpy.SurfaceError,
        "cannot shadow the protected system head",
        "system/message",
        system_data(1, 1, "new prompt"),
        surface_op=replace(2, end),
        source_event_seqs=[2, 3, 4],
    )


def test_system_message_over_exactly_the_head_rewrites_it_and_becomes_the_head():
    s = head_session()
    first = s.append("system/message", system_data(1, 1, "v2"), surface_op=replace(2, 2), source_event_seqs=[2])
    assert s.surface_nodes == (first.seq, 3, 4)
    assert texts(s) == ["v2", "a", "b"]
    # the new node is protected in turn ...
    refused(
        s,
        dshpy.SurfaceError,
        "protected system head",
        "user/message",
        user_message("x"),
        surface_op=replace(first.seq, first.seq),
        source_event_seqs=[first.seq],
    )
    # ... and can itself be rewritten by the next system prompt (nested)
    second = s.append(
        "system/message",
        system_data(1, 1, "v3"),
        surface_op=replace(first.seq, first.seq),
        source_event_seqs=[first.seq],
    )
    assert s.surface_nodes == (second.seq, 3, 4)
    assert texts(s) == ["v3", "a", "b"]


def test_system_message_on_a_non_empty_surface_without_head_is_refused():
    s = new_session()
    open_step(s)
    user(s, "a")
    refused(
        s,
        dshpy.SurfaceError,
        "requires a protected first surface head",
        "system/message",
        system_data(1, 1, "late prompt"),
        surface_op="append",
    )
    refused(
        s,
        dshpy.SurfaceError,
        "requires a protected first surface head",
        "system/message",
        system_data(1, 1, "late prompt"),
        surface_op=replace(2, 2),
        source_event_seqs=[2],
    )


def test_empty_system_message_still_holds_the_head():
    s = new_session()
    open_step(s)
    s.append("system/message", system_data(1, 1, ""), surface_op="append")
    user(s, "a")
    assert s.surface_nodes == (2, 3)
    assert texts(s) == ["a"]
    refused(
        s,
        dshpy.SurfaceError,
        "protected system head",
        "user/message",
        user_message("x"),
        surface_op=replace(2, 3),
        source_event_seqs=[2, 3],
    )


# -- derivation -------------------------------------------------------------------------------------------------------


def test_empty_assistant_content_is_on_the_surface_but_derives_no_message():
    s = new_session()
    open_step(s)
    user(s, "hi")
    empty = assistant_data(1, 1, "")
    assert empty["message"]["content"] == []
    event = s.append("assistant/message", empty, surface_op="append")
    assert event.seq in s.surface_nodes
    assert [m.role for m in s.derive_messages()] == ["user"]


def test_assistant_attempt_is_never_on_the_surface_and_derives_nothing():
    s = new_session()
    open_step(s)
    user(s, "hi")
    attempt = s.append("assistant/attempt", attempt_data(1, 1, "partial answ"))
    assert attempt.surface_op is None
    assert not attempt.is_surface
    assert attempt.seq not in s.surface_nodes
    assert [m.role for m in s.derive_messages()] == ["user"]


def test_derive_messages_matches_the_expected_history():
    s = new_session()
    open_step(s)
    system = system_data(1, 1, "be brief")
    s.append("system/message", system, surface_op="append")  # 2
    question = user_message("read a.txt")
    user(s, "ignored")  # 3, replaced below
    s.append("user/message", question, surface_op=replace(3, 3), source_event_seqs=[3])  # 4
    s.append("request/context", {"provider": "deepseek", "model": "deepseek-chat"})  # 5
    s.append("assistant/attempt", attempt_data(1, 1))  # 6
    call_args = '{"path":"a.txt"}'
    asking = assistant_data(1, 1, "let me look", tool_calls=[("c1", "read_file", call_args)])
    s.append("assistant/message", asking, surface_op="append")  # 7
    s.append("tool/call", {"turn": 1, "step": 1, "callId": "c1", "name": "read_file", "arguments": call_args})  # 8
    result = tool_result_data(1, 1, "c1", "hello world")
    s.append("tool/result", result, surface_op="append", source_event_seqs=[8])  # 9
    s.append("step/end", {"turn": 1, "step": 1})
    s.append("step/start", {"turn": 1, "step": 2})
    s.append("assistant/message", assistant_data(1, 2, ""), surface_op="append")  # 12: empty
    answer = assistant_data(1, 2, "it says hello", reasoning="the file is short")
    s.append("assistant/message", answer, surface_op="append")  # 13

    messages = s.derive_messages()
    assert [m.seq for m in messages] == [2, 4, 7, 9, 13]
    assert [m.to_dict() for m in messages] == [
        system["message"],
        question,
        asking["message"],
        result["message"],
        answer["message"],
    ]
    assert [m.role for m in messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert messages[-1].text == "it says hello"
    assert s.surface_nodes == (2, 4, 7, 9, 12, 13)

    # a fresh fold over the same log derives the same history
    replayed = dshpy.Session(s.header, s.events)
    assert list(replayed.derive_messages()) == list(messages)


def test_derived_cache_matches_a_fresh_fold_after_each_append():
    s = new_session()
    for text in "abcd":
        user(s, text)
        assert list(s.derive_messages()) == list(dshpy.Session(s.header, s.events).derive_messages())
    user(s, "bc", surface_op=replace(1, 2), source_event_seqs=[1, 2])
    user(s, "e")
    assert texts(s) == ["a", "bc", "d", "e"]
    assert list(s.derive_messages()) == list(dshpy.Session(s.header, s.events).derive_messages())


def test_derived_messages_are_immutable():
    s = new_session()
    open_step(s)
    user(s, "hi")
    s.append(
        "assistant/message",
        assistant_data(1, 1, "x", tool_calls=[("c1", "f", "{}")]),
        surface_op="append",
    )
    messages = s.derive_messages()
    user_msg, assistant_msg = messages
    with pytest.raises(TypeError):
        user_msg.data["id"] = "changed"
    with pytest.raises(TypeError):
        user_msg.content[0]["text"] = "changed"
    with pytest.raises(TypeError):
        user_msg.content.append({"type": "text", "text": "more"})
    with pytest.raises(TypeError):
        assistant_msg.content[1]["arguments"] = "{}"
    with pytest.raises(TypeError):
        del user_msg.data["source"]
    with pytest.raises(TypeError):
        messages[0] = assistant_msg
    with pytest.raises(AttributeError):
        user_msg.seq = 99
    # nothing moved
    assert s.derive_messages()[0].text == "hi"
    assert s.events[2].data["content"][0]["text"] == "hi"


def test_to_dict_returns_a_mutable_copy():
    s = new_session()
    user(s, "hi")
    copy = s.derive_messages()[0].to_dict()
    copy["content"][0]["text"] = "changed"
    assert s.derive_messages()[0].text == "hi"


def test_derive_messages_returns_a_snapshot():
    s = new_session()
    user(s, "a")
    user(s, "b")
    before = s.derive_messages()
    user(s, "c")
    assert [m.text for m in before] == ["a", "b"]
    assert len(before) == 2
    user(s, "ab", surface_op=replace(0, 1), source_event_seqs=[0, 1])
    assert [m.text for m in before] == ["a", "b"]
    assert texts(s) == ["ab", "c"]
    middle = s.derive_messages()
    user(s, "d")
    assert [m.text for m in middle] == ["ab", "c"]
    assert texts(s) == ["ab", "c", "d"]


def test_refused_replace_leaves_surface_and_history_untouched():
    s = new_session()
    for text in "abc":
        user(s, text)
    s.derive_messages()
    refused(
        s,
        dshpy.SurfaceError,
        "missing",
        "user/message",
        user_message("x"),
        surface_op=replace(0, 2),
        source_event_seqs=[0],
    )
    user(s, "d")
    assert s.surface_nodes == (0, 1, 2, 3)
    assert texts(s) == ["a", "b", "c", "d"]
