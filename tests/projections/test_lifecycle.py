"""The lifecycle state machine: every transition, legal and illegal, refused at append; archived is read-only."""

from __future__ import annotations

import itertools

import pytest
from projection_support import AgentWriter, Clock, StepPlan, Turn, new_session

import dshpy
from dshpy import LifecycleError, ReadOnlySessionError, Session, SessionArchivedError
from dshpy.core.events import event_from_parts
from dshpy.projections import (
    LIFECYCLE,
    SESSION_STATE_TYPE,
    SESSION_STATES,
    TRANSITIONS,
    attach,
    set_lifecycle,
    state_of,
)
from dshpy.testing.builders import TurnScript, user_message

PATHS: dict[str, list[str]] = {
    "created": [],
    "active": ["active"],
    "paused": ["active", "paused"],
    "completed": ["active", "completed"],
    "failed": ["active", "failed"],
    "archived": ["active", "completed", "archived"],
}

LEGAL = {(a, b) for a, targets in TRANSITIONS.items() for b in targets}


def session_in(state: str) -> Session:
    session = new_session()
    for step in PATHS[state]:
        set_lifecycle(session, step)  # type: ignore[arg-type]
    assert state_of(session, LIFECYCLE).state == state
    return session


def test_the_transition_table_is_the_seeds_machine() -> None:
    assert {
        ("created", "active"),
        ("active", "paused"),
        ("paused", "active"),
        ("active", "completed"),
        ("active", "failed"),
        ("paused", "completed"),
        ("paused", "failed"),
        ("completed", "archived"),
        ("failed", "archived"),
    } == LEGAL


@pytest.mark.parametrize(("current", "target"), list(itertools.product(SESSION_STATES, SESSION_STATES)))
def test_every_transition(current: str, target: str) -> None:
    session = session_in(current)
    before = len(session)
    if (current, target) in LEGAL:
        event = set_lifecycle(session, target, reason="because")  # type: ignore[arg-type]
        state = state_of(session, LIFECYCLE)
        assert (state.state, state.reason, state.since_seq, state.since_time) == (
            target,
            "because",
            event.seq,
            event.time,
        )
        assert event.type == SESSION_STATE_TYPE and event.ignorable
        assert event.data == {"state": target, "reason": "because"}
        return
    expected = SessionArchivedError if current == "archived" else LifecycleError
    with pytest.raises(expected) as refused:
        set_lifecycle(session, target)  # type: ignore[arg-type]
    assert len(session) == before
    assert state_of(session, LIFECYCLE).state == current
    error = refused.value
    assert (error.state, error.seq, error.event_type) == (current, before, SESSION_STATE_TYPE)
    if current != "archived":
        assert error.target == target
        assert f"illegal session lifecycle transition {current} → {target}" in str(error)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"state": "bogus"}, "state must be one of"),
        ({"state": None}, "state must be one of"),
        ({}, "state must be one of"),
        ({"state": "active", "reason": 3}, "reason must be a string"),
        ({"state": "active", "by": "me"}, r"unexpected keys \['by'\]"),
        ("active", "data must be an object"),
    ],
)
def test_malformed_records_are_refused(data: object, message: str) -> None:
    session = new_session()
    attach(session)
    with pytest.raises(LifecycleError, match=message):
        session.append(SESSION_STATE_TYPE, data)
    assert len(session) == 0


def test_the_first_turn_makes_a_created_session_active() -> None:
    session = new_session()
    TurnScript(session).turn()
    state = state_of(session, LIFECYCLE)
    assert (state.state, state.since_seq, state.reason) == ("active", 1, None)  # seq 0 is the inbox splice
    assert state.turn_open is False


def test_a_turn_that_ends_in_error_fails_the_session_and_a_new_turn_revives_it() -> None:
    session = new_session()
    script = TurnScript(session)
    script.turn()
    failure = {"message": "cannot reach the model server at http://127.0.0.1:9/v1", "code": "CONNECTION"}
    session.append("turn/start", {"turn": 2})
    end = session.append("turn/end", {"turn": 2, "reason": {"kind": "error", "error": failure}})
    state = state_of(session, LIFECYCLE)
    assert (state.state, state.reason, state.since_seq) == ("failed", failure["message"], end.seq)
    aborted = session.append("turn/start", {"turn": 3})
    assert state_of(session, LIFECYCLE).state == "active"  # tried again: what dsh allows after an error
    session.append("turn/end", {"turn": 3, "reason": {"kind": "aborted", "reason": {"kind": "user"}}})
    state = state_of(session, LIFECYCLE)
    assert (state.state, state.since_seq) == ("active", aborted.seq)  # an abort is not a failure
    set_lifecycle(session, "failed")
    session.append("turn/start", {"turn": 4})
    assert state_of(session, LIFECYCLE).state == "active"


