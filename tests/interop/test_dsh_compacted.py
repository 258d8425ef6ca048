"""A session the real dsh runtime compacted itself, against what it showed the model (issue #13's interop proof).

``tests/fixtures/dsh/make_compacted.py`` made the 0.2.1rc2 runtime compact a
session offline (its overflow recovery, see the script) and kept two request
bodies: the summary request and the retried request after the compaction. Both are
Anthropic Messages API bodies, so the comparison maps dshpy's derived messages the
way dsh's adapter does for text: the system prompt apart, consecutive messages of
one role merged into one message, each text block a ``{"type": "text"}`` block.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson

from dshpy import Message, Session, SessionEvent, SessionHeader, decode_event, validate
from dshpy.compaction import SUMMARY_INSTRUCTION, SUMMARY_SECTIONS, CompactionEngine, SummaryOutput, frame_summary
from dshpy.compaction.meter import TokenMeter
from dshpy.compaction.strategy import Span
from dshpy.testing.builders import TurnScript

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "dsh"
LOG = FIXTURES / "sessions" / "compacted" / "--tmp-dshpy-dsh-fixtures-workspace--" / "compacted-by-dsh"
REQUESTS = FIXTURES / "requests"


def load() -> tuple[SessionHeader, list[SessionEvent]]:
    lines = (LOG / "session.v4.jsonl").read_bytes().splitlines()
    return SessionHeader.from_record(orjson.loads(lines[0])), [decode_event(orjson.loads(line)) for line in lines[1:]]


def request(name: str) -> dict[str, Any]:
    body: dict[str, Any] = json.loads((REQUESTS / f"compacted-by-dsh.{name}.json").read_text())
    return body


def as_anthropic(messages: list[Message] | list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """(system, messages) as dsh's Anthropic adapter sends derived text messages."""
    system = ""
    out: list[dict[str, Any]] = []
    for message in messages:
        data = message.data if isinstance(message, Message) else message
        blocks = [{"type": "text", "text": b["text"]} for b in data["content"] if b.get("type") == "text"]
        if data["role"] == "system":
            system = "".join(b["text"] for b in blocks)
            continue
        role = "assistant" if data["role"] == "assistant" else "user"
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    return system, out


def compaction_of(events: list[SessionEvent]) -> tuple[SessionEvent, SessionEvent, SessionEvent]:
    start = next(e for e in events if e.type == "compaction/start")
    summary = next(e for e in events if e.type == "compaction/summary")
    checkpoint = next(
        e for e in events if e.type == "user/message" and e.data["source"]["kind"] == "compact-checkpoint"
    )
    return start, summary, checkpoint


def test_dshpy_accepts_every_event_dsh_wrote_while_compacting() -> None:
    header, events = load()
    validate(events)
    session = Session(header, events)
    assert session.lifecycle.compaction is None
    start, summary, checkpoint = compaction_of(events)
    assert checkpoint.source_event_seqs == (start.seq, summary.seq, *summary.data["shadowedSeqs"])


def test_dshpy_derives_exactly_what_dsh_sent_after_its_compaction() -> None:
    header, events = load()
    answer = [e for e in events if e.type == "assistant/message"][-1]  # the answer to the retried request
    sent = request("retried")
    system, messages = as_anthropic(Session(header, events[: answer.seq]).derive_messages())
    assert (system, messages) == (sent["system"], sent["messages"])


def test_dshpy_prices_and_frames_the_span_as_dsh_did() -> None:
    header, events = load()
    start, summary, checkpoint = compaction_of(events)
    before = Session(header, events[: start.seq])  # the log as dsh planned the compaction
    measurement = TokenMeter().measure(before)
    seqs = tuple(summary.data["shadowedSeqs"])
    first = measurement.seqs.index(seqs[0])
    assert measurement.seqs[first : first + len(seqs)] == seqs
    assert sum(measurement.prices[first : first + len(seqs)]) == summary.data["shadowedTokenCount"]
    # the same frame: preamble + tag, the summary blocks, the closing tag (the preamble's wording is dshpy's own)
    ours, theirs = frame_summary(summary.data["summary"]), [dict(b) for b in checkpoint.data["content"]]
    assert ours[1:] == theirs[1:]
    assert ours[0]["text"].endswith("\n\n<compacted-summary>") and theirs[0]["text"].endswith("\n\n<compacted-summary>")


def test_dshpy_would_ask_for_the_summary_dsh_asked_for() -> None:
    header, events = load()
    start, summary, _ = compaction_of(events)
    before = Session(header, events[: start.seq])
    seqs = tuple(summary.data["shadowedSeqs"])
    measurement = TokenMeter().measure(before)
    span = Span(seqs, measurement.seqs.index(seqs[0]), summary.data["shadowedTokenCount"])
    asked = CompactionEngine().strategy.summary_request(before, span, compaction_id="x")
    sent = request("summary")
    system, messages = as_anthropic(list(asked.messages))
    assert system == sent["system"]
    assert messages == sent["messages"][:-1]  # the span, as dsh replayed it
    # then one instruction: the wording is dshpy's own, the sections (and their order) and the tag are dsh's
    (instruction,) = sent["messages"][-1]["content"]
    positions = [instruction["text"].find(f"## {title}") for title, _ in SUMMARY_SECTIONS]
    assert -1 not in positions and positions == sorted(positions)
    assert all(f"## {title}" in SUMMARY_INSTRUCTION for title, _ in SUMMARY_SECTIONS)
    assert "<compacted-summary>" in instruction["text"] and "<compacted-summary>" in SUMMARY_INSTRUCTION
    assert asked.max_tokens == sent["max_tokens"] == summary.data["maxTokens"]  # dsh's 65,536 headroom default


def test_dshpy_continues_and_compacts_over_dsh_s_checkpoint() -> None:
    header, events = load()
    session = Session(header, events)
    session.append("session/end-seed", {})
    TurnScript(session).turn("another question, with enough words in it to be worth condensing " * 4, steps=2)
    result = CompactionEngine().compact(
        session, lambda _r: SummaryOutput.text("## Next Step\n- (none)", provider="local", model="template")
    )
    _, _, checkpoint = compaction_of(list(session.events))
    assert checkpoint.seq in result.shadowed_seqs  # dsh's checkpoint folded into dshpy's (nested compaction)
    validate(session.events)
