"""Lifecycle invariants (dsh v4 §3.10, v4-validation §2): each rule accepted and refused, live and on whole logs."""

import itertools

import pytest

import dshpy
from dshpy.core.events import event_from_parts
from dshpy.log.repair import CLOSER_TEXTS
from dshpy.testing.builders import (
    TurnScript,
    assistant_data,
    attempt_data,
    system_data,
    tool_result_data,
    user_message,
)

# -- helpers ---------------------------------------------------------------------------------------------------------

ARGS = '{"path":"a.txt"}'


def new_session():
    clock = itertools.count(1_000)
    return dshpy.Session.new(clock=lambda: next(clock))


def violation(s, rule, type, data, **kw):
    """Assert the append breaks ``rule`` at the next seq and leaves the log as it was."""
    before = list(s.events)
    with pytest.raises(dshpy.InvariantError) as info:
        s.append(type, data, **kw)
    error = info.value
    assert (error.rule, error.seq, error.event_type) == (rule, len(before), type), str(error)
    assert f"seq {len(before)}" in str(error)
    assert list(s.events) == before
    return error


def turn_start(s):
    turn = s.next_turn
    s.append("turn/start", {"turn": turn})
    return turn


def step_start(s, turn, step):
    s.append("step/start", {"turn": turn, "step": step})


def in_step(s):
    """Open the next turn and its step 1; returns the turn number."""
    turn = turn_start(s)
    step_start(s, turn, 1)
    return turn


def close_turn(s, turn, step=None, kind="completed"):
    if step is not None:
        s.append("step/end", {"turn": turn, "step": step})
    s.append("turn/end", {"turn": turn, "reason": {"kind": kind}})


def advertise(s, turn, step, *calls):
    """An assistant message advertising ``calls`` = (id, name) pairs with ARGS."""
    blocks = [(cid, name, ARGS) for cid, name in calls]
    return s.append("assistant/message", assistant_data(turn, step, "calling", tool_calls=blocks), surface_op="append")


def call(s, turn, step, call_id, name="read_file", arguments=ARGS):
    return s.append("tool/call", {"turn": turn, "step": step, "callId": call_id, "name": name, "arguments": arguments})


def result(s, turn, step, call_id, sources=None):
    return s.append(
        "tool/result", tool_result_data(turn, step, call_id, "ok"), surface_op="append", source_event_seqs=sources
    )


def not_started(call_id, seq, *, turn=1, step=1, cause="interrupted", text=None, error=None):
    """The exact TOOL_NOT_STARTED repair data dsh accepts for a never-started call."""
    return {
        "turn": turn,
        "step": step,
        "message": {
            "id": f"{cause}-tool-result-{call_id}-{seq}",
            "role": "tool",
            "toolCallId": call_id,
            "isError": True,
            "source": {"kind": "tool", "callId": call_id},
            "content": [{"type": "text", "text": CLOSER_TEXTS[cause]["not_started"] if text is None else text}],
        },
        "error": {"name": "ToolNotStartedError", "code": "TOOL_NOT_STARTED"} if error is None else error,
    }


def header_data(provider="deepseek"):
    return {"header": {"config": {"provider": provider, "model": "deepseek-chat"}}, "reason": "initial"}


def retry_data(retry, retry_id="r1", *, turn=1, step=1, provider="deepseek", policy=None):
    data = {"retryId": retry_id, "turn": turn, "step": step, "provider": provider, "retry": retry}
    if policy is not None:
        data["policyKey"] = policy
    return data


def ev(type, seq, data, surface_op=None, sources=None):
    return event_from_parts(type, seq, 1_000 + seq, data, surface_op, sources)


# -- turns ------------------------------------------------------------------------------------------------------------


def test_turns_are_numbered_densely_from_one():
    s = new_session()
    violation(s, "turn-numbering", "turn/start", {"turn": 0})
    violation(s, "turn-numbering", "turn/start", {"turn": 2})
    s.append("turn/start", {"turn": 1})
    close_turn(s, 1)
    violation(s, "turn-numbering", "turn/start", {"turn": 1})
    violation(s, "turn-numbering", "turn/start", {"turn": 3})
    s.append("turn/start", {"turn": 2})
    assert s.open_turn == 2


def test_turns_do_not_nest():
    s = new_session()
    s.append("turn/start", {"turn": 1})
    violation(s, "turn-nesting", "turn/start", {"turn": 2})
    violation(s, "turn-nesting", "turn/start", {"turn": 1})


