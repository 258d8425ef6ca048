"""The runner, the registry and the definition contract: change listeners, routing, late registration,
snapshots, cache rows and their invalidation, catching up, and not keeping sessions alive."""

from __future__ import annotations

import dataclasses
import gc
import logging
import weakref
from typing import Any

import pytest
from projection_support import fresh, new_session

from dshpy import EventError, LifecycleError, ProjectionError, Session, SessionEvent
from dshpy.core.events import event_from_parts
from dshpy.projections import (
    BUILTINS,
    LIFECYCLE,
    STATS,
    TITLE,
    TURN_BOUNDARY,
    USAGE,
    CachedState,
    ProjectionDefinition,
    ProjectionRegistry,
    ProjectionState,
    attach,
    default_registry,
    detach,
    on_change,
    restore,
    restore_floor,
    runner_of,
    set_lifecycle,
    snapshot,
    state_of,
    usable,
)
from dshpy.testing.builders import TurnScript, user_message


class Count(ProjectionState):
    events: int = 0


def count_apply(state: Count, event: SessionEvent) -> Count:
    return Count(events=state.events + 1)


COUNT = ProjectionDefinition(key="count", state_version=1, state_schema=Count, init=Count, apply=count_apply)


class Prompts(ProjectionState):
    texts: tuple[str, ...] = ()


def prompts_apply(state: Prompts, event: SessionEvent) -> Prompts:
    if event.type != "user/message":
        return state
    return Prompts(texts=(*state.texts, event.data["content"][0]["text"]))


PROMPTS = ProjectionDefinition(key="prompts", state_version=1, state_schema=Prompts, init=Prompts, apply=prompts_apply)


# -- definitions and the registry ----------------------------------------------------------------


def test_evolve_is_model_copy_with_an_update_and_refuses_unknown_fields() -> None:
    from dshpy.projections import StatsState

    base = StatsState(turns=2)
    changed = base.evolve(steps=5, pending_tools={"c": 1})
    assert changed == base.model_copy(update={"steps": 5, "pending_tools": {"c": 1}})
    assert (base.steps, changed.steps, changed.turns) == (0, 5, 2)  # the original is untouched
    assert changed.model_fields_set == {"turns", "steps", "pending_tools"}
    assert base.model_fields_set == {"turns"}
    assert changed.model_dump(by_alias=True)["pendingTools"] == {"c": 1}
    with pytest.raises(AttributeError, match="'stepz'"):
        base.evolve(stepz=1)
    with pytest.raises(Exception, match="frozen"):
        changed.steps = 1  # type: ignore[misc]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"key": ""}, "key must be a non-empty string"),
        ({"key": " x"}, "key must be a non-empty string"),
        ({"state_version": -1}, "state_version must be a non-negative integer"),
        ({"state_version": True}, "state_version must be a non-negative integer"),
        ({"state_version": 1.0}, "state_version must be a non-negative integer"),
        ({"state_schema": dict}, "state_schema must be a ProjectionState subclass"),
    ],
)
def test_definitions_are_checked(change: dict[str, Any], message: str) -> None:
    with pytest.raises(ProjectionError, match=message):
        dataclasses.replace(COUNT, **change)


def test_the_registry_accepts_a_definition_twice_but_not_a_conflicting_one() -> None:
    registry = ProjectionRegistry([COUNT])
    assert registry.register(COUNT) is COUNT
    assert registry.register(dataclasses.replace(COUNT)) == COUNT  # an equal definition is the same definition
    with pytest.raises(
        ProjectionError, match='"count" is already registered with state_version 1; refusing state_version 2'
    ):
        registry.register(dataclasses.replace(COUNT, state_version=2))
    with pytest.raises(ProjectionError, match="already registered by a different definition"):
        registry.register(dataclasses.replace(COUNT, apply=lambda s, e: s))
    assert registry.keys() == ("count",)
    registry.unregister("count")
    registry.register(dataclasses.replace(COUNT, state_version=2))
    with pytest.raises(ProjectionError, match='no projection registered under "nope"'):
        registry["nope"]


def test_the_default_registry_holds_the_builtins() -> None:
    assert default_registry().keys() == ("turn_boundary", "usage", "stats", "title", "todos", "lifecycle")
    assert tuple(default_registry()) == BUILTINS
    assert default_registry() is default_registry()


