"""The seed's ``fork(source: Session | SessionId, boundary?, childSessionId?)`` and the ``delegationDepth`` limit."""

from __future__ import annotations

import pytest

import dshpy
from dshpy.errors import DelegationDepthError, ForkError, StoreError
from dshpy.testing.builders import TurnScript

BACKENDS = ("memory:", "sqlite:///{tmp}/s.db", "jsonl:///{tmp}/root")


@pytest.fixture(params=BACKENDS, ids=lambda url: url.split(":", 1)[0])
def store(request, tmp_path):
    with dshpy.open_store(request.param.format(tmp=tmp_path)) as opened:
        yield opened


def test_a_live_session_forks_with_its_pending_events_flushed_first_and_a_positional_child_id(store):
    parent = store.create()
    first = TurnScript(parent).turn("first")
    TurnScript(parent).turn("second")  # nothing flushed yet: all of it is pending in memory
    assert parent.pending_count == len(parent)
    child = store.fork(parent, None, "kid")  # the seed's positional childSessionId
    assert child.id == "kid"
    assert child.header.parent_session == parent.id
    assert [e.to_wire() for e in child.events[: len(parent)]] == [e.to_wire() for e in parent.events]
    assert child.events[-1].type == "session/end-seed"
    assert parent.pending_count == 0
    assert [e.seq for e in store.read(parent.id)] == list(range(len(parent)))
    middle = store.fork(parent, first[-1].seq, "kid-2")  # a boundary inside the prefix: the first turn's end
    assert middle.inherited_event_count == first[-1].seq + 1
    child.close()
    middle.close()
    parent.close()


def test_a_boundary_among_events_that_cannot_be_flushed_is_refused_clearly(store):
    live = store.create(session_id="p")
    TurnScript(live).turn("first")
    live.flush()
    durable = len(live)
    TurnScript(live).turn("second")  # pending in memory
    copy = dshpy.Session(live.header, live.events, flushed=durable, read_only=True)  # cannot flush them
    with pytest.raises(ForkError, match=r"holds only its events 0\.\.\d+, the rest are pending") as refused:
        store.fork(copy, len(copy) - 1, "never")
    assert refused.value.code == "INVALID_BOUNDARY"
    assert not store.exists("never")
    assert len(list(store.read("p"))) == durable  # nothing written on the way
    ok = store.fork(copy, durable - 1, "fine")  # a boundary among the flushed events is fine
    assert ok.inherited_event_count == durable
    ok.close()
    live.close()


def test_a_session_from_elsewhere_is_not_found():
    store = dshpy.open_store("memory:")
    outsider = dshpy.Session.new(session_id="outsider")
    TurnScript(outsider).turn()
    with pytest.raises(ForkError) as refused:
        store.fork(outsider)
    assert refused.value.code == "SESSION_NOT_FOUND"


def test_sub_agent_forks_go_one_level_deeper_until_the_configured_maximum(tmp_path):
    store = dshpy.open_store(f"sqlite:///{tmp_path}/d.db?max_delegation_depth=2")
    assert store.max_delegation_depth == 2
    root = store.create(session_id="root")
    TurnScript(root).turn()
    one = store.fork(root, None, "one", origin="subagent")
    two = store.fork(one, None, "two", origin="subagent")
    assert (one.header.delegation_depth, one.header.origin) == (1, "subagent")
    assert two.header.delegation_depth == 2
    assert store.stat("two").id == "two"
    with pytest.raises(
        DelegationDepthError, match="delegation depth 3, deeper than this store's max_delegation_depth 2"
    ) as refused:
        store.fork(two, None, "three", origin="subagent")
    assert (refused.value.code, refused.value.depth, refused.value.maximum) == ("DELEGATION_DEPTH_EXCEEDED", 3, 2)
    assert isinstance(refused.value, ForkError)
    assert not store.exists("three")
    plain = store.fork(two, None, "explore")  # a fork that is no delegation keeps depth 0
    assert (plain.header.delegation_depth, plain.header.origin) == (0, None)
    with pytest.raises(DelegationDepthError):
        store.create(session_id="deep", origin="subagent", delegation_depth=3)
    assert not store.exists("deep")
    store.max_delegation_depth = 3
    store.fork(two, None, "three", origin="subagent").close()
    for session in (root, one, two, plain):
        session.close()
    reopened = dshpy.open_store(f"sqlite:///{tmp_path}/d.db")
    assert reopened.inspect("three").header.delegation_depth == 3  # the header keeps it
    assert reopened.max_delegation_depth == dshpy.storage.delegation.DEFAULT_MAX_DELEGATION_DEPTH
    with pytest.raises(ValueError, match="non-negative integer"):
        reopened.max_delegation_depth = -1
    with pytest.raises(StoreError, match="max_delegation_depth must be a non-negative integer"):
        dshpy.open_store("memory:?max_delegation_depth=deep")
    reopened.close()
    store.close()