@pytest.mark.parametrize(("current", "hint"), [("paused", "resume it first"), ("completed", "fork it")])
def test_no_turn_starts_unless_created_or_active(current: str, hint: str) -> None:
    session = session_in(current)
    before = len(session)
    with pytest.raises(LifecycleError, match=f"the session is {current}; {hint}") as refused:
        session.append("turn/start", {"turn": session.next_turn})
    assert (refused.value.state, refused.value.target) == (current, None)
    assert len(session) == before
    if current == "paused":
        set_lifecycle(session, "active")
        TurnScript(session).turn()
        assert state_of(session, LIFECYCLE).state == "active"


def test_an_archived_session_is_read_only() -> None:
    session = session_in("archived")
    before = len(session)
    attempts = [
        lambda: session.append("turn/start", {"turn": 1}),
        lambda: session.append("user/message", user_message("hi"), surface_op="append"),
        lambda: session.append("todo/write", {"todos": []}),
        lambda: session.append("plugin:dshpy/note", {"x": 1}),
        lambda: session.append_events([event_from_parts("todo/write", before, 1, {"todos": []})]),
        lambda: set_lifecycle(session, "active"),
    ]
    for attempt in attempts:
        with pytest.raises(SessionArchivedError, match=r"archived .* read-only") as refused:
            attempt()
        assert isinstance(refused.value, ReadOnlySessionError)
    assert len(session) == before


def test_archiving_waits_for_the_open_turn_to_end() -> None:
    clock = Clock()
    session = Session.new(clock=clock)
    writer = AgentWriter(session, clock)
    attach(session)
    writer.do(Turn(steps=(StepPlan(),), close=False))
    set_lifecycle(session, "completed")
    with pytest.raises(LifecycleError, match="while a turn is open"):
        set_lifecycle(session, "archived")
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    set_lifecycle(session, "archived")
    assert state_of(session, LIFECYCLE).state == "archived"


def test_a_batch_is_checked_against_its_own_earlier_events() -> None:
    session = new_session()
    attach(session)
    record = lambda seq, state: event_from_parts(SESSION_STATE_TYPE, seq, 1, {"state": state}, ignorable=True)  # noqa: E731
    session.append_events([record(0, "active"), record(1, "paused"), record(2, "active")])
    assert state_of(session, LIFECYCLE).state == "active"
    with pytest.raises(LifecycleError, match="paused → paused"):  # legal alone, illegal after the batch's first
        session.append_events([record(3, "paused"), record(4, "paused")])
    with pytest.raises(LifecycleError, match="completed → active"):
        session.append_events([record(3, "paused"), record(4, "completed"), record(5, "active")])
    with pytest.raises(SessionArchivedError):
        session.append_events([record(3, "completed"), record(4, "archived"), record(5, "failed")])
    assert len(session) == 3
    assert state_of(session, LIFECYCLE).state == "active"


def test_a_log_written_without_the_guard_folds_as_if_refused_events_were_not_there() -> None:
    unguarded = new_session()
    record = {"state": "paused"}
    unguarded.append(SESSION_STATE_TYPE, record)  # created → paused: illegal, but no runner was watching
    unguarded.append(SESSION_STATE_TYPE, {"state": "active", "extra": 1})
    unguarded.append(SESSION_STATE_TYPE, {"state": "active"})
    state = state_of(unguarded, LIFECYCLE)
    assert (state.state, state.since_seq) == ("active", 2)


def test_a_fork_child_starts_its_own_lifecycle() -> None:
    store = dshpy.MemoryStore()
    parent = store.create()
    TurnScript(parent).turn()
    set_lifecycle(parent, "completed", reason="done")
    set_lifecycle(parent, "archived")
    parent.flush()
    child = store.fork(parent.id)
    assert state_of(child, LIFECYCLE).state == "created"
    TurnScript(child).turn("go on")
    assert state_of(child, LIFECYCLE).state == "active"
    assert state_of(parent, LIFECYCLE).state == "archived"


def test_the_state_dumps_to_camel_case_json() -> None:
    session = session_in("paused")
    assert LIFECYCLE.dump(state_of(session, LIFECYCLE)) == {
        "state": "paused",
        "reason": None,
        "sinceSeq": 1,
        "sinceTime": session.events[1].time,
        "turnOpen": False,
    }