def test_turn_end_must_match_the_open_turn():
    s = new_session()
    violation(s, "turn-nesting", "turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    s.append("turn/start", {"turn": 1})
    violation(s, "turn-nesting", "turn/end", {"turn": 2, "reason": {"kind": "completed"}})
    close_turn(s, 1)
    violation(s, "turn-nesting", "turn/end", {"turn": 1, "reason": {"kind": "completed"}})


@pytest.mark.parametrize("kind", ["completed", "aborted", "blocked", "max-tokens", "interrupted", "forked"])
def test_every_turn_end_reason_closes_a_turn(kind):
    s = new_session()
    s.append("turn/start", {"turn": 1})
    s.append("turn/end", {"turn": 1, "reason": {"kind": kind}})
    assert s.open_turn is None
    assert s.next_turn == 2


def test_turn_end_with_an_open_step_is_refused():
    s = new_session()
    in_step(s)
    violation(s, "step-nesting", "turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    s.append("step/end", {"turn": 1, "step": 1})
    s.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})


# -- steps ------------------------------------------------------------------------------------------------------------


def test_step_start_needs_an_open_turn_of_the_same_number():
    s = new_session()
    violation(s, "outside-turn", "step/start", {"turn": 1, "step": 1})
    s.append("turn/start", {"turn": 1})
    violation(s, "turn-mismatch", "step/start", {"turn": 2, "step": 1})
    step_start(s, 1, 1)


def test_steps_are_numbered_densely_and_restart_each_turn():
    s = new_session()
    s.append("turn/start", {"turn": 1})
    violation(s, "step-numbering", "step/start", {"turn": 1, "step": 2})
    violation(s, "step-numbering", "step/start", {"turn": 1, "step": 0})
    step_start(s, 1, 1)
    s.append("step/end", {"turn": 1, "step": 1})
    violation(s, "step-numbering", "step/start", {"turn": 1, "step": 1})
    violation(s, "step-numbering", "step/start", {"turn": 1, "step": 3})
    step_start(s, 1, 2)
    close_turn(s, 1, 2)
    s.append("turn/start", {"turn": 2})
    violation(s, "step-numbering", "step/start", {"turn": 2, "step": 3})
    step_start(s, 2, 1)


def test_steps_do_not_nest():
    s = new_session()
    in_step(s)
    violation(s, "step-nesting", "step/start", {"turn": 1, "step": 2})


def test_step_end_must_name_the_open_step():
    s = new_session()
    violation(s, "outside-turn", "step/end", {"turn": 1, "step": 1})
    s.append("turn/start", {"turn": 1})
    violation(s, "outside-step", "step/end", {"turn": 1, "step": 1})
    step_start(s, 1, 1)
    violation(s, "step-mismatch", "step/end", {"turn": 1, "step": 2})
    violation(s, "turn-mismatch", "step/end", {"turn": 2, "step": 1})
    s.append("step/end", {"turn": 1, "step": 1})


# -- enclosure --------------------------------------------------------------------------------------------------------

IN_STEP = {
    "system/message": lambda t, st: (system_data(t, st, "sys"), "append"),
    "developer/message": lambda t, st: (
        {
            "turn": t,
            "step": st,
            "message": {"id": "dev-1", "role": "developer", "content": [], "source": {"kind": "runtime-context"}},
        },
        "append",
    ),
    "assistant/message": lambda t, st: (assistant_data(t, st, "hi"), "append"),
    "assistant/attempt": lambda t, st: (attempt_data(t, st), None),
}


@pytest.mark.parametrize("kind", sorted(IN_STEP))
def test_step_events_need_the_open_turn_and_step(kind):
    s = new_session()
    data, op = IN_STEP[kind](1, 1)
    violation(s, "outside-turn", kind, data, surface_op=op)
    s.append("turn/start", {"turn": 1})
    violation(s, "outside-step", kind, data, surface_op=op)
    step_start(s, 1, 1)
    violation(s, "turn-mismatch", kind, IN_STEP[kind](2, 1)[0], surface_op=op)
    violation(s, "step-mismatch", kind, IN_STEP[kind](1, 2)[0], surface_op=op)
    s.append(kind, data, surface_op=op)


def test_tool_call_needs_the_open_step():
    s = new_session()
    in_step(s)
    advertise(s, 1, 1, ("c1", "read_file"))
    violation(
        s, "step-mismatch", "tool/call", {"turn": 1, "step": 2, "callId": "c1", "name": "read_file", "arguments": ARGS}
    )
    violation(
        s, "turn-mismatch", "tool/call", {"turn": 2, "step": 1, "callId": "c1", "name": "read_file", "arguments": ARGS}
    )
    call(s, 1, 1, "c1")


@pytest.mark.parametrize(
    ("kind", "data"),
    [
        ("request/header", header_data()),
        ("request/context", {"provider": "deepseek", "model": "deepseek-chat"}),
    ],
)
def test_request_events_need_an_open_turn_but_no_step(kind, data):
    s = new_session()
    violation(s, "outside-turn", kind, data)
    s.append("turn/start", {"turn": 1})
    s.append(kind, data)
    step_start(s, 1, 1)
    s.append(kind, data)


