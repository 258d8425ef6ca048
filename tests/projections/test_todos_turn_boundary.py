"""``todos`` (latest list wins) and ``turn_boundary`` (the seed's projection, event by event)."""

from __future__ import annotations

from projection_support import new_session

from dshpy.projections import TODOS, TURN_BOUNDARY, StepBoundary, TurnBoundaryState, state_of
from dshpy.testing.builders import TurnScript, user_message


def test_todos_are_the_latest_write() -> None:
    session = new_session()
    assert state_of(session, TODOS).todos is None
    session.append("todo/write", {"todos": [{"content": "a", "status": "pending"}]})
    latest = session.append(
        "todo/write",
        {
            "todos": [
                {"content": "a", "status": "completed", "activeForm": "Doing a"},
                {"content": "b", "status": "in_progress"},
            ]
        },
    )
    state = state_of(session, TODOS)
    assert state.seq == latest.seq
    assert TODOS.dump(state) == {
        "todos": [
            {"content": "a", "status": "completed", "activeForm": "Doing a"},
            {"content": "b", "status": "in_progress"},
        ],
        "seq": latest.seq,
    }
    assert TODOS.load(TODOS.dump(state)) == state
    session.append("todo/write", {"todos": []})
    assert state_of(session, TODOS).todos == ()


def test_turn_boundary_follows_the_seed_event_by_event() -> None:
    session = new_session()
    seen: list[TurnBoundaryState] = []
    session.subscribe(lambda s, e: seen.append(state_of(s, TURN_BOUNDARY)))
    TurnScript(session).turn(steps=2, tools_per_step=1)
    types = [e.type for e in session.events]
    start = types.index("turn/start")
    steps = [i for i, t in enumerate(types) if t == "step/start"]
    ends = [i for i, t in enumerate(types) if t == "step/end"]
    assert seen[start] == TurnBoundaryState(open_turn_start_seq=start, last_turn=1)
    assert seen[steps[1]] == TurnBoundaryState(
        open_turn_start_seq=start,
        last_step_start_seq=steps[1],
        last_step_boundary=StepBoundary(kind="start", seq=steps[1]),
        last_turn=1,
    )
    assert seen[-1] == TurnBoundaryState(
        last_step_start_seq=steps[1], last_step_boundary=StepBoundary(kind="end", seq=ends[1]), last_turn=1
    )
    assert TURN_BOUNDARY.dump(seen[-1]) == {
        "openTurnStartSeq": None,
        "lastStepStartSeq": steps[1],
        "lastStepBoundary": {"kind": "end", "seq": ends[1]},
        "lastTurn": 1,
    }
    for before, after, event in zip(seen, seen[1:], session.events[1:], strict=False):
        if event.type not in ("turn/start", "turn/end", "step/start", "step/end"):
            assert after is before, event.type


def test_turn_boundary_between_turns_and_after_a_user_message() -> None:
    session = new_session()
    TurnScript(session).turn()
    before = state_of(session, TURN_BOUNDARY)
    session.append("user/message", user_message("between turns"), surface_op="append")
    assert state_of(session, TURN_BOUNDARY) is before
    TurnScript(session).turn(close=False)
    assert state_of(session, TURN_BOUNDARY).last_turn == 2
    assert state_of(session, TURN_BOUNDARY).open_turn_start_seq is not None
