"""``stats``: counts and times, checked on a log whose every timestamp is chosen by hand."""

from __future__ import annotations

from typing import Any

from projection_support import Clock, usage_chunk

from dshpy import Session, interrupted_turn_closers
from dshpy.projections import STATS, state_of
from dshpy.testing.builders import assistant_data, tool_result_data, user_message


class Log:
    def __init__(self) -> None:
        self.clock = Clock(1000)
        self.session = Session.new(clock=self.clock)

    def at(self, time: int, kind: str, data: Any, **options: Any) -> int:
        self.clock.now = time
        return self.session.append(kind, data, **options).seq


def stream_from(time: int) -> list[dict[str, Any]]:
    return [
        {"type": "chunk", "time": time, "chunk": {"type": "block-start", "index": 0, "blockType": "text"}},
        usage_chunk(time + 5, {"inputTokens": 1, "outputTokens": 1}),
    ]


def message(step: int, first: int | None, calls: list[str] = ()) -> dict[str, Any]:  # type: ignore[assignment]
    data = assistant_data(1, step, "ok", tool_calls=[(c, "read_file", "{}") for c in calls])
    data["stream"] = [] if first is None else stream_from(first)
    return data


def test_counts_and_times_of_a_turn_with_a_retry_and_tools() -> None:
    log = Log()
    at = log.at
    at(1000, "turn/start", {"turn": 1})
    at(1010, "step/start", {"turn": 1, "step": 1})  # request 1 starts
    at(1011, "user/message", user_message("hi"), surface_op="append")
    header = {"config": {"provider": "deepseek", "model": "deepseek-chat"}}
    at(1012, "request/header", {"header": header, "reason": "initial"})
    attempt = {"turn": 1, "step": 1, "stream": stream_from(1100)}
    at(1300, "assistant/attempt", attempt)  # model 290, ttft 90
    retry = {"retryId": "r", "turn": 1, "step": 1, "provider": "deepseek", "retry": 1, "policyKey": "p"}
    at(1305, "llm/retry", retry)
    at(1400, "llm/retry-started", {"retryId": "r", "turn": 1, "step": 1, "retry": 1})  # request 2 starts
    at(1700, "assistant/message", message(1, 1450, ["c1", "c2"]), surface_op="append")  # model 300, ttft 50
    call = at(1710, "tool/call", {"turn": 1, "step": 1, "callId": "c1", "name": "read_file", "arguments": "{}"})
    first = at(1760, "tool/result", tool_result_data(1, 1, "c1", "ok"), surface_op="append", source_event_seqs=[call])
    call = at(1770, "tool/call", {"turn": 1, "step": 1, "callId": "c2", "name": "read_file", "arguments": "{}"})
    failed = tool_result_data(1, 1, "c2", "boom", is_error=True)
    at(1800, "tool/result", failed, surface_op="append", source_event_seqs=[call])  # tool 50 + 30
    pruned = tool_result_data(1, 1, "c1", "[pruned]")
    pruned["message"]["id"] = log.session.events[first].data["message"]["id"]
    replace = {"op": "replace", "startSeq": first, "endSeq": first}
    at(1805, "tool/result", pruned, surface_op=replace, source_event_seqs=[first])  # a rewrite, not a result
    at(1810, "step/end", {"turn": 1, "step": 1})
    at(1820, "step/start", {"turn": 1, "step": 2})  # request 3 starts
    at(2000, "assistant/message", message(2, None), surface_op="append")  # model 180, no first token
    at(2010, "step/end", {"turn": 1, "step": 2})
    at(2020, "turn/end", {"turn": 1, "reason": {"kind": "completed"}})

    stats = state_of(log.session, STATS)
    assert stats.model_dump() == {
        "turns": 1,
        "steps": 2,
        "model_calls": 2,
        "failed_model_calls": 1,
        "tool_calls": 2,
        "tool_results": 2,
        "tool_errors": 1,
        "model_ms": 290 + 300 + 180,
        "ttft_ms": 90 + 50,
        "ttft_count": 2,
        "tool_ms": 50 + 30,
        "last_outcome": "completed",
        "request_start": None,
        "pending_tools": {},
    }


def test_repair_results_are_errors_without_a_duration() -> None:
    log = Log()
    log.at(1000, "turn/start", {"turn": 1})
    log.at(1010, "step/start", {"turn": 1, "step": 1})
    log.at(1100, "assistant/message", message(1, 1050, ["c1", "c2"]), surface_op="append")
    log.at(1110, "tool/call", {"turn": 1, "step": 1, "callId": "c1", "name": "read_file", "arguments": "{}"})
    assert state_of(log.session, STATS).pending_tools == {"c1": 1110}
    log.session.append_events(interrupted_turn_closers(log.session.events))  # c1 outcome unknown, c2 not started
    stats = state_of(log.session, STATS)
    assert (stats.tool_calls, stats.tool_results, stats.tool_errors) == (1, 2, 2)
    assert stats.pending_tools == {} and stats.request_start is None


def test_clock_skew_counts_zero_not_negative() -> None:
    log = Log()
    log.at(5000, "turn/start", {"turn": 1})
    log.at(5000, "step/start", {"turn": 1, "step": 1})
    log.at(4990, "assistant/message", message(1, 4980), surface_op="append")
    stats = state_of(log.session, STATS)
    assert (stats.model_ms, stats.ttft_ms, stats.ttft_count) == (0, 0, 1)


def test_events_that_change_nothing_keep_the_same_object() -> None:
    log = Log()
    log.at(1000, "turn/start", {"turn": 1})
    before = state_of(log.session, STATS)
    log.at(1001, "user/message", user_message("x"), surface_op="append")
    log.at(1002, "todo/write", {"todos": []})
    assert state_of(log.session, STATS) is before
    log.at(1003, "turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    ended = state_of(log.session, STATS)
    assert ended is not before and ended.last_outcome == "completed"  # the only change: how the turn ended
    log.at(1004, "plugin:dshpy/anything", {}, ignorable=True)
    assert state_of(log.session, STATS) is ended