def test_log_only_and_user_events_may_occur_outside_turns():
    s = new_session()
    s.append("user/message", user_message("queued"), surface_op="append")
    s.append("todo/write", {"todos": [{"content": "x", "status": "pending"}]})
    s.append("plugin:dshpy/note", {"text": "hi"})
    s.append("session/end-seed", {})
    s.append("agent/inbox/spliced", {"target": "next-turn", "start": 0, "inserted": [user_message("q")]})
    assert s.open_turn is None
    assert len(s.events) == 5


def test_replacing_tool_result_needs_an_open_turn():
    s = new_session()
    in_step(s)
    advertise(s, 1, 1, ("c1", "read_file"))
    call(s, 1, 1, "c1")
    original = result(s, 1, 1, "c1", [3])
    close_turn(s, 1, 1)
    data = dshpy.thaw(original.data)
    data["message"]["content"] = [{"type": "text", "text": "[pruned]"}]
    op = {"op": "replace", "startSeq": 4, "endSeq": 4}
    violation(s, "outside-turn", "tool/result", data, surface_op=op, source_event_seqs=[4])
    s.append("turn/start", {"turn": 2})
    s.append("tool/result", data, surface_op=op, source_event_seqs=[4])


# -- tool pairing -----------------------------------------------------------------------------------------------------


def test_tool_call_must_be_advertised_by_the_step():
    s = new_session()
    in_step(s)
    violation(
        s, "unadvertised-tool-call", "tool/call", {"turn": 1, "step": 1, "callId": "c1", "name": "f", "arguments": "{}"}
    )
    advertise(s, 1, 1, ("c1", "read_file"))
    violation(
        s,
        "unadvertised-tool-call",
        "tool/call",
        {"turn": 1, "step": 1, "callId": "c2", "name": "read_file", "arguments": ARGS},
    )


@pytest.mark.parametrize(
    ("name", "arguments"),
    [("write_file", ARGS), ("read_file", '{"path": "a.txt"}'), ("read_file", '{"path":"b.txt"}'), ("Read_file", ARGS)],
)
def test_tool_call_must_match_the_advertised_name_and_arguments(name, arguments):
    s = new_session()
    in_step(s)
    advertise(s, 1, 1, ("c1", "read_file"))
    data = {"turn": 1, "step": 1, "callId": "c1", "name": name, "arguments": arguments}
    violation(s, "tool-call-mismatch", "tool/call", data)
    call(s, 1, 1, "c1")


def test_tool_call_starts_once():
    s = new_session()
    in_step(s)
    advertise(s, 1, 1, ("c1", "read_file"))
    call(s, 1, 1, "c1")
    violation(
        s,
        "tool-call-mismatch",
        "tool/call",
        {"turn": 1, "step": 1, "callId": "c1", "name": "read_file", "arguments": ARGS},
    )


def test_advertised_call_ids_are_unique_while_pending():
    s = new_session()
    in_step(s)
    twice = assistant_data(1, 1, "x", tool_calls=[("c1", "f", "{}"), ("c1", "f", "{}")])
    violation(s, "duplicate-tool-call", "assistant/message", twice, surface_op="append")
    advertise(s, 1, 1, ("c1", "read_file"))
    violation(
        s,
        "duplicate-tool-call",
        "assistant/message",
        assistant_data(1, 1, "", tool_calls=[("c1", "f", "{}")]),
        surface_op="append",
    )
    # once answered, the id may be advertised again
    call(s, 1, 1, "c1")
    result(s, 1, 1, "c1", [3])
    advertise(s, 1, 1, ("c1", "read_file"))


def test_advertised_call_id_must_be_non_empty():
    s = new_session()
    in_step(s)
    violation(
        s,
        "tool-call-id",
        "assistant/message",
        assistant_data(1, 1, "", tool_calls=[("", "f", "{}")]),
        surface_op="append",
    )


def test_tool_result_answers_an_advertised_started_call_once():
    s = new_session()
    in_step(s)
    violation(s, "orphan-tool-result", "tool/result", tool_result_data(1, 1, "c1", "?"), surface_op="append")
    advertise(s, 1, 1, ("c1", "read_file"))
    started = call(s, 1, 1, "c1")
    # a started call may be answered with any content, citing its call or not
    result(s, 1, 1, "c1", [started.seq])
    violation(s, "orphan-tool-result", "tool/result", tool_result_data(1, 1, "c1", "again"), surface_op="append")
    s.append("step/end", {"turn": 1, "step": 1})


def test_tool_result_must_name_the_open_step():
    s = new_session()
    in_step(s)
    advertise(s, 1, 1, ("c1", "read_file"))
    call(s, 1, 1, "c1")
    violation(s, "step-mismatch", "tool/result", tool_result_data(1, 2, "c1", "?"), surface_op="append")


def test_tool_result_for_an_unstarted_call_is_refused():
    s = new_session()
    in_step(s)
    advertise(s, 1, 1, ("c1", "read_file"))
    violation(s, "result-before-call", "tool/result", tool_result_data(1, 1, "c1", "ran anyway"), surface_op="append")
    violation(
        s, "result-before-call", "tool/result", tool_result_data(1, 1, "c1", "boom", is_error=True), surface_op="append"
    )


