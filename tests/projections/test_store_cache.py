"""Properties of the persisted projection cache over generated logs, through real stores (memory and SQLite).

A generated log is written through a store session with flushes at drawn points (some
batches end turns, some do not, some events are never flushed); then

* every stored row trails the stored log (the cache never leads what the store holds);
* reopening seeds the runner from the rows and gives the fresh fold, folding only the
  events after the rows;
* ``store.projections`` gives the fresh fold of the stored log.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from projection_support import agent_commands, fresh, write

import dshpy
from dshpy import SessionEvent
from dshpy.projections import BUILTINS, runner_of
from dshpy.testing.strategies import session_scripts

PROPERTY = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def logs_with_flushes(draw: st.DrawFn) -> tuple[list[SessionEvent], set[int], int]:
    if draw(st.booleans()):
        source = write(draw(agent_commands()))
    else:
        source = dshpy.Session.new(session_id="gen")
        for op in draw(session_scripts(max_ops=40)):
            op.apply(source)
    events = list(source.events)
    flushes = set(draw(st.lists(st.integers(0, max(0, len(events) - 1)), max_size=8)))
    # events from ``stored`` on are appended but never flushed (often none: the whole log is stored)
    stored = draw(st.one_of(st.just(len(events)), st.integers(0, len(events))))
    return events, flushes, stored


def fresh_snapshot(events: list[SessionEvent]) -> dict[str, Any]:
    return {d.key: d.dump(fresh(d, events)) for d in BUILTINS}


@PROPERTY
@given(logs_with_flushes(), st.sampled_from(["memory", "sqlite"]))
def test_the_cache_trails_the_log_and_reopens_to_the_fresh_fold(
    case: tuple[list[SessionEvent], set[int], int], backend: str
) -> None:
    events, flushes, stored = case
    with tempfile.TemporaryDirectory() as directory:
        url = "memory:" if backend == "memory" else f"sqlite:///{Path(directory) / 's.db'}"
        store = dshpy.open_store(url)
        try:
            session = store.create(session_id="gen")
            for event in events:
                session.append_events([event])
                if event.seq < stored and (event.seq in flushes or event.seq == stored - 1):
                    session.flush()
                    length = store.stat("gen").event_count
                    assert all(row.seq < length for row in store._load_projection_rows("gen"))
            session._writer._inner = Refusing(session._writer.inner)  # the unflushed tail never reaches the store ...
            try:
                session.close()
            except dshpy.StoreError:
                assert session.pending_count > 0
            length = store.stat("gen").event_count
            assert length == stored
            rows = store._load_projection_rows("gen")
            assert all(row.seq < length for row in rows)  # ... nor the cache
            cached_at = max((row.seq for row in rows), default=-1)

            reopened = store.open("gen")  # repair may append closers: they are folded like any tail
            runner = runner_of(reopened)
            assert runner is not None
            if rows:
                assert {s.from_seq for s in runner.seeding.values()} == {cached_at + 1}
            log = list(store.read("gen"))
            assert [e.to_wire() for e in log[:stored]] == [e.to_wire() for e in events[:stored]]
            expected = fresh_snapshot(log)
            assert runner.snapshot([d.key for d in BUILTINS])["values"] == expected
            reopened.close()
            assert store.projections("gen", [d.key for d in BUILTINS])["values"] == expected
            assert all(row.seq == len(log) - 1 for row in store._load_projection_rows("gen"))
        finally:
            store.close()


class Refusing:
    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def write(self, *_args: Any) -> None:
        raise dshpy.StoreError("the disk is gone")

    def close(self) -> None:
        self.inner.close()
