"""CompactionEngine through the public surface: the transaction, the span rules, nesting, refusals, re-planning."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from compaction_support import SUMMARY, TOOLS, Agent, ScriptedSummarizer, agent_session, model_summary, new_session

import dshpy
from dshpy import encode_event
from dshpy.compaction import (
    CHECKPOINT_PREAMBLE,
    SUMMARY_CLOSE_TAG,
    SUMMARY_OPEN_TAG,
    SUMMARY_SECTIONS,
    BasicPolicy,
    BasicStrategy,
    CompactionEngine,
    SummaryOutput,
    SummaryRequest,
    TokenMeter,
    compact,
    estimate_message,
)
from dshpy.errors import (
    CompactionBusyError,
    CompactionChangedError,
    CompactionError,
    EmptySummaryError,
    NothingToCompactError,
    ReadOnlySessionError,
    SummaryFailedError,
    SummaryRejectedError,
    SummaryTooLargeError,
    UnbalancedSpanError,
)
from dshpy.log import records


def derived_seqs(session: dshpy.Session) -> list[int]:
    return [message.seq for message in session.derive_messages()]


# -- the transaction -----------------------------------------------------------------------------------------------


def test_a_manual_compaction_lands_four_events_in_dshs_shapes() -> None:
    session = agent_session(4)
    before = list(session.surface_nodes)
    summarizer = ScriptedSummarizer(model_summary(max_tokens=4096))
    result = compact(session, summarizer)

    start, summary, checkpoint, end = session.events[result.start_seq :]
    assert [e.type for e in (start, summary, checkpoint, end)] == [
        "compaction/start",
        "compaction/summary",
        "user/message",
        "compaction/end",
    ]
    assert (result.summary_seq, result.checkpoint_seq, result.end_seq) == (start.seq + 1, start.seq + 2, start.seq + 3)
    cid = result.compaction_id
    assert list(start.data.items()) == [("compactionId", cid), ("turn", None)]
    assert end.data == start.data
    assert result.turn is None
    # the span: everything after the system prompt except the newest node
    assert result.shadowed_seqs == tuple(before[1:-1])
    assert list(summary.data) == [
        "compactionId",
        "summary",
        "rawOutput",
        "llmStreamCall",
        "shadowedRange",
        "shadowedSeqs",
        "shadowedTokenCount",
        "provider",
        "model",
        "maxTokens",
        "usage",
    ]
    assert summary.data["summary"] == [{"type": "text", "text": SUMMARY}]  # the reasoning block is not summary
    assert summary.data["rawOutput"][0]["type"] == "reasoning" and summary.data["llmStreamCall"] is True
    assert summary.data["shadowedRange"] == {"start": before[1], "end": before[-2]}
    assert summary.data["shadowedSeqs"] == list(result.shadowed_seqs)
    measured = TokenMeter().measure(agent_session(4))
    assert summary.data["shadowedTokenCount"] == sum(n.tokens for n in measured.nodes[1:-1])
    assert (summary.data["provider"], summary.data["model"], summary.data["maxTokens"]) == (
        "deepseek",
        "deepseek-chat",
        4096,
    )
    assert summary.data["usage"] == {"inputTokens": 900, "outputTokens": 60, "cacheReadTokens": 100}
    # the checkpoint: createUserMessage's key order, the compact-checkpoint source, dsh's citation order
    assert list(checkpoint.data) == ["content", "source", "role", "id"]
    assert checkpoint.data["source"] == {"kind": "compact-checkpoint", "compactionId": cid}
    assert checkpoint.data["content"] == [
        {"type": "text", "text": f"{CHECKPOINT_PREAMBLE}\n\n{SUMMARY_OPEN_TAG}"},
        {"type": "text", "text": SUMMARY},
        {"type": "text", "text": SUMMARY_CLOSE_TAG},
    ]
    assert checkpoint.surface_op == dshpy.SurfaceReplace(before[1], before[-2])
    assert checkpoint.source_event_seqs == (start.seq, summary.seq, *result.shadowed_seqs)
    assert result.checkpoint_token_count == estimate_message(checkpoint.data) < result.shadowed_token_count
    assert result.usage == summary.data["usage"]
    # what the model sees now
    assert list(session.surface_nodes) == [before[0], checkpoint.seq, before[-1]]
    assert derived_seqs(session) == [before[0], checkpoint.seq, before[-1]]
    dshpy.validate(session.events)


def test_the_checkpoint_line_is_written_as_dsh_writes_it() -> None:
    session = agent_session(3)
    result = compact(session, ScriptedSummarizer())
    start = encode_event(session.events[result.start_seq])
    assert start.startswith(b'{"type":"compaction/start","seq":%d,"time":' % result.start_seq)
    assert start.endswith(b',"data":{"compactionId":"%s","turn":null}}' % result.compaction_id.encode())
    line = encode_event(session.events[result.checkpoint_seq])
    seqs = ",".join(map(str, (result.start_seq, result.summary_seq, *result.shadowed_seqs)))
    first, last = result.shadowed_range
    tail = b'},"sourceEventSeqs":[%s],"surfaceOp":{"op":"replace","startSeq":%d,"endSeq":%d}}' % (
        seqs.encode(),
        first,
        last,
    )
    assert line.endswith(tail)  # not increasing, so stored verbatim (no [a,b] ranges)
    assert b'"source":{"kind":"compact-checkpoint","compactionId":"' in line
    assert dshpy.decode_event(__import__("orjson").loads(line)) == session.events[result.checkpoint_seq]


def test_the_summary_request_replays_the_system_prompt_and_the_span_then_the_instruction() -> None:
    session = agent_session(3)
    summarizer = ScriptedSummarizer()
    result = compact(session, summarizer, source_command_id="cmd-1")
    [request] = summarizer.requests
    assert (request.session_id, request.compaction_id) == (session.id, result.compaction_id)
    assert (request.provider, request.model, request.max_tokens, request.purpose) == (
        "deepseek",
        "deepseek-chat",
        65_536,
        "compaction",
    )
    assert request.tools == tuple(TOOLS)
    assert [m.seq for m in request.messages] == [session.surface_nodes[0], *result.shadowed_seqs]
    assert request.messages[0].role == "system"
    titles = [f"## {title}" for title, _ in SUMMARY_SECTIONS]
    assert [t for t in request.instruction.splitlines() if t.startswith("## ")] == titles
    assert len(titles) == 8 and titles[0] == "## Primary Request and Intent" and titles[-1] == "## Critical Context"
    assert SUMMARY_OPEN_TAG in request.instruction and "(none)" in request.instruction
    assert request.instruction_message() == {"role": "user", "content": [{"type": "text", "text": request.instruction}]}
    assert request.shadowed_seqs == result.shadowed_seqs
    # the command id rides on every record of the bracket
    events = session.events[result.start_seq :]
    assert [e.data.get("sourceCommandId") for e in events if e.type.startswith("compaction/")] == ["cmd-1"] * 3
    assert events[2].data["source"] == {
        "kind": "compact-checkpoint",
        "compactionId": result.compaction_id,
        "sourceCommandId": "cmd-1",
    }
    assert list(events[0].data) == ["compactionId", "sourceCommandId", "turn"]


def test_a_plain_text_summary_is_credited_to_the_route_without_raw_output() -> None:
    session = agent_session(3)
    result = compact(session, lambda request: SUMMARY)
    data = session.events[result.summary_seq].data
    assert "rawOutput" not in data and "llmStreamCall" not in data and "maxTokens" not in data
    assert (data["provider"], data["model"]) == ("deepseek", "deepseek-chat")


def test_a_compaction_inside_an_open_turn_belongs_to_that_turn() -> None:
    session = new_session()
    agent = Agent(session)
    for index in range(3):
        agent.tool_turn(f"task {index} " * 10, system="sys" if index == 0 else None)
    turn = agent.open_turn("one more thing " * 5)
    result = compact(session, ScriptedSummarizer())
    assert result.turn == turn
    assert session.events[result.start_seq].data["turn"] == turn == session.events[result.end_seq].data["turn"]
    agent.answer(turn, 1, "ok")
    session.append("step/end", {"turn": turn, "step": 1})
    session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
    dshpy.validate(session.events)


def test_retained_tokens_keep_a_tail_and_the_cut_never_separates_a_call_from_its_result() -> None:
    session = new_session()
    agent = Agent(session)
    for index in range(3):
        agent.tool_turn(f"task {index} " * 10, system="sys" if index == 0 else None)
    turn = agent.open_turn("last task")
    [call] = agent.answer(turn, 1, "checking", calls=1)
    result_seq = agent.call_and_result(turn, 1, call, "x" * 400)
    nodes = list(session.surface_nodes)
    measurement = TokenMeter().measure(session)
    # a tail of just the big result would cut between the assistant's call and its result
    retain = measurement.nodes[-1].tokens
    engine = CompactionEngine()
    plan = engine.plan(session, retain_tokens=retain)
    assert plan.span.end_seq == nodes[-3]  # the cut moved back to just before the calling assistant message
    assert nodes[-2] not in plan.span.seqs and result_seq not in plan.span.seqs
    result = engine.compact(session, ScriptedSummarizer(), retain_tokens=retain)
    assert list(session.surface_nodes)[-2:] == nodes[-2:]
    assert result.shadowed_seqs == plan.span.seqs


def test_compactions_nest_and_the_model_only_sees_the_newest_checkpoint() -> None:
    session = new_session()
    agent = Agent(session)
    for index in range(3):
        agent.tool_turn(f"task {index} " * 10, system="sys" if index == 0 else None)
    first = compact(session, ScriptedSummarizer())
    for index in range(3, 6):
        agent.tool_turn(f"task {index} " * 10)
    summarizer = ScriptedSummarizer()
    second = compact(session, summarizer)
    assert second.shadowed_seqs[0] == first.checkpoint_seq
    earlier = summarizer.requests[0].messages[1]
    assert earlier.seq == first.checkpoint_seq and SUMMARY_OPEN_TAG in earlier.text
    derived = derived_seqs(session)
    assert first.checkpoint_seq not in derived and second.checkpoint_seq in derived
    assert all(seq not in derived for seq in first.shadowed_seqs + second.shadowed_seqs)
    dshpy.validate(session.events)


# -- refusals: nothing written ----------------------------------------------------------------------------------------


def refuses(session: dshpy.Session, error: type[Exception], summarizer: Any = None, **options: Any) -> Exception:
    length = len(session)
    with pytest.raises(error) as caught:
        compact(session, summarizer or ScriptedSummarizer(), **options)
    assert len(session) == length, "a refused compaction must write nothing"
    return caught.value


def test_an_empty_session_has_nothing_to_compact() -> None:
    summarizer = ScriptedSummarizer()
    error = refuses(new_session(), NothingToCompactError, summarizer)
    assert "nothing to compact" in str(error) and error.code == "empty"  # type: ignore[attr-defined]
    assert summarizer.requests == []


def test_a_single_message_or_a_lone_tool_pair_cannot_be_compacted() -> None:
    session = new_session()
    session.append("user/message", records.user_message("hello"), surface_op="append")
    refuses(session, NothingToCompactError)
    pair = new_session()
    agent = Agent(pair)
    pair.append("turn/start", {"turn": 1})
    pair.append("step/start", {"turn": 1, "step": 1})
    pair.append("system/message", records.system_data(1, 1, "sys"), surface_op="append")
    [call] = agent.answer(1, 1, "", calls=1)
    agent.call_and_result(1, 1, call, "out")
    error = refuses(pair, NothingToCompactError)  # system prompt, then one call and its result: nothing to cut
    assert "tool call is never separated" in str(error)


def test_an_open_compaction_bracket_makes_the_session_busy_until_a_new_lifecycle() -> None:
    session = agent_session(3)
    session.append("compaction/start", records.compaction_bracket_data("dsh-live", None))
    error = refuses(session, CompactionBusyError)
    assert error.code == "busy" and "dsh-live" in str(error)  # type: ignore[attr-defined]
    session.append("session/end-seed", {})  # a new process: the bracket is stale
    compact(session, ScriptedSummarizer())
    dshpy.validate(session.events)


def test_a_span_that_would_split_a_tool_pair_is_refused() -> None:
    session = agent_session(3)
    nodes = session.surface_nodes  # system, prompt, assistant(call), result, answer, ...
    refuses(session, UnbalancedSpanError, span=(nodes[1], nodes[2]))
    refuses(session, UnbalancedSpanError, span=(nodes[3], nodes[4]))
    result = compact(session, ScriptedSummarizer(), span=(nodes[1], nodes[4]))
    assert result.shadowed_seqs == tuple(nodes[1:5])


def test_a_span_must_be_current_ordered_and_leave_the_system_prompt() -> None:
    session = agent_session(3)
    nodes = session.surface_nodes
    for span in ((nodes[0], nodes[4]), (nodes[4], nodes[1]), (nodes[1], 10_000)):
        error = refuses(session, CompactionError, span=span)
        assert error.code == "invalid-span"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "answer",
    ["", "   \n", SummaryOutput.of([{"type": "reasoning", "text": "thinking only"}], provider="p", model="m")],
)
def test_an_empty_summary_is_refused(answer: Any) -> None:
    error = refuses(agent_session(3), EmptySummaryError, ScriptedSummarizer(answer))
    assert error.code == "summary"  # type: ignore[attr-defined]


def test_a_summary_not_smaller_than_the_span_is_refused() -> None:
    error = refuses(agent_session(2), SummaryTooLargeError, ScriptedSummarizer("long summary " * 2000))
    assert "not smaller" in str(error)


def test_an_image_summary_is_refused() -> None:
    image = {"type": "image", "attachment": {"attachmentId": "a", "mediaType": "image/png"}}
    answer = SummaryOutput.of([{"type": "text", "text": "ok"}, image], provider="p", model="m")
    refuses(agent_session(3), SummaryRejectedError, ScriptedSummarizer(answer))


def test_a_failing_summarizer_writes_nothing_and_keeps_its_error() -> None:
    def broken(request: SummaryRequest) -> str:
        raise ConnectionError("model unreachable")

    error = refuses(agent_session(3), SummaryFailedError, broken)
    assert isinstance(error.__cause__, ConnectionError) and "model unreachable" in str(error)


def test_a_plain_text_summary_needs_a_route_to_credit() -> None:
    session = new_session()
    for text in ("one " * 50, "two " * 50, "three"):
        session.append("user/message", records.user_message(text), surface_op="append")
    refuses(session, SummaryRejectedError, lambda request: "short")
    result = compact(session, lambda request: SummaryOutput.text("short", provider="local", model="template"))
    assert session.events[result.summary_seq].data["provider"] == "local"


def test_a_read_only_view_is_refused_before_the_model_is_asked() -> None:
    store = dshpy.MemoryStore()
    with store.create(session_id="s") as session:
        agent = Agent(session)
        for index in range(3):
            agent.tool_turn(f"t{index}")
    view = store.inspect("s")
    summarizer = ScriptedSummarizer()
    with pytest.raises(ReadOnlySessionError):
        compact(view, summarizer)
    assert summarizer.requests == []


def test_an_async_summarizer_needs_the_async_method() -> None:
    async def summarizer(request: SummaryRequest) -> str:
        return SUMMARY

    session = agent_session(3)
    with pytest.raises(TypeError, match="acompact"):
        compact(session, summarizer)
    result = asyncio.run(CompactionEngine().acompact(session, summarizer))
    assert session.events[result.checkpoint_seq].type == "user/message"
    assert asyncio.run(CompactionEngine().acompact(agent_session(3), ScriptedSummarizer())).turn is None


def test_an_async_summarizer_failure_is_a_summary_failure() -> None:
    async def summarizer(request: SummaryRequest) -> str:
        raise TimeoutError("slow model")

    session = agent_session(3)
    length = len(session)
    with pytest.raises(SummaryFailedError):
        asyncio.run(CompactionEngine().acompact(session, summarizer))
    assert len(session) == length


# -- the session moves while the model writes ----------------------------------------------------------------------


def test_appends_after_the_span_do_not_disturb_a_compaction() -> None:
    session = agent_session(3)

    def summarizer(request: SummaryRequest) -> str:
        session.append("user/message", records.user_message("meanwhile"), surface_op="append")
        return SUMMARY

    result = compact(session, summarizer)
    assert session.events[result.start_seq - 1].data["content"][0]["text"] == "meanwhile"
    assert session.surface_nodes[-1] == result.start_seq - 1
    dshpy.validate(session.events)


def rewrite_span(session: dshpy.Session, request: SummaryRequest) -> None:
    """Another writer replaces part of the span being summarized."""
    seqs = request.shadowed_seqs
    data = records.user_message("someone else's summary", {"kind": "runtime-context"})
    replace = {"op": "replace", "startSeq": seqs[0], "endSeq": seqs[1]}
    session.append("user/message", data, surface_op=replace, source_event_seqs=list(seqs[:2]))


def test_a_span_rewritten_during_summarization_is_replanned() -> None:
    session = agent_session(4)
    calls: list[SummaryRequest] = []

    def summarizer(request: SummaryRequest) -> str:
        calls.append(request)
        if len(calls) == 1:
            rewrite_span(session, request)
        return SUMMARY

    result = compact(session, summarizer)
    assert len(calls) == 2 and calls[1].shadowed_seqs != calls[0].shadowed_seqs
    assert result.shadowed_seqs == calls[1].shadowed_seqs
    dshpy.validate(session.events)


def test_a_span_that_keeps_changing_is_given_up_with_nothing_written() -> None:
    session = agent_session(4)

    def summarizer(request: SummaryRequest) -> str:
        rewrite_span(session, request)
        return SUMMARY

    with pytest.raises(CompactionChangedError):
        compact(session, summarizer, replans=0)
    assert not any(e.type.startswith("compaction/") for e in session.events)


# -- the policy in use ------------------------------------------------------------------------------------------------


def small_engine(**policy: Any) -> CompactionEngine:
    policy.setdefault("headroom_tokens", 0)
    policy.setdefault("max_tokens", 512)
    return CompactionEngine(BasicStrategy(BasicPolicy(**policy)))


def test_needs_compaction_compares_the_estimate_with_the_threshold() -> None:
    session = agent_session(4)
    used = TokenMeter().measure(session).total_tokens
    engine = small_engine()
    assert engine.needs_compaction(session, window=int(used / 0.8))
    assert not engine.needs_compaction(session, window=int(used / 0.8) + 10)
    assert not small_engine().needs_compaction(new_session())  # no window known: never


def test_compact_if_needed_does_nothing_below_the_threshold() -> None:
    session = agent_session(4)
    summarizer = ScriptedSummarizer()
    assert small_engine().compact_if_needed(session, summarizer, window=1_000_000) is None
    assert summarizer.requests == []


def test_compact_if_needed_keeps_the_retained_tail() -> None:
    session = agent_session(6)
    used = TokenMeter().measure(session).total_tokens
    engine = small_engine(retain_tokens=200)
    result = engine.compact_if_needed(session, ScriptedSummarizer(), window=used + 10)
    assert result is not None
    kept = TokenMeter().measure(session).nodes
    assert kept[1].seq == result.checkpoint_seq
    assert sum(node.tokens for node in kept[2:]) >= 200  # after the system prompt and the checkpoint: the tail
    assert TokenMeter().measure(session).total_tokens < used


def test_pruning_alone_can_relieve_the_pressure() -> None:
    session = new_session()
    agent = Agent(session)
    turn = agent.open_turn("read the log", system="sys")
    [call] = agent.answer(turn, 1, "reading", calls=1)
    agent.call_and_result(turn, 1, call, "log line\n" * 3000)
    used = TokenMeter().measure(session).total_tokens
    summarizer = ScriptedSummarizer()
    assert small_engine().compact_if_needed(session, summarizer, window=used + 100) is None
    assert summarizer.requests == []
    assert [e.type for e in session.events[-2:]] == ["compaction/prune", "tool/result"]


def test_recovering_from_an_overflow_prunes_and_compacts_maximally() -> None:
    session = new_session()
    agent = Agent(session)
    for index in range(3):
        agent.tool_turn(f"task {index}", system="sys" if index == 0 else None, result="out\n" * 3000)
    turn = agent.open_turn("next")
    recovery = CompactionEngine().recover_overflow(session, ScriptedSummarizer())
    assert recovery.changed and len(recovery.pruned.pruned) == 3
    assert recovery.compaction is not None and recovery.compaction.turn == turn
    assert len(session.surface_nodes) == 3  # system prompt, checkpoint, the newest prompt
    idle = new_session()
    idle.append("user/message", records.user_message("hi"), surface_op="append")
    nothing = CompactionEngine().recover_overflow(idle, ScriptedSummarizer())
    assert not nothing.changed
