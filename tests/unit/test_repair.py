"""Crash repair and fork closers (dsh-v4 §6.1, dataplane §4.1, §12.3): what closes an open turn, exactly."""

import itertools

import pytest

import dshpy
from dshpy.core.events import encode_event
from dshpy.testing.builders import TurnScript, assistant_data, tool_result_data, user_message

NOT_STARTED_TEXT = (
    "The tool call was interrupted before the Harness recorded it as started. Retry it if it is still needed."
)
OUTCOME_UNKNOWN_TEXT = (
    "The tool call was interrupted after it was recorded, but no result was durably recorded. Its outcome is unknown. "
    "Decide whether to retry from the tool semantics: retry only if the operation is read-only or idempotent; if it "
    "may have side effects, first verify external state or ask the user. Do not retry blindly."
)

# -- helpers ---------------------------------------------------------------------------------------------------------


def new_session():
    clock = itertools.count(1_000, 10)  # every event gets a different time
    return dshpy.Session.new(clock=lambda: next(clock))


def in_step(s):
    turn = s.next_turn
    s.append("turn/start", {"turn": turn})
    s.append("step/start", {"turn": turn, "step": 1})
    return turn


def advertise(s, turn, *call_ids, step=1):
    calls = [(cid, "run", '{"cmd":"ls"}') for cid in call_ids]
    return s.append("assistant/message", assistant_data(turn, step, "", tool_calls=calls), surface_op="append")


def start_call(s, turn, call_id, step=1):
    return s.append(
        "tool/call", {"turn": turn, "step": step, "callId": call_id, "name": "run", "arguments": '{"cmd":"ls"}'}
    )


def kinds(events):
    return [e.type for e in events]


def repaired(s):
    """Append the interrupted closers to ``s``; return them."""
    closers = dshpy.interrupted_turn_closers(s.events)
    s.append_events(closers)
    return closers


# -- nothing to close -------------------------------------------------------------------------------------------------


def test_empty_log_needs_no_closers():
    assert dshpy.interrupted_turn_closers([]) == []
    assert dshpy.open_turn_closers([], "interrupted") == []
    assert dshpy.open_turn_closers([], "forked") == []


def test_balanced_log_needs_no_closers():
    s = new_session()
    script = TurnScript(s)
    script.turn()
    script.turn(steps=2)
    s.append("session/title", {"title": "t", "messageSeqs": [], "source": {"kind": "user"}})
    s.append("user/message", user_message("queued for later"), surface_op="append")
    assert dshpy.interrupted_turn_closers(s.events) == []
    assert dshpy.open_turn_closers(s.events, "forked") == []


def test_log_without_turns_needs_no_closers():
    s = new_session()
    s.append("user/message", user_message("hi"), surface_op="append")
    s.append("todo/write", {"todos": []})
    assert dshpy.interrupted_turn_closers(s.events) == []


# -- open turn / open step --------------------------------------------------------------------------------------------


def test_open_turn_only_gets_an_interrupted_turn_end():
    s = new_session()
    start = s.append("turn/start", {"turn": 1})
    closers = dshpy.interrupted_turn_closers(s.events)
    assert [e.to_wire() for e in closers] == [
        {"type": "turn/end", "seq": 1, "time": start.time, "data": {"turn": 1, "reason": {"kind": "interrupted"}}}
    ]


def test_open_step_gets_step_end_then_turn_end():
    s = new_session()
    TurnScript(s).turn()
    turn = in_step(s)
    assert turn == 2
    last = s.events[-1]
    closers = dshpy.interrupted_turn_closers(s.events)
    assert kinds(closers) == ["step/end", "turn/end"]
    assert [e.seq for e in closers] == [last.seq + 1, last.seq + 2]
    assert dict(closers[0].data) == {"turn": 2, "step": 1}
    assert closers[1].data["reason"] == {"kind": "interrupted"}
    assert all(e.surface_op is None and e.source_event_seqs is None for e in closers)


def test_closed_step_in_an_open_turn_gets_only_turn_end():
    s = new_session()
    in_step(s)
    advertise(s, 1, "c1")
    start_call(s, 1, "c1")
    s.append("tool/result", tool_result_data(1, 1, "c1", "done"), surface_op="append", source_event_seqs=[3])
    s.append("step/end", {"turn": 1, "step": 1})
    closers = dshpy.interrupted_turn_closers(s.events)
    assert kinds(closers) == ["turn/end"]
    assert closers[0].seq == 6


# -- tool calls -------------------------------------------------------------------------------------------------------


