"""``usage``: tokens of successful messages and failed attempts, per bucket and per model."""

from __future__ import annotations

from projection_support import AgentWriter, Clock, StepPlan, Turn, new_session, usage_chunk

from dshpy import Session
from dshpy.projections import USAGE, TokenCounts, state_of
from dshpy.testing.builders import TurnScript, assistant_data, attempt_data, text_stream


def write(*turns: Turn) -> Session:
    clock = Clock()
    session = new_session(clock)
    AgentWriter(session, clock).run(turns)
    return session


def test_failed_attempts_are_billed() -> None:
    session = write(
        Turn(
            model="deepseek-chat",
            steps=(
                StepPlan(
                    failed_attempts=2,
                    retry_records=True,
                    usage={"inputTokens": 100, "outputTokens": 20},
                    attempt_usage={"inputTokens": 90, "outputTokens": 4, "cacheReadTokens": 10},
                ),
            ),
        )
    )
    usage = state_of(session, USAGE)
    assert usage.total == TokenCounts(input_tokens=280, output_tokens=28, cache_read_tokens=20)
    assert (usage.messages, usage.failed_attempts) == (1, 2)
    [model] = usage.by_model
    assert (model.provider, model.model, model.messages, model.failed_attempts) == ("deepseek", "deepseek-chat", 1, 2)
    assert model.tokens == usage.total


def test_the_builders_attempt_counts_its_usage_chunk() -> None:
    session = new_session()
    script = TurnScript(session)
    script.turn(close=False)
    session.append("step/start", {"turn": 1, "step": 2})
    session.append("assistant/attempt", attempt_data(1, 2))
    usage = state_of(session, USAGE)
    assert usage.failed_attempts == 1
    assert usage.total.input_tokens == 100 + 100 and usage.total.output_tokens == 20 + 20


def test_an_attempt_without_usage_still_counts_as_a_failed_call() -> None:
    session = write(Turn(steps=(StepPlan(failed_attempts=1, attempt_usage=None),)))
    usage = state_of(session, USAGE)
    assert usage.failed_attempts == 1
    assert usage.total == TokenCounts(input_tokens=100, output_tokens=20)


def test_message_usage_and_its_stream_chunk_count_once() -> None:
    with_field = write(Turn(steps=(StepPlan(usage={"inputTokens": 7, "outputTokens": 3}),)))
    stream_only = write(Turn(steps=(StepPlan(usage={"inputTokens": 7, "outputTokens": 3}, usage_in_message=False),)))
    for session in (with_field, stream_only):
        assert state_of(session, USAGE).total == TokenCounts(input_tokens=7, output_tokens=3)


def test_buckets_are_summed_and_reasoning_is_not_added_to_output() -> None:
    usage = {
        "inputTokens": 10,
        "outputTokens": 50,
        "cacheReadTokens": 1000,
        "cacheWriteTokens": 200,
        "reasoningTokens": 30,
        "totalTokens": 1260,
    }
    session = write(Turn(steps=(StepPlan(usage=usage), StepPlan(usage=usage))))
    total = state_of(session, USAGE).total
    assert total == TokenCounts(
        input_tokens=20, output_tokens=100, cache_read_tokens=2000, cache_write_tokens=400, reasoning_tokens=60
    )
    assert total.billed_input_tokens == 2420


def test_per_model_breakdown_follows_sources_and_routes() -> None:
    clock = Clock()
    session = new_session(clock)
    writer = AgentWriter(session, clock)
    writer.do(Turn(model="deepseek-chat", steps=(StepPlan(failed_attempts=1),)))
    writer.do(Turn(model="deepseek-reasoner", steps=(StepPlan(failed_attempts=1), StepPlan())))
    writer.do(Turn(model="deepseek-chat", steps=(StepPlan(),)))
    by_model = {(m.provider, m.model): m for m in state_of(session, USAGE).by_model}
    assert list(by_model) == [("deepseek", "deepseek-chat"), ("deepseek", "deepseek-reasoner")]
    chat, reasoner = by_model.values()
    assert (chat.messages, chat.failed_attempts, chat.tokens.input_tokens) == (2, 1, 250)
    assert (reasoner.messages, reasoner.failed_attempts, reasoner.tokens.input_tokens) == (2, 1, 250)


def test_an_attempt_before_any_route_is_billed_to_no_model() -> None:
    session = new_session()
    session.append("turn/start", {"turn": 1})
    session.append("step/start", {"turn": 1, "step": 1})
    session.append(
        "assistant/attempt", {"turn": 1, "step": 1, "stream": [usage_chunk(5, {"inputTokens": 9, "outputTokens": 1})]}
    )
    [entry] = state_of(session, USAGE).by_model
    assert (entry.provider, entry.model, entry.tokens.input_tokens, entry.failed_attempts) == (None, None, 9, 1)


def test_malformed_counts_are_skipped() -> None:
    session = new_session()
    session.append("turn/start", {"turn": 1})
    session.append("step/start", {"turn": 1, "step": 1})
    bad = {
        "inputTokens": -5,
        "outputTokens": 2.5,
        "cacheReadTokens": True,
        "cacheWriteTokens": "7",
        "reasoningTokens": 4,
    }
    session.append("assistant/attempt", {"turn": 1, "step": 1, "stream": [usage_chunk(5, bad)]})
    session.append(
        "assistant/attempt",
        {"turn": 1, "step": 1, "stream": [{"type": "chunk", "time": 6, "chunk": {"type": "usage"}}]},
    )
    assert state_of(session, USAGE).total == TokenCounts(reasoning_tokens=4)


def test_the_last_usage_chunk_of_a_stream_is_the_bill() -> None:
    session = new_session()
    session.append("turn/start", {"turn": 1})
    session.append("step/start", {"turn": 1, "step": 1})
    stream = [
        usage_chunk(1, {"inputTokens": 9, "outputTokens": 0}),
        *text_stream("ab")[:2],
        usage_chunk(3, {"inputTokens": 9, "outputTokens": 5}),
    ]
    data = assistant_data(1, 1, "ab")
    data["stream"] = stream
    del data["usage"]
    session.append("assistant/message", data, surface_op="append")
    assert state_of(session, USAGE).total == TokenCounts(input_tokens=9, output_tokens=5)


def test_an_unchanged_route_keeps_the_same_state_object() -> None:
    session = write(Turn(model="deepseek-chat"))
    before = state_of(session, USAGE)
    session.append("turn/start", {"turn": 2})
    session.append("request/context", {"provider": "deepseek", "model": "deepseek-chat"})
    session.append(
        "request/header", {"header": {"config": {"provider": "deepseek", "model": "deepseek-chat"}}, "reason": "resume"}
    )
    assert state_of(session, USAGE) is before
    session.append("request/context", {"provider": "deepseek", "model": "deepseek-reasoner"})
    after = state_of(session, USAGE)
    assert after is not before and after.route is not None and after.route.model == "deepseek-reasoner"
