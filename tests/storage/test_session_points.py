"""The seed's session lifecycle points on the store: session/created, session/flush (seq range), session/disposed."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap

import pytest

import dshpy
from dshpy.testing.builders import TurnScript


def record(store) -> list[tuple]:
    seen: list[tuple] = []
    store.on("session/created", lambda p: seen.append(("created", p.session.id, p.how)))
    store.on("session/flush", lambda p: seen.append(("flush", p.session.id, p.first_seq, p.last_seq)))
    store.on("session/disposed", lambda p: seen.append(("disposed", p.session_id)))
    return seen


@pytest.mark.parametrize("url", ["sqlite:///{tmp}/s.db", "jsonl:///{tmp}/root", "memory:"])
def test_create_flush_fork_and_close_are_reported_in_order_with_seq_ranges(tmp_path, url):
    with dshpy.open_store(url.format(tmp=tmp_path)) as store:
        seen = record(store)
        session = store.create(session_id="a")
        first = TurnScript(session).turn("one")
        session.flush()
        session.flush()  # nothing pending: no notice
        second = TurnScript(session).turn("two")
        child = store.fork(session, first[-1].seq, "b")  # flushes the second turn first
        child.close()
        session.close()
        reopened = store.open("a")
        reopened.close()
    assert seen == [
        ("created", "a", "created"),
        ("flush", "a", 0, first[-1].seq),
        ("flush", "a", second[0].seq, second[-1].seq),
        ("created", "b", "forked"),
        ("disposed", "b"),
        ("disposed", "a"),
        ("created", "a", "opened"),
        ("disposed", "a"),
    ]


def test_a_failing_handler_is_contained_and_later_handlers_still_run(tmp_path, caplog):
    store = dshpy.open_store(f"sqlite:///{tmp_path}/s.db")
    store.on("session/flush", lambda p: 1 / 0)
    seen = record(store)
    session = store.create(session_id="a")
    session.append("turn/start", {"turn": 1})
    with caplog.at_level(logging.ERROR, logger="dshpy.storage.notices"):
        assert session.flush() == 1
    assert "session/flush handler" in caplog.text
    assert ("flush", "a", 0, 0) in seen
    assert [e.seq for e in store.read("a")] == [0]
    assert session.pending_count == 0
    stop = store.on("session/created", lambda p: seen.append("late"))
    stop()
    store.create(session_id="c").close()
    assert "late" not in seen
    with pytest.raises(ValueError, match="unknown session point 'session/flushed'"):
        store.on("session/flushed", print)
    session.close()
    store.close()


def test_the_repair_an_open_writes_is_reported_after_session_created(tmp_path):
    """A crashed writer (kill -9) leaves an open turn; the next open closes it durably and reports that flush."""
    url = f"sqlite:///{tmp_path}/s.db"
    script = textwrap.dedent(
        f"""
        import os, signal, dshpy
        store = dshpy.open_store({url!r})
        s = store.create(session_id="crashed")
        s.append("turn/start", {{"turn": 1}})
        s.flush()
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    child = subprocess.run([sys.executable, "-c", script], env=os.environ.copy(), check=False, timeout=60)
    assert child.returncode == -signal.SIGKILL
    with dshpy.open_store(url) as store:
        seen = record(store)
        session = store.open("crashed")
        closers = len(session) - 1
        session.close()
    assert seen == [("created", "crashed", "opened"), ("flush", "crashed", 1, closers), ("disposed", "crashed")]