def test_load_refuses_state_that_does_not_validate() -> None:
    with pytest.raises(ProjectionError, match=r'"usage" \(state_version 2\): cached state does not validate: total'):
        USAGE.load({"total": "lots"})
    with pytest.raises(ProjectionError, match="does not validate"):
        TITLE.load({"title": "x", "unknown": 1})
    with pytest.raises(ProjectionError, match="expected a TitleState"):
        TITLE.dump(Count())  # type: ignore[arg-type]


# -- folding and listening -----------------------------------------------------------------------


def test_listeners_hear_only_real_changes() -> None:
    session = new_session()
    heard: list[tuple[str, int]] = []
    on_change(session, lambda s, key, state, seq: heard.append((key, seq)))
    session.append("plugin:dshpy/note", {"x": 1})
    session.append("agent/inbox/spliced", {"target": "next-turn", "start": 0, "inserted": []})
    assert heard == []
    session.append("turn/start", {"turn": 1})
    assert sorted(heard) == [("lifecycle", 2), ("stats", 2), ("turn_boundary", 2)]
    heard.clear()
    session.append("user/message", user_message("hello"), surface_op="append")
    session.append("user/message", user_message("again"), surface_op="append")
    assert heard == [("title", 3)]


def test_a_failing_listener_is_logged_and_the_append_stands(caplog: pytest.LogCaptureFixture) -> None:
    session = new_session()
    on_change(session, lambda *args: 1 / 0)
    with caplog.at_level(logging.ERROR, logger="dshpy.projections"):
        session.append("turn/start", {"turn": 1})
    assert len(session) == 1
    assert "projection listener failed" in caplog.text


def test_routing_skips_apply_for_undeclared_types() -> None:
    calls: list[str] = []

    def spy(state: Count, event: SessionEvent) -> Count:
        calls.append(event.type)
        return state

    spied = ProjectionDefinition(
        key="spy", state_version=0, state_schema=Count, init=Count, apply=spy, types=frozenset({"todo/write"})
    )
    session = new_session()
    runner = attach(session, ProjectionRegistry([spied]))
    TurnScript(session).turn()
    session.append("todo/write", {"todos": []})
    assert calls == []  # nobody listens: folded when read, not per append
    runner.sync()
    assert calls == ["todo/write"]
    runner.sync()
    assert calls == ["todo/write"]  # each event is folded once
    assert runner.keys == ("spy",)


def test_a_definition_registered_later_is_folded_from_the_whole_log() -> None:
    session = new_session()
    TurnScript(session).turn("first")
    runner = attach(session)
    assert "count" not in runner
    assert state_of(session, COUNT) == Count(events=len(session))
    TurnScript(session).turn("second")
    assert state_of(session, COUNT) == Count(events=len(session))
    assert state_of(session, PROMPTS).texts == ("first", "second")
    with pytest.raises(ProjectionError, match='no projection "missing"'):
        state_of(session, "missing")


def test_attaching_again_returns_the_runner_and_adds_a_registrys_definitions() -> None:
    session = new_session()
    runner = attach(session)
    assert attach(session) is runner and runner_of(session) is runner
    attach(session, ProjectionRegistry([COUNT]))
    assert "count" in runner and "usage" in runner
    with pytest.raises(ProjectionError, match="already has a projection runner"):
        attach(session, cached={})
    detach(session)
    assert runner_of(session) is None


def test_a_runner_catches_up_when_it_missed_events() -> None:
    session = new_session()

    def reentrant(s: Session, event: SessionEvent) -> None:  # subscribed before the runner: appends a second event
        if event.type == "turn/start":
            s.append("plugin:dshpy/note", {"after": event.seq})

    session.subscribe(reentrant)
    runner = attach(session)
    session.append("turn/start", {"turn": 1})  # the runner hears seq 1 before seq 0
    assert len(session) == 2 and runner.as_of_seq == 1
    for definition in BUILTINS:
        assert runner.state(definition.key) == fresh(definition, session.events)


