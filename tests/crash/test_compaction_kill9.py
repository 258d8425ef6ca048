"""Compaction survives SIGKILL: a real process is killed while its summary is being written and while it commits.

dshpy writes a compaction's four events only once the summary is ready, as one
batch, so whatever moment the process dies at, the stored log holds the whole
compaction or none of it: never a ``compaction/start`` without its end. The log
reopens valid, the model's view is the one before the compaction, and the next
compaction works. dsh itself writes ``compaction/start`` before it asks for the
summary, so a log dsh was killed in can hold an open bracket; that one must not
block dshpy's next compaction either.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

import dshpy
from dshpy.compaction import SUMMARY_INSTRUCTION, CompactionEngine, SummaryOutput
from dshpy.log import records
from dshpy.testing.builders import TurnScript
from dshpy.testing.fake_model import FakeModelServer, Reply

WORKER = Path(__file__).with_name("compaction_worker.py")
SUMMARY = "## Primary Request and Intent\n- keep going\n\n## Next Step\n- (none)"

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


@pytest.fixture(params=["sqlite", "jsonl"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/sessions.db"
    return f"jsonl:///{tmp_path}/sessions?compression=zstd"


def summary(_request: object) -> SummaryOutput:
    return SummaryOutput.text(SUMMARY, provider="local", model="template", model_call=False)


def new_session(url: str, turns: int = 3) -> str:
    store = dshpy.open_store(url)
    with store.create() as session:
        script = TurnScript(session)
        for index in range(turns):
            script.turn(
                f"prompt {index}: " + "some words to condense " * 20, steps=2, system="S" if not index else None
            )
        session_id = session.id
    store.close()
    return session_id


def start(mode: str, url: str, session_id: str, base_url: str = "") -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, str(WORKER), mode, url, session_id, base_url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line.strip() == "ready", process.stderr.read() if process.stderr else line
    return process


def kill(process: subprocess.Popen[str]) -> None:
    process.send_signal(signal.SIGKILL)
    reap(process)


def reap(process: subprocess.Popen[str]) -> None:
    """Wait for the (killed) worker and close its pipes; it must have died of SIGKILL."""
    process.communicate(timeout=30)
    assert process.returncode == -signal.SIGKILL


def is_summary(body: dict[str, Any]) -> bool:
    return body["messages"][-1] == {"role": "user", "content": SUMMARY_INSTRUCTION}


def stalling_model() -> tuple[FakeModelServer, threading.Event]:
    """A model that answers turns at once but never finishes a summary (it signals when one is asked for)."""
    asked = threading.Event()

    def respond(body: dict[str, Any]) -> Reply | None:
        if is_summary(body):
            asked.set()
            return Reply.text(SUMMARY).stall(1)
        return Reply.text("an answer " * 30)

    return FakeModelServer(responder=respond), asked


DSH_BRACKET = "dsh-compaction-1"


def check_whole_brackets(events: list[dshpy.SessionEvent]) -> int:
    """Every compaction dshpy stored is the four-event batch; returns how many there are."""
    ours = [e for e in events if e.type.startswith("compaction/") and e.data["compactionId"] != DSH_BRACKET]
    starts = [e.seq for e in ours if e.type == "compaction/start"]
    for seq in starts:
        kinds = [e.type for e in events[seq : seq + 4]]
        assert kinds == ["compaction/start", "compaction/summary", "user/message", "compaction/end"], kinds
    assert sum(e.type == "compaction/end" for e in ours) == len(starts)
    return len(starts)


def reopen_and_compact(url: str, session_id: str) -> list[dshpy.SessionEvent]:
    """Reopen (repairing), check the log, and compact once more: nothing the crash left may block it."""
    store = dshpy.open_store(url)
    with store.open(session_id) as session:
        dshpy.validate(session.events)
        assert session.open_turn is None and session.lifecycle.compaction is None
        before = check_whole_brackets(list(session.events))
        TurnScript(session).turn("one more prompt, with something in it to condense " * 5, steps=2)
        CompactionEngine().compact(session, summary)
        events = list(session.events)
        assert check_whole_brackets(events) == before + 1
        dshpy.validate(events)
    store.close()
    return events


def kill_while_summarizing(mode: str, url: str, session_id: str) -> list[dshpy.SessionEvent]:
    """Run the worker until it has asked the model for a summary, kill it, and read what it stored."""
    server, asked = stalling_model()
    with server:
        process = start(mode, url, session_id, server.base_url)
        assert asked.wait(60), f"the {mode} worker never asked for a summary"
        kill(process)
    store = dshpy.open_store(url)
    try:
        return list(store.read(session_id))
    finally:
        store.close()


def test_kill_while_the_manual_summary_is_written(url: str) -> None:
    session_id = new_session(url)
    stored = dshpy.open_store(url)
    length = len(list(stored.read(session_id)))
    stored.close()
    events = kill_while_summarizing("manual", url, session_id)
    assert len(events) == length  # not one event of the compaction: it waited for the summary
    reopen_and_compact(url, session_id)


def test_kill_while_an_agent_waits_for_a_pressure_summary(url: str) -> None:
    session_id = new_session(url, turns=0)
    stored = kill_while_summarizing("agent", url, session_id)
    assert not [e for e in stored if e.type.startswith("compaction/")]
    store = dshpy.open_store(url)
    with store.open(session_id) as session:  # the turn that was compacting is closed as interrupted
        assert session.events[-1].type == "turn/end"
        assert session.events[-1].data["reason"] == {"kind": "interrupted"}
        dshpy.validate(session.events)
    store.close()
    reopen_and_compact(url, session_id)


def test_kill_after_the_batch_is_built_before_it_is_durable(url: str) -> None:
    session_id = new_session(url)
    reap(start("commit-failpoint", url, session_id))
    store = dshpy.open_store(url)
    assert not [e for e in store.read(session_id) if e.type.startswith("compaction/")]
    store.close()
    reopen_and_compact(url, session_id)


def test_kills_at_random_moments_never_leave_half_a_compaction(url: str) -> None:
    rng = random.Random(13)
    session_id = new_session(url, turns=0)
    landed = 0
    for _ in range(8):
        process = start("commit-loop", url, session_id)
        assert process.stdout is not None
        for _ in range(rng.randint(1, 3)):  # let some compactions land, then kill mid-way through the next ones
            process.stdout.readline()
        threading.Event().wait(rng.uniform(0.0, 0.05))
        kill(process)
        store = dshpy.open_store(url)
        events = list(store.read(session_id))
        landed = check_whole_brackets(events)
        with store.open(session_id) as session:
            dshpy.validate(session.events)
            assert session.lifecycle.compaction is None
        store.close()
    assert landed >= 8
    reopen_and_compact(url, session_id)


@pytest.mark.parametrize("dsh_resumed", [False, True])
def test_a_bracket_dsh_left_open_never_blocks_the_next_compaction(url: str, dsh_resumed: bool) -> None:
    """dsh appends ``compaction/start`` before its summary call: killed then, it leaves the bracket open.
    Resumed by dsh, the bracket is marked stale by ``session/end-seed``; reopened by dshpy, repair closes it."""
    session_id = new_session(url)
    store = dshpy.open_store(url)
    with store.open(session_id) as session:
        session.append("compaction/start", records.compaction_bracket_data(DSH_BRACKET, None))
        if dsh_resumed:
            session.append("session/end-seed", {})
    store.close()
    events = reopen_and_compact(url, session_id)
    stale = next(e for e in events if e.type == "compaction/start")
    closed = [e for e in events if e.type == "compaction/end" and e.data["compactionId"] == DSH_BRACKET]
    if dsh_resumed:
        assert not closed  # dsh's form: the end-seed made it stale, no end is ever written
    else:
        assert [e.data.get("error") for e in closed] == ["interrupted"] and closed[0].seq == stale.seq + 1