def test_advertised_but_not_started_call_gets_tool_not_started():
    s = new_session()
    turn = in_step(s)
    advertise(s, turn, "call_7")
    closers = dshpy.interrupted_turn_closers(s.events)
    assert kinds(closers) == ["tool/result", "step/end", "turn/end"]
    assert [e.seq for e in closers] == [3, 4, 5]
    result = closers[0]
    assert result.to_wire() == {
        "type": "tool/result",
        "seq": 3,
        "time": s.events[-1].time,
        "data": {
            "turn": 1,
            "step": 1,
            "message": {
                "id": "interrupted-tool-result-call_7-3",
                "role": "tool",
                "toolCallId": "call_7",
                "isError": True,
                "source": {"kind": "tool", "callId": "call_7"},
                "content": [{"type": "text", "text": NOT_STARTED_TEXT}],
            },
            "error": {"name": "ToolNotStartedError", "code": "TOOL_NOT_STARTED"},
        },
        "surfaceOp": "append",
    }
    assert result.source_event_seqs is None


def test_started_call_gets_tool_outcome_unknown_citing_its_call():
    s = new_session()
    turn = in_step(s)
    advertise(s, turn, "c1")
    call = start_call(s, turn, "c1")
    result, step_end, turn_end = dshpy.interrupted_turn_closers(s.events)
    assert result.type == "tool/result"
    assert result.surface_op == "append"
    assert result.source_event_seqs == (call.seq,)
    message = result.data["message"]
    assert message["id"] == f"interrupted-tool-result-c1-{result.seq}"
    assert message["isError"] is True
    assert message["toolCallId"] == message["source"]["callId"] == "c1"
    assert message["content"] == [{"type": "text", "text": OUTCOME_UNKNOWN_TEXT}]
    assert "Do not retry blindly." in message["content"][0]["text"]
    assert result.data["error"] == {"name": "ToolOutcomeUnknownError", "code": "TOOL_OUTCOME_UNKNOWN"}
    assert (step_end.type, turn_end.type) == ("step/end", "turn/end")


def test_only_unanswered_calls_get_results_in_advertised_order():
    s = new_session()
    turn = in_step(s)
    advertise(s, turn, "a", "b", "c", "d")  # 2
    start_call(s, turn, "b")  # 3
    start_call(s, turn, "d")  # 4
    s.append("tool/result", tool_result_data(turn, 1, "d", "ok"), surface_op="append", source_event_seqs=[4])  # 5
    closers = dshpy.interrupted_turn_closers(s.events)
    results = [e for e in closers if e.type == "tool/result"]
    assert [e.data["message"]["toolCallId"] for e in results] == ["a", "b", "c"]
    assert [e.data["error"]["code"] for e in results] == [
        "TOOL_NOT_STARTED",
        "TOOL_OUTCOME_UNKNOWN",
        "TOOL_NOT_STARTED",
    ]
    assert [e.source_event_seqs for e in results] == [None, (3,), None]
    assert [e.data["message"]["id"] for e in results] == [
        "interrupted-tool-result-a-6",
        "interrupted-tool-result-b-7",
        "interrupted-tool-result-c-8",
    ]
    assert kinds(closers[3:]) == ["step/end", "turn/end"]


def test_only_the_open_turns_calls_are_answered():
    s = new_session()
    TurnScript(s).turn(steps=2)  # turn 1: calls answered
    turn = in_step(s)
    advertise(s, turn, "late")
    closers = dshpy.interrupted_turn_closers(s.events)
    assert [e.data["message"]["toolCallId"] for e in closers if e.type == "tool/result"] == ["late"]
    assert all(e.data["turn"] == 2 for e in closers)


def test_closers_reuse_the_last_events_time_and_continue_seqs():
    s = new_session()
    turn = in_step(s)
    advertise(s, turn, "a", "b")
    start_call(s, turn, "b")
    times = {e.time for e in s.events}
    assert len(times) == len(s.events)  # the clock moved on every append
    last = s.events[-1]
    closers = dshpy.interrupted_turn_closers(s.events)
    assert {e.time for e in closers} == {last.time}
    assert [e.seq for e in closers] == list(range(last.seq + 1, last.seq + 1 + len(closers)))


def test_repairing_the_same_log_twice_gives_identical_bytes():
    s = new_session()
    turn = in_step(s)
    advertise(s, turn, "a")
    start_call(s, turn, "a")
    first = [encode_event(e) for e in dshpy.interrupted_turn_closers(s.events)]
    second = [encode_event(e) for e in dshpy.interrupted_turn_closers(list(s.events))]
    assert first == second