def test_snapshots() -> None:
    session = new_session()
    assert snapshot(session, ["title"]) == {
        "as_of_seq": -1,
        "values": {"title": {"title": None, "source": None, "seq": None}},
    }
    TurnScript(session).turn("name me")
    attach(session, ProjectionRegistry([COUNT]))
    shot = snapshot(session, ["title", "count"])
    assert shot["as_of_seq"] == len(session) - 1
    assert shot["values"]["title"]["title"] == "name me"
    assert shot["values"]["count"] == {"events": len(session)}
    assert set(snapshot(session)["values"]) == {d.key for d in BUILTINS} | {"count"}
    again = snapshot(session, ["title"])
    assert again["values"]["title"] is shot["values"]["title"]  # an unchanged state is dumped once
    with pytest.raises(TypeError):
        shot["values"]["title"]["title"] = "changed"  # frozen JSON


def test_the_runner_does_not_keep_a_session_alive() -> None:
    session = new_session()
    runner = attach(session)
    TurnScript(session).turn()
    ref = weakref.ref(session)
    del session
    gc.collect()
    assert ref() is None and runner.session is None


# -- cache rows -----------------------------------------------------------------------------------


def turns(count: int) -> Session:
    session = new_session()
    script = TurnScript(session)
    for number in range(count):
        script.turn(f"prompt {number}")
    return session


def test_checkpoint_rows_round_trip_and_seed_only_the_tail() -> None:
    source = turns(3)
    rows = attach(source).checkpoint()
    assert {row.seq for row in rows.values()} == {len(source) - 1}
    assert rows["turn_boundary"].state_version == 2
    assert {k: CachedState.from_json(r.to_json()) for k, r in rows.items()} == rows

    applied: list[int] = []

    def counting(state: Any, event: SessionEvent) -> Any:
        applied.append(event.seq)
        return STATS.apply(state, event)

    counted = dataclasses.replace(STATS, apply=counting, types=None, apply_many=None)
    TurnScript(source).turn("more")
    events = list(source.events)
    session = Session(source.header, events)
    runner = attach(session, ProjectionRegistry([counted]), cached=rows)
    assert runner.seeding["stats"] == ("cached", rows["stats"].seq + 1)
    assert applied == list(range(rows["stats"].seq + 1, len(events)))  # only the tail was folded
    assert runner.state("stats") == fresh(STATS, events)


@pytest.mark.parametrize(
    ("mutate", "outcome"),
    [
        (lambda row: dataclasses.replace(row, state_version=row.state_version + 1), "stale-version"),
        (lambda row: dataclasses.replace(row, seq=10_000), "beyond-log"),
        (lambda row: dataclasses.replace(row, seq=-2), "beyond-log"),
        (lambda row: dataclasses.replace(row, state={"nonsense": True}), "invalid"),
    ],
)
def test_a_stale_row_is_discarded_and_the_state_refolded(mutate: Any, outcome: str) -> None:
    source = turns(2)
    rows = {key: mutate(row) for key, row in attach(source).checkpoint().items()}
    session = Session(source.header, list(source.events))
    runner = attach(session, cached=rows)
    assert {s.outcome for s in runner.seeding.values()} == {outcome}
    assert {s.from_seq for s in runner.seeding.values()} == {0}
    for definition in BUILTINS:
        assert runner.state(definition.key) == fresh(definition, session.events)


def test_missing_rows_fold_from_the_start() -> None:
    session = turns(1)
    runner = attach(
        Session(session.header, list(session.events)), cached={"usage": attach(session).checkpoint()["usage"]}
    )
    assert runner.seeding["usage"].outcome == "cached"
    assert runner.seeding["title"] == ("fresh", 0)


def test_restore_over_a_tail_window_for_a_cold_reader() -> None:
    source = turns(3)
    events = list(source.events)
    early = Session(source.header, events[:10])
    rows = attach(early).checkpoint()
    rows["title"] = attach(Session(source.header, events[:20])).checkpoint()["title"]
    floor = restore_floor(BUILTINS, rows, len(events))
    assert floor == 10  # the lowest row seq + 1
    for definition in BUILTINS:
        restored = restore(definition, rows[definition.key], events[floor:], base_seq=floor)
        assert restored.state == fresh(definition, events)
        assert restored.outcome == "cached"
    stale = {**rows, "usage": dataclasses.replace(rows["usage"], state_version=9)}
    assert restore_floor(BUILTINS, stale, len(events)) == 0
    with pytest.raises(ProjectionError, match="re-read the log from seq 0"):
        restore(USAGE, stale["usage"], events[floor:], base_seq=floor)
    with pytest.raises(ProjectionError, match="read from seq 10"):
        restore(USAGE, rows["usage"], events[15:], base_seq=15)
    assert usable(LIFECYCLE, rows["lifecycle"], 5) == "beyond-log"


