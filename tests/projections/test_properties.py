"""Properties of the projection runner over generated logs.

Two generators: ``dshpy.testing.strategies`` (compaction, replacements, rewrites,
resume markers — everything the log allows) and the agent-like command writer of
``projection_support`` (titles, lifecycle records the guard may refuse, failed
attempts with retries, tool errors, several models, real timings).

* incremental: after every append, each runner state equals a fresh fold of the
  same prefix through ``apply`` alone (no type routing), and ``apply`` returns the
  very same object for every event type a definition did not declare;
* cache: rows checkpointed after any prefix, sent through JSON and used to seed a
  runner on the full log — or on the prefix, then continued with the rest — give the
  fresh fold, folding only the events after the row;
* invalidation: a bumped ``state_version`` (or a row beyond the log) discards the row
  and re-folds, even when the row's state is valid-looking garbage.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from projection_support import AgentWriter, Clock, Command, agent_commands, fresh, new_session, write

from dshpy import Session, SessionEvent
from dshpy.projections import BUILTINS, CachedState, ProjectionRegistry, ProjectionRunner, attach
from dshpy.testing.strategies import session_scripts

PROPERTY = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])

EVENT_TYPES_SEEN: set[str] = set()


def check_against_fresh_fold(runner: ProjectionRunner, session: Session) -> None:
    events = session.events
    assert runner.as_of_seq == len(events) - 1
    for definition in BUILTINS:
        assert runner.state(definition.key) == fresh(definition, events), definition.key


def check_routing(events: Sequence[SessionEvent]) -> None:
    """``types`` is a promise: for any other type, apply returns its input object."""
    for definition in BUILTINS:
        state = definition.init()
        for event in events:
            if not definition.concerns(event.type):
                assert definition.apply(state, event) is state, (definition.key, event.type)
            else:
                state = definition.apply(state, event)


def through_json(rows: dict[str, CachedState]) -> dict[str, CachedState]:
    raw = orjson.dumps({key: row.to_json() for key, row in rows.items()})
    return {key: CachedState.from_json(value) for key, value in orjson.loads(raw).items()}


def followed_session(events: Sequence[SessionEvent]) -> tuple[Session, ProjectionRunner]:
    """A new session that receives ``events`` one append at a time, checked after each."""
    session = new_session()
    runner = attach(session)

    def after_each(s: Session, _event: SessionEvent) -> None:
        check_against_fresh_fold(runner, s)

    session.subscribe(after_each)  # subscribed after the runner: it sees the runner's updated states
    for event in events:
        session.append_events([event])
    return session, runner


@PROPERTY
@given(session_scripts(max_ops=60))
def test_incremental_equals_fresh_fold_on_generated_logs(ops: list[Any]) -> None:
    source = new_session()
    for op in ops:
        op.apply(source)
    session, runner = followed_session(source.events)
    check_against_fresh_fold(runner, session)
    check_routing(session.events)


@PROPERTY
@given(agent_commands())
def test_incremental_equals_fresh_fold_on_agent_logs(commands: list[Command]) -> None:
    checked: list[int] = []
    clock = Clock()
    session = Session.new(session_id="agent", clock=clock)
    runner = attach(session)

    def after_each(s: Session, event: SessionEvent) -> None:
        check_against_fresh_fold(runner, s)
        checked.append(event.seq)

    session.subscribe(after_each)
    writer = AgentWriter(session, clock)
    writer.run(commands)
    assert checked == list(range(len(session)))  # refused appends left no trace
    check_routing(session.events)


def rows_after(events: Sequence[SessionEvent], cut: int) -> dict[str, CachedState]:
    """Checkpoint rows of a runner that followed ``events[:cut]``."""
    prefix = Session(new_session().header, events[:cut])
    return attach(prefix).checkpoint()


@st.composite
def log_and_cut(draw: st.DrawFn) -> tuple[list[SessionEvent], int]:
    if draw(st.booleans()):
        session = write(draw(agent_commands()))
    else:
        session = new_session()
        for op in draw(session_scripts(max_ops=50)):
            op.apply(session)
    events = list(session.events)
    return events, draw(st.integers(0, len(events)))


@PROPERTY
@given(log_and_cut())
def test_cached_rows_seed_a_runner_that_folds_only_the_rest(case: tuple[list[SessionEvent], int]) -> None:
    events, cut = case
    rows = through_json(rows_after(events, cut))
    assert all(row.seq == cut - 1 for row in rows.values())
    header = new_session().header

    whole = Session(header, events)  # the store opens the full log, then seeds from the cache
    runner = attach(whole, cached=rows)
    assert {s.outcome for s in runner.seeding.values()} == {"cached"}
    assert {s.from_seq for s in runner.seeding.values()} == {cut}
    check_against_fresh_fold(runner, whole)

    prefix = Session(header, events[:cut])  # ... or seeds a shorter log, which then goes on
    continued = attach(prefix, cached=rows)
    for event in events[cut:]:
        prefix.append_events([event])
    check_against_fresh_fold(continued, prefix)


def garbage_rows(version_bump: int) -> dict[str, CachedState]:
    """Valid-looking rows of an unrelated session, claiming seq 0."""
    other = write([])
    rows = attach(other).checkpoint()
    for key, definition in ((d.key, d) for d in BUILTINS):
        state = definition.dump(definition.init())
        rows[key] = CachedState(definition.state_version + version_bump, 0, state)
    return rows


@PROPERTY
@given(agent_commands(max_size=6))
def test_a_bumped_state_version_forces_a_refold(commands: list[Command]) -> None:
    source = write(commands)
    events = list(source.events)
    if not events:
        return
    stale = garbage_rows(version_bump=0)  # rows written by the current definitions...
    bumped = ProjectionRegistry(dataclasses.replace(d, state_version=d.state_version + 1) for d in BUILTINS)

    session = Session(source.header, events)
    runner = attach(session, bumped, cached=stale)  # ... read by definitions whose version moved on
    assert {s.outcome for s in runner.seeding.values()} == {"stale-version"}
    assert {s.from_seq for s in runner.seeding.values()} == {0}
    check_against_fresh_fold(runner, session)

    trusting = attach(Session(source.header, events), cached=stale)  # same version: the row is believed
    assert {s.outcome for s in trusting.seeding.values()} == {"cached"}


@PROPERTY
@given(agent_commands(max_size=6), st.integers(1, 5))
def test_a_row_beyond_the_log_forces_a_refold(commands: list[Command], beyond: int) -> None:
    source = write(commands)
    events = list(source.events)
    rows = {
        key: dataclasses.replace(row, seq=len(events) - 1 + beyond) for key, row in attach(source).checkpoint().items()
    }
    session = Session(source.header, events)
    runner = attach(session, cached=rows)
    assert {s.outcome for s in runner.seeding.values()} == {"beyond-log"}
    check_against_fresh_fold(runner, session)


@PROPERTY
@given(log_and_cut())
def test_snapshots_dump_and_load_back_to_the_same_states(case: tuple[list[SessionEvent], int]) -> None:
    events, cut = case
    session = Session(new_session().header, events[:cut])
    runner = attach(session)
    shot = runner.snapshot()
    assert shot["as_of_seq"] == cut - 1
    for definition in BUILTINS:
        loaded = definition.load(orjson.loads(orjson.dumps(shot["values"][definition.key])))
        assert loaded == runner.state(definition.key)
        assert definition.dump(loaded) == shot["values"][definition.key]


@PROPERTY
@given(log_and_cut(), st.lists(st.integers(1, 40), min_size=1, max_size=20))
def test_folding_in_runs_equals_folding_one_event_at_a_time(
    case: tuple[list[SessionEvent], int], run_lengths: list[int]
) -> None:
    """``apply_many`` over any split of the log into runs equals ``apply`` event by event, and a run that
    changes nothing returns the very state it was given."""
    events, _ = case
    with_runs = [d for d in BUILTINS if d.apply_many is not None]
    assert {d.key for d in with_runs} >= {"stats", "usage", "turn_boundary"}
    for definition in with_runs:
        assert definition.apply_many is not None
        state = definition.init()
        position = 0
        lengths = iter(run_lengths * (len(events) // len(run_lengths) + 1))
        while position < len(events):
            run = events[position : position + next(lengths)]
            folded = definition.apply_many(state, run)
            if all(not definition.concerns(event.type) for event in run):
                assert folded is state, definition.key
            state = folded
            position += len(run)
            assert state == fresh(definition, events[:position]), (definition.key, position)
        assert definition.apply_many(state, []) is state