def test_exact_interrupted_not_started_repair_is_accepted():
    s = new_session()
    in_step(s)
    advertise(s, 1, 1, ("c1", "read_file"), ("c2", "read_file"))
    s.append("tool/result", not_started("c1", 3), surface_op="append")
    # the suffix is any canonical number (dsh does not compare it to the seq)
    s.append("tool/result", not_started("c2", 0), surface_op="append")
    s.append("step/end", {"turn": 1, "step": 1})


def test_exact_forked_not_started_repair_is_accepted():
    s = new_session()
    in_step(s)
    advertise(s, 1, 1, ("c1", "read_file"))
    s.append("tool/result", not_started("c1", 3, cause="forked"), surface_op="append")
    s.append("step/end", {"turn": 1, "step": 1})


def _variant(change):
    data = not_started("c1", 3)
    change(data)
    return data


@pytest.mark.parametrize(
    ("label", "data", "sources"),
    [
        ("wrong text", not_started("c1", 3, text="The tool call was interrupted."), None),
        ("forked text", not_started("c1", 3, text=CLOSER_TEXTS["forked"]["not_started"]), None),
        ("leading zero", _variant(lambda d: d["message"].update(id="interrupted-tool-result-c1-03")), None),
        ("no number", _variant(lambda d: d["message"].update(id="interrupted-tool-result-c1-")), None),
        ("signed", _variant(lambda d: d["message"].update(id="interrupted-tool-result-c1-+3")), None),
        ("other call id", _variant(lambda d: d["message"].update(id="interrupted-tool-result-c2-3")), None),
        ("other prefix", _variant(lambda d: d["message"].update(id="aborted-tool-result-c1-3")), None),
        ("with sources", not_started("c1", 3), [2]),
        ("error name", not_started("c1", 3, error={"name": "Error", "code": "TOOL_NOT_STARTED"}), None),
        (
            "error code",
            not_started("c1", 3, error={"name": "ToolNotStartedError", "code": "TOOL_OUTCOME_UNKNOWN"}),
            None,
        ),
        ("no error", _variant(lambda d: d.pop("error")), None),
        ("two blocks", _variant(lambda d: d["message"]["content"].append({"type": "text", "text": "x"})), None),
        ("not text", _variant(lambda d: d["message"]["content"][0].update(type="reasoning")), None),
    ],
)
def test_inexact_not_started_repairs_are_refused(label, data, sources):
    s = new_session()
    in_step(s)
    advertise(s, 1, 1, ("c1", "read_file"))
    violation(s, "result-before-call", "tool/result", data, surface_op="append", source_event_seqs=sources)


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda d: d["message"].update(id="forked-tool-result-c1-99"), id="suffix-not-own-seq"),
        pytest.param(lambda d: d["message"].update(id="forked-tool-result-c1-x"), id="suffix-not-a-number"),
        pytest.param(lambda d: d["message"].update(content=[]), id="no-text-block"),
    ],
)
def test_inexact_forked_not_started_repairs_are_refused(change):
    s = new_session()
    in_step(s)
    advertise(s, 1, 1, ("c1", "read_file"))
    data = not_started("c1", 3, cause="forked")
    change(data)
    with pytest.raises(dshpy.EventError):
        s.append("tool/result", data, surface_op="append")


@pytest.mark.parametrize("started", [False, True])
def test_step_end_over_an_unanswered_call_is_refused(started):
    s = new_session()
    in_step(s)
    advertise(s, 1, 1, ("c1", "read_file"), ("c2", "read_file"))
    call(s, 1, 1, "c2")
    result(s, 1, 1, "c2")
    if started:
        call(s, 1, 1, "c1")
    error = violation(s, "unanswered-tool-call", "step/end", {"turn": 1, "step": 1})
    assert "c1" in str(error)
    if not started:
        s.append("tool/result", not_started("c1", len(s.events)), surface_op="append")
    else:
        result(s, 1, 1, "c1")
    s.append("step/end", {"turn": 1, "step": 1})


def test_turn_end_over_an_unanswered_call_is_refused():
    s = new_session()
    in_step(s)
    advertise(s, 1, 1, ("c1", "read_file"))
    call(s, 1, 1, "c1")
    before = list(s.events)
    with pytest.raises(dshpy.InvariantError) as info:
        s.append("turn/end", {"turn": 1, "reason": {"kind": "aborted"}})
    assert info.value.seq == 4
    assert info.value.rule in {"step-nesting", "unanswered-tool-call"}
    assert list(s.events) == before