# -- appending the closers --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("started", [(), ("a",), ("a", "b")])
def test_appended_closers_make_a_valid_closed_log(started):
    s = new_session()
    TurnScript(s).turn()
    turn = in_step(s)
    s.append("user/message", user_message("do it"), surface_op="append")
    advertise(s, turn, "a", "b")
    for call_id in started:
        start_call(s, turn, call_id)
    closers = repaired(s)
    assert list(s.events[-len(closers) :]) == closers
    lifecycle = dshpy.validate(s.events)
    assert (lifecycle.open_turn, lifecycle.open_step, lifecycle.unanswered()) == (None, None, [])
    assert s.open_turn is None
    assert s.events[-1].data["reason"] == {"kind": "interrupted"}
    # the model sees an error result for each call, and the session continues with the next turn
    tools = [m for m in s.derive_messages() if m.role == "tool"][-2:]
    assert [m.data["isError"] for m in tools] == [True, True]
    assert dshpy.interrupted_turn_closers(s.events) == []
    s.append("turn/start", {"turn": turn + 1})


def test_open_compaction_gets_a_failed_end_first():
    s = new_session()
    turn = in_step(s)
    s.append("user/message", user_message("a"), surface_op="append")
    s.append("compaction/start", {"compactionId": "k1", "turn": turn, "sourceCommandId": "cmd-1"})
    closers = dshpy.interrupted_turn_closers(s.events)
    assert kinds(closers) == ["compaction/end", "step/end", "turn/end"]
    end = closers[0]
    assert end.seq == 4
    assert end.time == s.events[-1].time
    assert dict(end.data) == {"compactionId": "k1", "sourceCommandId": "cmd-1", "turn": 1, "error": "interrupted"}
    s.append_events(closers)
    assert dshpy.validate(s.events).compaction is None


def test_open_compaction_between_turns_gets_only_its_end():
    s = new_session()
    TurnScript(s).turn()
    s.append("compaction/start", {"compactionId": "k1", "turn": None})
    closers = repaired(s)
    assert [(e.type, dict(e.data)) for e in closers] == [
        ("compaction/end", {"compactionId": "k1", "turn": None, "error": "interrupted"})
    ]
    dshpy.validate(s.events)
    s.append("turn/start", {"turn": 2})


def test_compaction_after_summary_still_ends_failed():
    s = new_session()
    for text in "ab":
        s.append("user/message", user_message(text), surface_op="append")
    s.append("compaction/start", {"compactionId": "k1", "turn": None})
    s.append(
        "compaction/summary",
        {
            "compactionId": "k1",
            "summary": [{"type": "text", "text": "s"}],
            "shadowedRange": {"start": 0, "end": 1},
            "shadowedSeqs": [0, 1],
        },
    )
    closers = repaired(s)
    assert [e.data.get("error") for e in closers] == ["interrupted"]
    dshpy.validate(s.events)


def test_closed_compaction_is_left_alone():
    s = new_session()
    s.append("compaction/start", {"compactionId": "k1", "turn": None})
    s.append("compaction/end", {"compactionId": "k1", "turn": None, "error": "failed"})
    s.append("turn/start", {"turn": 1})
    assert kinds(dshpy.interrupted_turn_closers(s.events)) == ["turn/end"]


# -- forked closers ---------------------------------------------------------------------------------------------------


def test_forked_closers_use_forked_ids_texts_and_reason():
    s = new_session()
    turn = in_step(s)
    advertise(s, turn, "a", "b")
    call = start_call(s, turn, "b")
    closers = dshpy.open_turn_closers(s.events, "forked")
    assert kinds(closers) == ["tool/result", "tool/result", "step/end", "turn/end"]
    a, b = closers[0].data, closers[1].data
    assert a["message"]["id"] == "forked-tool-result-a-4"
    assert a["error"]["code"] == "TOOL_NOT_STARTED"
    assert a["message"]["content"][0]["text"].startswith("The history inherited by this branch has no record")
    assert b["message"]["id"] == "forked-tool-result-b-5"
    assert b["error"]["code"] == "TOOL_OUTCOME_UNKNOWN"
    assert closers[1].source_event_seqs == (call.seq,)
    for data in (a, b):
        assert "Do not retry blindly." in data["message"]["content"][0]["text"]
    assert closers[-1].data["reason"] == {"kind": "forked"}
    s.append_events(closers)
    dshpy.validate(s.events)


def test_interrupted_closers_are_the_interrupted_open_turn_closers_without_compaction():
    s = new_session()
    turn = in_step(s)
    advertise(s, turn, "a")
    assert dshpy.interrupted_turn_closers(s.events) == dshpy.open_turn_closers(s.events, "interrupted")
