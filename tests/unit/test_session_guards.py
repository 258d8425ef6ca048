"""``Session.add_guard``: checks that higher layers add to the append pipeline, run last, before commit."""

from __future__ import annotations

import pytest

from dshpy import EventError, InvariantError, Session, SessionEvent
from dshpy.core.events import event_from_parts
from dshpy.testing.builders import TurnScript


class NoTodos(EventError):
    pass


def refuse_todos(session: Session, event: SessionEvent) -> None:
    if event.type == "todo/write":
        raise NoTodos("no todos here", event_type=event.type, seq=event.seq)


def test_a_guard_sees_the_candidate_and_the_log_before_it() -> None:
    session = Session.new()
    seen: list[tuple[int, int, str]] = []
    session.add_guard(lambda s, e: seen.append((len(s), e.seq, e.type)))
    session.append("turn/start", {"turn": 1})
    session.append("todo/write", {"todos": []})
    assert seen == [(0, 0, "turn/start"), (1, 1, "todo/write")]


def test_a_refusal_commits_nothing_and_notifies_no_one() -> None:
    session = Session.new()
    heard: list[int] = []
    session.subscribe(lambda s, e: heard.append(e.seq))
    remove = session.add_guard(refuse_todos)
    session.append("turn/start", {"turn": 1})
    with pytest.raises(NoTodos, match="no todos here"):
        session.append("todo/write", {"todos": []})
    assert len(session) == 1 and heard == [0] and session.pending_count == 1
    remove()
    remove()  # idempotent
    session.append("todo/write", {"todos": []})
    assert len(session) == 2


def test_the_logs_own_rules_run_first() -> None:
    session = Session.new()
    called: list[str] = []
    session.add_guard(lambda s, e: called.append(e.type))
    with pytest.raises(InvariantError):
        session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})  # no open turn
    assert called == []


def test_a_batch_is_guarded_as_a_whole_against_its_own_earlier_events() -> None:
    session = Session.new()
    sizes: list[tuple[int, int]] = []

    def at_most_three(s: Session, e: SessionEvent) -> None:
        sizes.append((len(s), e.seq))
        if len(s) >= 3:
            raise EventError("full", event_type=e.type, seq=e.seq)

    session.add_guard(at_most_three)
    batch = [event_from_parts("todo/write", seq, 1, {"todos": []}) for seq in range(4)]
    with pytest.raises(EventError, match="full"):
        session.append_events(batch)
    assert len(session) == 0
    assert sizes == [(0, 0), (1, 1), (2, 2), (3, 3)]  # the trial session held the batch's earlier events
    session.append_events(batch[:3])
    assert len(session) == 3


def test_restoring_a_stored_log_runs_no_guard() -> None:
    source = Session.new()
    TurnScript(source).turn()
    source.add_guard(refuse_todos)  # guards belong to one live handle, not to the log
    restored = Session(source.header, [*source.events, event_from_parts("todo/write", len(source), 1, {"todos": []})])
    assert len(restored) == len(source) + 1
