"""Tool-result pruning: dsh's budgets and marker, code points, the logged rewrite, idempotence, the open-turn rule."""

from __future__ import annotations

import pytest
from compaction_support import Agent, new_session

import dshpy
from dshpy.compaction import PRUNE_MARKER, ToolResultPruner, estimate_message, prune_tool_results
from dshpy.errors import CompactionConfigError, PruneOutsideTurnError


def text(value: str) -> dict[str, str]:
    return {"type": "text", "text": value}


def test_the_defaults_are_dshs() -> None:
    pruner = ToolResultPruner()
    assert (pruner.threshold_chars, pruner.head_chars, pruner.tail_chars) == (8192, 4096, 1024)
    assert PRUNE_MARKER == "\n\n[... tool result middle pruned ...]\n\n"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"threshold_chars": 0}, "threshold_chars"),
        ({"head_chars": -1}, "head_chars"),
        ({"tail_chars": -1}, "tail_chars"),
        ({"threshold_chars": 100, "head_chars": 50, "tail_chars": 50}, "at most threshold_chars"),
    ],
)
def test_budgets_that_cannot_shrink_a_result_are_refused(options: dict[str, int], message: str) -> None:
    with pytest.raises(CompactionConfigError, match=message):
        ToolResultPruner(**options)


def test_within_the_threshold_nothing_changes() -> None:
    assert ToolResultPruner().prune_content([text("x" * 8192)]) is None


def test_over_it_the_head_the_marker_and_the_tail_remain() -> None:
    body = "".join(f"{i:05d}" for i in range(2000))  # 10,000 characters
    [pruned] = ToolResultPruner().prune_content([text(body)])  # type: ignore[misc]
    assert pruned["text"] == body[:4096] + PRUNE_MARKER + body[-1024:]


def test_lengths_are_code_points_and_pairs_are_never_split() -> None:
    pruner = ToolResultPruner(threshold_chars=60, head_chars=5, tail_chars=3)
    emoji = "😀" * 100  # 100 code points (200 UTF-16 units)
    [pruned] = pruner.prune_content([text(emoji)])  # type: ignore[misc]
    assert pruned["text"] == "😀" * 5 + PRUNE_MARKER + "😀" * 3
    pair = "\ud83d\ude00" * 100  # a pair held as two code points is still one character
    [kept] = pruner.prune_content([text(pair)])  # type: ignore[misc]
    assert kept["text"] == "\ud83d\ude00" * 5 + PRUNE_MARKER + "\ud83d\ude00" * 3
    lone = "a\udcffb" * 40  # lone surrogates count one each
    [out] = pruner.prune_content([text(lone)])  # type: ignore[misc]
    assert out["text"] == lone[:5] + PRUNE_MARKER + lone[-3:]


def test_text_spread_over_blocks_and_rich_blocks_keep_their_places() -> None:
    pruner = ToolResultPruner(threshold_chars=60, head_chars=10, tail_chars=5)
    image = {"type": "image", "attachment": {"attachmentId": "a", "mediaType": "image/png"}}
    blocks = [text("A" * 8), image, text("B" * 40), text("C" * 30)]
    assert pruner.prune_content(blocks) == [text("A" * 8), image, text("BB" + PRUNE_MARKER), text("C" * 5)]


def test_zero_head_and_tail_still_shrink() -> None:
    pruner = ToolResultPruner(threshold_chars=len(PRUNE_MARKER), head_chars=0, tail_chars=0)
    assert pruner.prune_content([text("z" * 100)]) == [text(PRUNE_MARKER)]


def big_results_session(sizes: tuple[int, ...] = (10_000, 50, 9_000)) -> tuple[dshpy.Session, list[int], int]:
    session = new_session()
    agent = Agent(session)
    turn = agent.open_turn("read them", system="sys")
    ids = agent.answer(turn, 1, "reading", calls=len(sizes))
    seqs = [agent.call_and_result(turn, 1, cid, "L" * size) for cid, size in zip(ids, sizes, strict=True)]
    session.append("step/end", {"turn": turn, "step": 1})
    session.append("step/start", {"turn": turn, "step": 2})  # between closed steps, inside the turn
    return session, seqs, turn


def test_a_pass_logs_a_priced_prune_record_and_a_content_only_rewrite_per_result() -> None:
    session, seqs, _ = big_results_session()
    originals = {seq: session.events[seq] for seq in seqs}
    length = len(session)
    result = prune_tool_results(session)
    assert [p.original_seq for p in result.pruned] == [seqs[0], seqs[2]]
    assert result.chars_removed == (10_000 + 9_000) - 2 * (4096 + len(PRUNE_MARKER) + 1024)
    landed = session.events[length:]
    assert [e.type for e in landed] == ["compaction/prune", "tool/result"] * 2
    for record, rewrite, pruned in zip(landed[::2], landed[1::2], result.pruned, strict=True):
        original = originals[pruned.original_seq]
        seq = original.seq
        assert list(record.data.items()) == [
            ("shadowedRange", {"start": seq, "end": seq}),
            ("shadowedSeqs", [seq]),
            ("shadowedTokenCount", estimate_message(original.data["message"])),
        ]
        assert rewrite.surface_op == dshpy.SurfaceReplace(seq, seq) and rewrite.source_event_seqs == (seq,)
        assert list(rewrite.data) == list(original.data)
        assert list(rewrite.data["message"]) == list(original.data["message"])
        same = {k: v for k, v in rewrite.data["message"].items() if k != "content"}
        assert same == {k: v for k, v in original.data["message"].items() if k != "content"}
        outside = {k: v for k, v in rewrite.data.items() if k != "message"}
        assert outside == {k: v for k, v in original.data.items() if k != "message"}
        assert pruned.call_id == original.data["message"]["source"]["callId"]
        assert pruned.chars_after == 4096 + len(PRUNE_MARKER) + 1024
    assert seqs[1] in session.surface_nodes
    assert all(seq not in session.surface_nodes for seq in (seqs[0], seqs[2]))
    dshpy.validate(session.events)


def test_pruning_twice_changes_nothing_the_second_time() -> None:
    session, _, _ = big_results_session()
    assert prune_tool_results(session)
    length = len(session)
    again = prune_tool_results(session)
    assert not again and again.pruned == () and len(session) == length


def test_pruning_needs_an_open_turn() -> None:
    session, _, turn = big_results_session()
    session.append("step/end", {"turn": turn, "step": 2})
    session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
    length = len(session)
    with pytest.raises(PruneOutsideTurnError, match="open turn"):
        prune_tool_results(session)
    assert len(session) == length