def test_turn_end_over_unanswered_call_in_a_whole_log():
    # a log whose step/end is missing: turn/end is the first event to break a rule
    events = [
        ev("turn/start", 0, {"turn": 1}),
        ev("step/start", 1, {"turn": 1, "step": 1}),
        ev("assistant/message", 2, assistant_data(1, 1, "", tool_calls=[("c1", "f", "{}")]), "append"),
        ev("turn/end", 3, {"turn": 1, "reason": {"kind": "completed"}}),
    ]
    with pytest.raises(dshpy.InvariantError) as info:
        dshpy.validate(events)
    assert info.value.seq == 3
    assert info.value.rule in {"step-nesting", "unanswered-tool-call"}


# -- developer/message headerSeq --------------------------------------------------------------------------------------


def _developer(header_seq, tool="read_file"):
    return {
        "turn": 1,
        "step": 1,
        "headerSeq": header_seq,
        "message": {
            "id": "dev-1",
            "role": "developer",
            "content": [{"type": "tool-addition", "toolName": tool}],
            "source": {"kind": "tool-catalog"},
        },
    }


def test_developer_tool_addition_must_name_a_tool_of_its_header():
    s = new_session()
    in_step(s)
    header = header_data()
    header["header"]["tools"] = [{"name": "read_file", "description": "read", "parameters": {"type": "object"}}]
    s.append("request/header", header)  # seq 2
    violation(s, "developer-header", "developer/message", _developer(1), surface_op="append")
    violation(s, "developer-header", "developer/message", _developer(2, tool="write_file"), surface_op="append")
    s.append("developer/message", _developer(2), surface_op="append")


# -- llm/retry --------------------------------------------------------------------------------------------------------


def retry_session():
    s = new_session()
    in_step(s)
    s.append("request/header", header_data())
    return s


def test_retry_chain_is_accepted():
    s = retry_session()
    s.append("llm/retry", retry_data(1))
    s.append("llm/retry-started", {"retryId": "r1", "turn": 1, "step": 1, "retry": 1})
    s.append("llm/retry", retry_data(2))
    s.append("llm/retry-started", {"retryId": "r1", "turn": 1, "step": 1, "retry": 2})
    # another policy chain in the same step starts at 1 with its own id
    s.append("llm/retry", retry_data(1, "r2", policy="rate-limit"))


def test_retry_belongs_to_the_current_turn_and_step():
    s = new_session()
    violation(s, "retry-chain", "llm/retry", retry_data(1))
    s.append("turn/start", {"turn": 1})
    s.append("request/header", header_data())
    # before any step the current step is 0
    violation(s, "retry-chain", "llm/retry", retry_data(1, step=1))
    s.append("llm/retry", retry_data(1, "r0", step=0))
    step_start(s, 1, 1)
    violation(s, "retry-chain", "llm/retry", retry_data(1, step=2))
    violation(s, "retry-chain", "llm/retry", retry_data(1, turn=2))
    s.append("step/end", {"turn": 1, "step": 1})
    # between steps the current step is the one that just closed
    violation(s, "retry-chain", "llm/retry", retry_data(1, step=2))
    s.append("llm/retry", retry_data(1, step=1))


def test_retry_provider_must_match_the_open_request_header():
    s = retry_session()
    violation(s, "retry-chain", "llm/retry", retry_data(1, provider="openai"))
    s.append("request/header", header_data("openai") | {"reason": "change"})
    violation(s, "retry-chain", "llm/retry", retry_data(1, provider="deepseek"))
    s.append("llm/retry", retry_data(1, provider="openai"))


def test_retry_without_request_header_is_refused():
    s = new_session()
    in_step(s)
    violation(s, "retry-chain", "llm/retry", retry_data(1))


def test_retry_attempts_are_numbered_densely():
    s = retry_session()
    violation(s, "retry-chain", "llm/retry", retry_data(2))
    violation(s, "retry-chain", "llm/retry", retry_data(0))
    s.append("llm/retry", retry_data(1))
    violation(s, "retry-chain", "llm/retry", retry_data(1))
    violation(s, "retry-chain", "llm/retry", retry_data(3))
    s.append("llm/retry", retry_data(2))


def test_retry_keeps_one_retry_id_per_chain():
    s = retry_session()
    s.append("llm/retry", retry_data(1, "r1"))
    violation(s, "retry-chain", "llm/retry", retry_data(2, "r2"))
    # a new chain may not reuse an id of another chain
    violation(s, "retry-chain", "llm/retry", retry_data(1, "r1", policy="other"))
    s.append("llm/retry", retry_data(1, "r2", policy="other"))


def test_retry_started_pairs_one_scheduled_attempt():
    s = retry_session()
    started = {"retryId": "r1", "turn": 1, "step": 1, "retry": 1}
    violation(s, "retry-chain", "llm/retry-started", started)
    s.append("llm/retry", retry_data(1))
    violation(s, "retry-chain", "llm/retry-started", started | {"retry": 2})
    violation(s, "retry-chain", "llm/retry-started", started | {"step": 2})
    violation(s, "retry-chain", "llm/retry-started", started | {"retryId": "r9"})
    s.append("llm/retry-started", started)
    violation(s, "retry-chain", "llm/retry-started", started)


