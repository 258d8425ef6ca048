"""Compacted and pruned sessions in real stores: one batch, durable, reopened to the same history, dsh's bytes."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from compaction_support import Agent, ScriptedSummarizer, model_summary

import dshpy
from dshpy import ConflictError, SessionEvent, encode_event
from dshpy.compaction import compact, prune_tool_results
from dshpy.log.header import SessionHeader
from dshpy.log.session import SessionWriter


@pytest.fixture(params=["sqlite", "jsonl", "jsonl-zstd", "memory"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return {
        "sqlite": f"sqlite:///{tmp_path}/sessions.db",
        "jsonl": f"jsonl:///{tmp_path}/root?compression=none",
        "jsonl-zstd": f"jsonl:///{tmp_path}/root",
        "memory": "memory:",
    }[request.param]


class CountingWriter:
    """Wraps a store's writer and records every batch it is handed."""

    def __init__(self, inner: SessionWriter) -> None:
        self.inner = inner
        self.batches: list[list[str]] = []

    def write(self, session_id: str, expected_seq: int, events: Sequence[SessionEvent]) -> None:
        self.batches.append([e.type for e in events])
        self.inner.write(session_id, expected_seq, events)

    def close(self) -> None:
        self.inner.close()


def test_compact_and_prune_then_reopen_derives_the_same_history(store_url: str) -> None:
    store = dshpy.open_store(store_url)
    session = store.create(session_id="long", cwd="/work")
    agent = Agent(session)
    for index in range(4):
        agent.tool_turn(f"task {index}", system="sys" if index == 0 else None, result="line\n" * 2500)
    session.flush()
    turn = agent.open_turn("continue")
    writer = CountingWriter(session._writer)  # type: ignore[arg-type]  # the test watches the batches handed over
    session._writer = writer
    assert prune_tool_results(session)
    result = compact(session, ScriptedSummarizer(model_summary()))
    assert writer.batches[-1] == ["compaction/start", "compaction/summary", "user/message", "compaction/end"]
    assert session.pending_count == 0
    agent.answer(turn, 1, "done")
    session.append("step/end", {"turn": turn, "step": 1})
    session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
    events = list(session.events)
    derived = [m.to_dict() for m in session.derive_messages()]
    session.close()
    if store_url != "memory:":
        store.close()
        store = dshpy.open_store(store_url)
    reopened = store.open("long")
    assert list(reopened.events) == events
    assert [m.to_dict() for m in reopened.derive_messages()] == derived
    assert result.checkpoint_seq in reopened.surface_nodes
    dshpy.validate(reopened.events)
    reopened.close()
    store.close()


def test_a_jsonl_compaction_is_stored_as_dsh_writes_its_lines(tmp_path: Path) -> None:
    store = dshpy.open_store(f"jsonl:///{tmp_path}?compression=none")
    with store.create(session_id="dshlike", cwd="/work") as session:
        agent = Agent(session)
        for index in range(3):
            agent.tool_turn(f"task {index}", system="sys" if index == 0 else None)
        result = compact(session, ScriptedSummarizer())
        events = list(session.events)
    [path] = tmp_path.rglob("session.v4.jsonl")
    lines = path.read_bytes().splitlines()
    assert lines[1 + result.checkpoint_seq] == encode_event(events[result.checkpoint_seq])
    checkpoint = lines[1 + result.checkpoint_seq]
    cited = ",".join(map(str, (result.start_seq, result.summary_seq, *result.shadowed_seqs))).encode()
    assert b'"sourceEventSeqs":[' + cited + b'],"surfaceOp":{"op":"replace"' in checkpoint
    for seq in (result.start_seq, result.summary_seq, result.end_seq):
        assert lines[1 + seq] == encode_event(events[seq])
    store.close()


class SharedLog:
    """A stored log two writers share, with the stores' conditional append."""

    def __init__(self) -> None:
        self.events: list[SessionEvent] = []

    def writer(self) -> SharedWriter:
        return SharedWriter(self)


class SharedWriter:
    def __init__(self, log: SharedLog) -> None:
        self.log = log

    def write(self, session_id: str, expected_seq: int, events: Sequence[SessionEvent]) -> None:
        if expected_seq != len(self.log.events):
            raise ConflictError(
                f"stored next seq is {len(self.log.events)}", expected_seq=expected_seq, actual_seq=len(self.log.events)
            )
        self.log.events.extend(events)

    def close(self) -> None:
        pass


def test_a_writer_that_got_there_first_leaves_no_part_of_the_compaction_stored() -> None:
    shared = SharedLog()
    session = dshpy.Session(SessionHeader.new("shared"), writer=shared.writer())
    agent = Agent(session)
    for index in range(3):
        agent.tool_turn(f"task {index}", system="sys" if index == 0 else None)
    session.flush()
    stored = len(shared.events)
    other = dshpy.Session(SessionHeader.new("shared"), list(shared.events), writer=shared.writer())

    def summarizer(request: object) -> str:
        other.append("session/title", {"title": "x", "messageSeqs": [], "source": {"kind": "user"}})
        other.flush()
        return "## Primary Request and Intent\n- y"

    with pytest.raises(ConflictError):
        compact(session, summarizer)
    assert len(shared.events) == stored + 1
    assert not any(e.type.startswith("compaction/") for e in shared.events)
    dshpy.validate(shared.events)
