"""A writer killed between its events' commit and the next resume point: the next open resumes correctly.

The child process opens a session that has a resume point (written when it was last
closed), appends two whole turns and a third that stops inside a started tool call,
flushes them (they are committed), reports, and is killed with SIGKILL before anything
checkpoints again. The next ``open`` must start from the old point, read the longer
tail, repair the open turn, and give exactly the session a full read and repair gives.
"""

from __future__ import annotations

import os
import select
import signal
import time

import pytest

import dshpy
from dshpy.testing.builders import TurnScript, assistant_data, user_message
from dshpy.testing.resume_contract import assert_same_session, fully_loaded


@pytest.fixture(params=["sqlite", "jsonl", "postgres"])
def url(request, tmp_path):
    if request.param == "postgres":
        return request.getfixturevalue("postgres_url")
    return {"sqlite": f"sqlite:///{tmp_path}/resume.db", "jsonl": f"jsonl:///{tmp_path}/resume"}[request.param]


def _writer(url: str, session_id: str, ack_fd: int) -> None:
    store = dshpy.open_store(url)
    session = store.open(session_id)
    script = TurnScript(session)
    script.turn("first after the point", steps=2)
    script.turn("second after the point", steps=2)
    turn = session.next_turn
    session.append("turn/start", {"turn": turn})
    session.append("step/start", {"turn": turn, "step": 1})
    session.append("user/message", user_message("run it"), surface_op="append")
    calls = [("call-k", "bash", '{"cmd":"ls"}')]
    session.append("assistant/message", assistant_data(turn, 1, "ok", tool_calls=calls), surface_op="append")
    session.append("tool/call", {"turn": turn, "step": 1, "callId": "call-k", "name": "bash", "arguments": calls[0][2]})
    session.flush()
    os.write(ack_fd, f"{len(session)}\n".encode())
    time.sleep(60)  # killed here: no close, no checkpoint


def test_a_kill_after_the_commit_and_before_the_point_resumes_from_the_old_point(url):
    store = dshpy.open_store(url)
    session = store.create(session_id="crashy", cwd="/w")
    TurnScript(session).turn("before the point", steps=2)
    session.close()
    point = len(session)
    store.close()
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.close(read_fd)
        try:
            _writer(url, session.id, write_fd)
        finally:
            os._exit(0)
    os.close(write_fd)
    ready, _, _ = select.select([read_fd], [], [], 60)
    acked = int(os.read(read_fd, 64).decode()) if ready else 0
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    os.close(read_fd)
    assert acked > point
    store = dshpy.open_store(url)
    assert store.stat(session.id).event_count == acked
    expected = fully_loaded(store, session.id)  # the whole log, plus the closers repair appends
    deadline = time.monotonic() + 30
    while True:  # a PostgreSQL writer's lease goes with its server process, which may outlive the kill briefly
        try:
            reopened = store.open(session.id)
            break
        except dshpy.SessionBusyError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    assert reopened.resumed_from == point
    assert reopened.events[-1].type == "turn/end"
    assert reopened.events[-1].data["reason"] == {"kind": "interrupted"}
    assert_same_session(reopened, expected)
    assert [e.to_wire() for e in store.read(session.id)] == [e.to_wire() for e in expected.events]
    reopened.close()
    again = store.open(session.id)
    assert again.resumed_from == len(expected)
    assert_same_session(again, expected)
    again.close()
    store.close()