# -- commands ---------------------------------------------------------------------------------------------------------


def test_command_run_and_done():
    s = new_session()
    violation(s, "command-pairing", "command/done", {"commandId": "cmd-1", "kind": "success"})
    s.append("command/run", {"commandId": "cmd-1", "name": "compact"})
    violation(s, "command-pairing", "command/run", {"commandId": "cmd-1", "name": "compact"})
    s.append("user/message", user_message("x"), surface_op="append")  # seq 1
    s.append("command/done", {"commandId": "cmd-1", "kind": "success", "sourceEventSeq": 1})
    s.append("command/done", {"commandId": "cmd-1", "kind": "error"})


@pytest.mark.parametrize(
    "data",
    [
        {"commandId": "cmd-1", "kind": "error", "sourceEventSeq": 1},  # only a success names its source
        {"commandId": "cmd-1", "kind": "success", "sourceEventSeq": 0},  # the command/run itself
        {"commandId": "cmd-1", "kind": "success", "sourceEventSeq": 2},  # itself
        {"commandId": "cmd-1", "kind": "success", "sourceEventSeq": 7},  # later
    ],
)
def test_command_done_source_must_be_an_earlier_non_command_event(data):
    s = new_session()
    s.append("command/run", {"commandId": "cmd-1", "name": "compact"})
    s.append("user/message", user_message("x"), surface_op="append")
    violation(s, "command-pairing", "command/done", data)


# -- compaction -------------------------------------------------------------------------------------------------------


def compaction_session():
    """Closed turn 1 then users: surface = [user@0, user@1, user@2] (no head)."""
    s = new_session()
    for text in "abc":
        s.append("user/message", user_message(text), surface_op="append")
    return s


def summary(start, end, seqs, compaction_id="k1"):
    return {
        "compactionId": compaction_id,
        "summary": [{"type": "text", "text": "earlier: a, b"}],
        "shadowedRange": {"start": start, "end": end},
        "shadowedSeqs": seqs,
    }


def checkpoint(compaction_id="k1", **source):
    message = user_message("summary of a, b")
    message["source"] = {"kind": "compact-checkpoint", "compactionId": compaction_id, **source}
    return message


def test_successful_compaction_transaction():
    s = compaction_session()
    s.append("compaction/start", {"compactionId": "k1", "turn": None})  # 3
    s.append("compaction/summary", summary(0, 1, [0, 1]))  # 4
    s.append(
        "user/message",
        checkpoint(),
        surface_op={"op": "replace", "startSeq": 0, "endSeq": 1},
        source_event_seqs=[3, 4, 0, 1],
    )
    s.append("compaction/end", {"compactionId": "k1", "turn": None})
    assert s.surface_nodes == (5, 2)
    assert [m.text for m in s.derive_messages()] == ["summary of a, b", "c"]
    s.append("turn/start", {"turn": 1})


def test_compaction_inside_a_turn_belongs_to_it():
    s = new_session()
    turn_start(s)
    violation(s, "compaction-bracket", "compaction/start", {"compactionId": "k1", "turn": None})
    violation(s, "compaction-bracket", "compaction/start", {"compactionId": "k1", "turn": 2})
    s.append("compaction/start", {"compactionId": "k1", "turn": 1})
    violation(s, "compaction-bracket", "compaction/end", {"compactionId": "k1", "turn": None, "error": "failed"})
    s.append("compaction/end", {"compactionId": "k1", "turn": 1, "error": "failed"})
    s.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})


def test_compaction_start_outside_a_turn_must_not_name_one():
    s = compaction_session()
    violation(s, "compaction-bracket", "compaction/start", {"compactionId": "k1", "turn": 1})


def test_compactions_do_not_overlap():
    s = compaction_session()
    s.append("compaction/start", {"compactionId": "k1", "turn": None})
    violation(s, "compaction-bracket", "compaction/start", {"compactionId": "k2", "turn": None})
    violation(s, "compaction-bracket", "compaction/start", {"compactionId": "k1", "turn": None})


@pytest.mark.parametrize(
    ("kind", "data"),
    [
        ("compaction/summary", summary(0, 1, [0, 1])),
        ("compaction/end", {"compactionId": "k1", "turn": None, "error": "x"}),
    ],
)
def test_summary_and_end_need_their_start(kind, data):
    s = compaction_session()
    violation(s, "compaction-bracket", kind, data)
    s.append("compaction/start", {"compactionId": "k0", "turn": None})
    violation(s, "compaction-bracket", kind, data)  # other id
    s.append("compaction/end", {"compactionId": "k0", "turn": None, "error": "x"})
    s.append("compaction/start", {"compactionId": "k1", "turn": None, "sourceCommandId": "cmd-1"})
    violation(s, "compaction-bracket", kind, data)  # sourceCommandId differs
    s.append(kind, data | {"sourceCommandId": "cmd-1"})


