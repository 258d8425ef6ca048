"""Helpers the benchmark scripts share (each script runs from this directory, so they import it directly)."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator, Sequence

import dshpy


@contextlib.contextmanager
def no_gc() -> Iterator[None]:
    """Time with the cyclic GC off, as ``timeit`` does: its pauses scale with the benchmark's own heap."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def whole_turns(events: Sequence[dshpy.SessionEvent], count: int) -> list[dshpy.SessionEvent]:
    """The longest prefix of at most ``count`` events that ends with a turn/end."""
    end = max(i for i, e in enumerate(events[:count]) if e.type == "turn/end")
    return list(events[: end + 1])


def realistic_events(count: int) -> list[dshpy.SessionEvent]:
    """About ``count`` events of complete multi-step tool turns (never cut inside a turn)."""
    from dshpy.testing.builders import TurnScript

    session = dshpy.Session.new(cwd="/bench")
    script = TurnScript(session)
    while len(session.events) < count:
        script.turn(steps=3, tools_per_step=2)
    return list(session.events)
