"""A projection that fails on an accepted event never makes the session unable to flush or close.

The projection cache is checkpointed from the flush that made a turn durable (and on
close); if folding or dumping a projection raised there, ``flush()`` reported a failure
for events already stored, and every retry failed the same way.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import dshpy
from dshpy.projections.registry import ProjectionRegistry
from dshpy.projections.runner import attach
from dshpy.storage.projection_cache import CHECKPOINT_EVENTS


class Count(dshpy.ProjectionState):
    seen: int = 0


def _explode(state: Count, event: dshpy.SessionEvent) -> Count:
    if event.data.get("explode"):
        raise RuntimeError("this projection cannot handle that event")
    return Count(seen=state.seen + 1)


FRAGILE = dshpy.ProjectionDefinition(
    key="fragile", state_version=1, state_schema=Count, init=Count, apply=_explode, types=frozenset({"plugin:x/y"})
)


@pytest.mark.parametrize("url", ["memory:", "sqlite:///{tmp}/s.db", "jsonl:///{tmp}/root"])
def test_a_failing_projection_does_not_fail_flush_or_close(tmp_path: Path, url: str) -> None:
    store = dshpy.open_store(url.format(tmp=tmp_path))
    session = store.create(cwd="/srv/app")
    session.close()
    session = store.open(session.id)
    attach(session, registry=ProjectionRegistry([FRAGILE]))
    session.append("turn/start", {"turn": 1})
    session.append("plugin:x/y", {"explode": True})
    for index in range(CHECKPOINT_EVENTS):  # enough for the flush at turn/end to checkpoint the cache
        session.append("plugin:x/y", {"index": index})
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    assert session.flush() == CHECKPOINT_EVENTS + 3
    assert session.pending_count == 0
    session.append("plugin:x/y", {"after": True})
    session.close()
    assert store.stat(session.id).event_count == CHECKPOINT_EVENTS + 4
    store.close()