def test_compaction_summary_is_recorded_once():
    s = compaction_session()
    s.append("compaction/start", {"compactionId": "k1", "turn": None})
    s.append("compaction/summary", summary(0, 1, [0, 1]))
    violation(s, "compaction-bracket", "compaction/summary", summary(0, 1, [0, 1]))


def test_successful_compaction_end_needs_a_summary():
    s = compaction_session()
    s.append("compaction/start", {"compactionId": "k1", "turn": None})
    violation(s, "compaction-bracket", "compaction/end", {"compactionId": "k1", "turn": None})
    s.append("compaction/end", {"compactionId": "k1", "turn": None, "error": "model failed"})


@pytest.mark.parametrize(
    ("start", "end", "seqs"),
    [
        (0, 1, [0]),
        (0, 1, [1, 0]),
        (0, 1, [0, 1, 2]),
        (1, 0, [1, 0]),
        (0, 3, [0, 1, 2, 3]),  # 3 is the compaction/start, not a surface node
        (0, 1, "0-1"),
    ],
)
def test_compaction_summary_must_name_an_exact_surface_span(start, end, seqs):
    s = compaction_session()
    s.append("compaction/start", {"compactionId": "k1", "turn": None})
    violation(s, "compaction-span", "compaction/summary", summary(start, end, seqs))


def test_compaction_prune_checks_its_span_without_a_bracket():
    s = compaction_session()
    s.append("compaction/prune", {"shadowedRange": {"start": 1, "end": 2}, "shadowedSeqs": [1, 2]})
    violation(s, "compaction-span", "compaction/prune", {"shadowedRange": {"start": 1, "end": 2}, "shadowedSeqs": [1]})


def test_compaction_cannot_shadow_the_protected_head():
    s = new_session()
    in_step(s)
    s.append("system/message", system_data(1, 1, "sys"), surface_op="append")  # 2
    s.append("user/message", user_message("a"), surface_op="append")  # 3
    s.append("compaction/start", {"compactionId": "k1", "turn": 1})
    violation(s, "compaction-span", "compaction/summary", summary(2, 3, [2, 3]))
    violation(s, "compaction-span", "compaction/prune", {"shadowedRange": {"start": 2, "end": 2}, "shadowedSeqs": [2]})
    s.append("compaction/summary", summary(3, 3, [3]))


def test_checkpoint_must_match_the_open_compaction():
    s = compaction_session()
    op = {"op": "replace", "startSeq": 0, "endSeq": 1}
    violation(s, "compaction-bracket", "user/message", checkpoint(), surface_op=op, source_event_seqs=[0, 1])
    s.append("compaction/start", {"compactionId": "k1", "turn": None, "sourceCommandId": "cmd-1"})
    s.append("compaction/summary", summary(0, 1, [0, 1]) | {"sourceCommandId": "cmd-1"})
    violation(
        s,
        "compaction-bracket",
        "user/message",
        checkpoint("k2", sourceCommandId="cmd-1"),
        surface_op=op,
        source_event_seqs=[0, 1],
    )
    violation(s, "compaction-bracket", "user/message", checkpoint("k1"), surface_op=op, source_event_seqs=[0, 1])
    s.append("user/message", checkpoint("k1", sourceCommandId="cmd-1"), surface_op=op, source_event_seqs=[3, 4, 0, 1])
    # an appended checkpoint-sourced message is not a replacement and is not checked
    s.append("user/message", checkpoint("k9"), surface_op="append")


def test_turn_boundaries_may_not_cross_an_open_compaction():
    s = compaction_session()
    s.append("compaction/start", {"compactionId": "k1", "turn": None})
    violation(s, "compaction-crossed", "turn/start", {"turn": 1})
    s.append("compaction/end", {"compactionId": "k1", "turn": None, "error": "x"})
    s.append("turn/start", {"turn": 1})
    s.append("compaction/start", {"compactionId": "k2", "turn": 1})
    violation(s, "compaction-crossed", "turn/end", {"turn": 1, "reason": {"kind": "completed"}})


def test_end_seed_releases_a_stale_compaction():
    s = compaction_session()
    s.append("compaction/start", {"compactionId": "k1", "turn": None})
    s.append("session/end-seed", {})
    s.append("turn/start", {"turn": 1})
    s.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    # the stale bracket is gone: its end no longer matches anything
    violation(s, "compaction-bracket", "compaction/end", {"compactionId": "k1", "turn": None, "error": "x"})


def test_whole_log_with_stale_compaction_before_end_seed_validates():
    events = [
        ev("compaction/start", 0, {"compactionId": "k1", "turn": None}),
        ev("session/end-seed", 1, {}),
        ev("turn/start", 2, {"turn": 1}),
        ev("turn/end", 3, {"turn": 1, "reason": {"kind": "completed"}}),
    ]
    assert dshpy.validate(events).open_turn is None
    # without the end-seed the same turn crosses the bracket
    crossing = [events[0], ev("turn/start", 1, {"turn": 1})]
    with pytest.raises(dshpy.InvariantError) as info:
        dshpy.validate(crossing)
    assert (info.value.seq, info.value.rule) == (1, "compaction-crossed")