@pytest.mark.parametrize(
    "value",
    [
        None,
        [],
        {"stateVersion": 1, "seq": 0},
        {"stateVersion": "1", "seq": 0, "state": {}},
        {"stateVersion": 1, "seq": 0, "state": {}, "x": 1},
    ],
)
def test_malformed_rows_are_refused(value: Any) -> None:
    with pytest.raises(ProjectionError):
        CachedState.from_json(value)


def test_turn_boundary_row_matches_dshs_row_shape() -> None:
    session = turns(1)
    row = attach(session).checkpoint([TURN_BOUNDARY.key])[TURN_BOUNDARY.key]
    assert set(row.state) == {"openTurnStartSeq", "lastStepStartSeq", "lastStepBoundary", "lastTurn"}


def test_reading_from_another_thread_while_appending_stays_consistent() -> None:
    """Readers catch up lazily under the runner's lock while the appender folds the checks without it."""
    import threading

    session = new_session()
    runner = attach(session)
    script = TurnScript(session)
    snapshots: list[Any] = []
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            snapshots.append(runner.snapshot(["stats", "lifecycle"]))
            state_of(session, TURN_BOUNDARY)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for index in range(40):
            script.turn(f"turn {index}", steps=2)
    finally:
        done.set()
        reader.join()
    events = list(session.events)
    assert len(snapshots) > 1
    for taken in snapshots[:: max(1, len(snapshots) // 25)]:  # each one a single, correct position
        prefix = events[: taken["as_of_seq"] + 1]
        assert taken["values"]["stats"] == STATS.dump(fresh(STATS, prefix))
        assert taken["values"]["lifecycle"] == LIFECYCLE.dump(fresh(LIFECYCLE, prefix))
    assert runner.snapshot() == {
        "as_of_seq": len(events) - 1,
        "values": {d.key: d.dump(fresh(d, events)) for d in BUILTINS},
    }
    set_lifecycle(session, "completed")
    with pytest.raises(LifecycleError, match="cannot start a turn"):
        script.turn("after completion")


def test_a_batch_trial_folds_each_candidate_once_for_the_checks() -> None:
    """``append_events`` checks every candidate against the states after the batch's earlier ones: folded
    incrementally, not from the batch's start each time (that was O(n²) for an import of a long log)."""
    applied: list[int] = []

    def counting(state: Count, event: SessionEvent) -> Count:
        applied.append(event.seq)
        return Count(events=state.events + 1)

    def refuse_the_third_todo(state: Count, event: SessionEvent) -> None:
        if event.type == "todo/write" and event.data["todos"] == [{"content": "3", "status": "pending"}]:
            raise EventError(f"refused after {state.events} events", event_type=event.type, seq=event.seq)

    checked = ProjectionDefinition(
        key="checked", state_version=1, state_schema=Count, init=Count, apply=counting, check=refuse_the_third_todo
    )
    source = new_session()
    TurnScript(source).turn()
    batch = list(source.events)
    session = new_session()
    attach(session, ProjectionRegistry([checked]))
    session.append_events(batch)
    assert sorted(applied) == sorted([e.seq for e in batch[:-1]] + [e.seq for e in batch])  # trial, then commits
    assert state_of(session, "checked") == Count(events=len(batch))

    applied.clear()
    todos = [
        event_from_parts("todo/write", len(batch) + i, 0, {"todos": [{"content": str(i), "status": "pending"}]})
        for i in range(5)
    ]
    with pytest.raises(EventError, match=f"refused after {len(batch) + 3} events"):
        session.append_events(todos)  # the check saw the batch's first three candidates folded in
    assert len(session) == len(batch)  # all or nothing
    assert applied == [len(batch), len(batch) + 1, len(batch) + 2]