# -- session/title ----------------------------------------------------------------------------------------------------


def title_session():
    s = new_session()
    s.append("user/message", user_message("plan a trip"), surface_op="append")  # 0 human
    s.append("user/message", user_message("ctx", kind="runtime-context"), surface_op="append")  # 1 not human
    in_step(s)  # 2, 3
    s.append("assistant/message", assistant_data(1, 1, "sure"), surface_op="append")  # 4
    return s


def title(seqs, kind="dsh-session-title"):
    return {"title": "Trip", "messageSeqs": seqs, "source": {"kind": kind}}


def test_user_title_cites_nothing_and_generated_title_cites_human_messages():
    s = title_session()
    s.append("session/title", title([], kind="user"))
    s.append("session/title", title([0]))


@pytest.mark.parametrize(
    ("seqs", "kind"),
    [
        ([0], "user"),  # a user-set title cites nothing
        ([], "dsh-session-title"),  # a generated title cites its inputs
        ([1], "dsh-session-title"),  # not a human message
        ([4], "dsh-session-title"),  # not a user/message
        ([2], "dsh-session-title"),  # not a message at all
        ([0, 0], "dsh-session-title"),  # duplicates
        ([5], "dsh-session-title"),  # itself
        ([9], "dsh-session-title"),  # later
    ],
)
def test_title_citations_are_refused(seqs, kind):
    s = title_session()
    violation(s, "title-citation", "session/title", title(seqs, kind))


def test_title_llm_request_must_represent_its_citations():
    s = title_session()
    with pytest.raises(dshpy.InvariantError):
        s.append("session/title-llm-request", {"messageSeqs": [], "messages": []})


def test_ptc_dispatch_needs_an_open_turn():
    s = new_session()
    data = {"subCallId": "s1", "rootCallId": "c1", "parentCallId": "c1", "name": "f", "arguments": "{}"}
    with pytest.raises(dshpy.InvariantError):
        s.append("tool/ptc-dispatch-start", data)


# -- validate() on whole logs -----------------------------------------------------------------------------------------


def test_validate_accepts_a_realistic_log():
    s = new_session()
    script = TurnScript(s)
    script.turn(system="be brief")
    script.turn(steps=3, tools_per_step=2)
    lifecycle = dshpy.validate(s.events)
    assert isinstance(lifecycle, dshpy.Lifecycle)
    assert (lifecycle.open_turn, lifecycle.open_step, lifecycle.last_turn) == (None, None, 2)
    assert lifecycle.unanswered() == []


def test_validate_allows_an_open_tail():
    s = new_session()
    in_step(s)
    advertise(s, 1, 1, ("c1", "read_file"))
    call(s, 1, 1, "c1")
    lifecycle = dshpy.validate(s.events)
    assert (lifecycle.open_turn, lifecycle.open_step) == (1, 1)
    assert lifecycle.unanswered() == ["c1"]
    assert dshpy.validate([]).open_turn is None


def test_validate_names_the_first_bad_event():
    s = new_session()
    TurnScript(s).turn()
    good = list(s.events)
    n = len(good)
    bad = [
        *good,
        ev("step/start", n, {"turn": 1, "step": 1}),
        ev("turn/start", n + 1, {"turn": 5}),
    ]
    with pytest.raises(dshpy.InvariantError) as info:
        dshpy.validate(bad)
    assert (info.value.seq, info.value.rule, info.value.event_type) == (n, "outside-turn", "step/start")


def test_validate_refuses_a_seq_gap():
    events = [ev("turn/start", 0, {"turn": 1}), ev("turn/end", 2, {"turn": 1, "reason": {"kind": "completed"}})]
    with pytest.raises(dshpy.InvariantError) as info:
        dshpy.validate(events)
    assert (info.value.seq, info.value.rule) == (2, "seq-contiguous")


def test_validate_refuses_surface_breaks():
    events = [
        ev("user/message", 0, user_message("a"), "append"),
        ev("user/message", 1, user_message("b"), {"op": "replace", "startSeq": 0, "endSeq": 0}),
    ]
    with pytest.raises(dshpy.SurfaceError) as info:
        dshpy.validate(events)
    assert info.value.seq == 1


def test_validate_replays_the_same_rules_as_live_appends():
    # every prefix of a live-built log validates, and its lifecycle matches the live one
    s = new_session()
    TurnScript(s).turn(steps=2)
    for end in range(len(s.events) + 1):
        dshpy.validate(s.events[:end])
    assert dshpy.validate(s.events).next_turn == s.next_turn == 2


def test_validate_reports_malformed_data_as_a_dsh_error():
    with pytest.raises(dshpy.DshError):
        dshpy.validate([ev("turn/start", 0, {"turn": 1}), ev("step/start", 1, {"turn": 1})])
