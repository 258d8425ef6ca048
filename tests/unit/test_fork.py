"""Fork (DESIGN §5, dataplane §3, §12.3, dsh-v4 §4.2): plan_fork and store.fork on the memory store."""

import pytest

import dshpy
from dshpy.core.events import encode_event
from dshpy.testing.builders import TurnScript, assistant_data, user_message

# -- helpers ---------------------------------------------------------------------------------------------------------


def make_store():
    return dshpy.open_store("memory:")


def parent_with(store, *, turns=1, open_turn=False, cwd="/srv/app", session_id="parent"):
    """A flushed parent: ``turns`` closed turns, then optionally an open turn with a pending call."""
    s = store.create(session_id=session_id, cwd=cwd)
    script = TurnScript(s)
    for _ in range(turns):
        script.turn(steps=2)
    if open_turn:
        turn = s.next_turn
        s.append("turn/start", {"turn": turn})
        s.append("step/start", {"turn": turn, "step": 1})
        s.append("user/message", user_message("go on"), surface_op="append")
        calls = [("c1", "run", "{}"), ("c2", "run", "{}")]
        s.append("assistant/message", assistant_data(turn, 1, "", tool_calls=calls), surface_op="append")
        s.append("tool/call", {"turn": turn, "step": 1, "callId": "c2", "name": "run", "arguments": "{}"})
    s.flush()
    return s


def stored_bytes(store, session_id):
    return [encode_event(e) for e in store.read(session_id)]


def fork_error(code, call):
    with pytest.raises(dshpy.ForkError) as info:
        call()
    assert info.value.code == code, str(info.value)
    return info.value


def index_of(events, kind, start=0):
    return next(e.seq for e in events[start:] if e.type == kind)


# -- plan_fork ---------------------------------------------------------------------------------------------------------


def test_plan_fork_at_a_closed_turn():
    store = make_store()
    parent = parent_with(store)
    events = list(parent.events)
    plan = dshpy.plan_fork(events)
    assert isinstance(plan, dshpy.ForkPlan)
    assert plan.boundary == events[-1].seq
    assert plan.inherited_count == plan.inherited_event_count == len(events)
    (marker,) = plan.own
    assert marker.to_wire() == {
        "type": "session/end-seed",
        "seq": len(events),
        "time": events[-1].time,
        "data": {"inherited": True},
    }


def test_plan_fork_of_an_empty_log():
    plan = dshpy.plan_fork([], now_ms=42)
    assert plan.boundary is None
    assert plan.inherited_event_count == 0
    assert [e.to_wire() for e in plan.own] == [
        {"type": "session/end-seed", "seq": 0, "time": 42, "data": {"inherited": True}}
    ]


@pytest.mark.parametrize("boundary", [-1, 1.5, 3.0, True, False, "3", [3], 2**53])
def test_plan_fork_refuses_non_seq_boundaries(boundary):
    store = make_store()
    events = list(parent_with(store).events)
    error = fork_error("INVALID_BOUNDARY", lambda: dshpy.plan_fork(events, boundary))
    assert "non-negative safe integer" in str(error)


def test_plan_fork_refuses_a_boundary_past_the_end():
    store = make_store()
    events = list(parent_with(store).events)
    last = events[-1].seq
    error = fork_error("INVALID_BOUNDARY", lambda: dshpy.plan_fork(events, last + 1, session_id="parent"))
    assert f"(last seq: {last})" in str(error)
    error = fork_error("INVALID_BOUNDARY", lambda: dshpy.plan_fork([], 0))
    assert "(last seq: none)" in str(error)


def test_plan_fork_refuses_a_non_contiguous_log():
    store = make_store()
    events = list(parent_with(store).events)
    del events[2]
    error = fork_error("INVALID_BOUNDARY", lambda: dshpy.plan_fork(events, 5))
    assert "contiguous" in str(error)


# -- store.fork: errors -----------------------------------------------------------------------------------------------


def test_fork_of_unknown_session():
    store = make_store()
    fork_error("SESSION_NOT_FOUND", lambda: store.fork("nobody", child_id="kid"))
    assert not store.exists("kid")
    assert store.list() == []


def test_fork_into_an_existing_id_is_refused_first():
    store = make_store()
    parent = parent_with(store)
    store.create(session_id="taken")
    before = stored_bytes(store, "taken")
    fork_error("SESSION_ALREADY_EXISTS", lambda: store.fork(parent.id, child_id="taken"))
    # checked before the boundary and before the parent's existence
    fork_error("SESSION_ALREADY_EXISTS", lambda: store.fork(parent.id, boundary=-1, child_id="taken"))
    fork_error("SESSION_ALREADY_EXISTS", lambda: store.fork(parent.id, boundary=10_000, child_id="taken"))
    fork_error("SESSION_ALREADY_EXISTS", lambda: store.fork("nobody", child_id="taken"))
    fork_error("SESSION_ALREADY_EXISTS", lambda: store.fork(parent.id, child_id=parent.id))
    assert stored_bytes(store, "taken") == before
    assert store.stat("taken").parent_session is None


@pytest.mark.parametrize("boundary", [-1, 1.5, True])
def test_fork_refuses_invalid_boundaries(boundary):
    store = make_store()
    parent = parent_with(store)
    error = fork_error("INVALID_BOUNDARY", lambda: store.fork(parent.id, boundary=boundary, child_id="kid"))
    assert "non-negative safe integer" in str(error)
    assert not store.exists("kid")


def test_fork_refuses_a_boundary_past_the_end():
    store = make_store()
    parent = parent_with(store)
    last = parent.events[-1].seq
    error = fork_error("INVALID_BOUNDARY", lambda: store.fork(parent.id, boundary=last + 1, child_id="kid"))
    assert f"(last seq: {last})" in str(error)
    empty = store.create(session_id="empty")
    error = fork_error("INVALID_BOUNDARY", lambda: store.fork(empty.id, boundary=0, child_id="kid"))
    assert "(last seq: none)" in str(error)
    assert not store.exists("kid")


def test_fork_inside_an_open_turn_is_refused():
    store = make_store()
    parent = parent_with(store, open_turn=True)
    events = list(parent.events)
    turn_start = [e.seq for e in events if e.type == "turn/start"][-1]
    ids_before = sorted(info.id for info in store.list())
    for boundary in range(turn_start, events[-1].seq + 1):
        error = fork_error("OPEN_TURN", lambda b=boundary: store.fork(parent.id, boundary=b, child_id="kid"))
        assert "ends inside open turn 2" in str(error)
    # the default boundary is the last seq, which is inside the open turn too
    fork_error("OPEN_TURN", lambda: store.fork(parent.id, child_id="kid"))
    assert sorted(info.id for info in store.list()) == ids_before


def test_fork_errors_leave_the_parent_untouched():
    store = make_store()
    parent = parent_with(store, open_turn=True)
    before = stored_bytes(store, parent.id)
    for kwargs in ({"boundary": -1}, {"boundary": 10_000}, {}):
        with pytest.raises(dshpy.ForkError):
            store.fork(parent.id, child_id="kid", **kwargs)
    assert stored_bytes(store, parent.id) == before
    assert store.stat(parent.id).forks == ()


# -- store.fork: the child --------------------------------------------------------------------------------------------


def test_fork_at_default_boundary_inherits_everything():
    store = make_store()
    parent = parent_with(store, turns=2)
    parent_events = list(store.read(parent.id))
    child = store.fork(parent.id, child_id="kid")
    assert isinstance(child, dshpy.Session)
    n = len(parent_events)
    assert list(child.events[:n]) == parent_events
    assert child.events[n].type == "session/end-seed"
    assert dict(child.events[n].data) == {"inherited": True}
    assert child.events[n].time == parent_events[-1].time
    assert len(child.events) == n + 1
    assert child.inherited_event_count == n
    assert list(child.derive_messages()) == list(parent.derive_messages())
    assert list(store.read("kid")) == list(child.events)


def test_child_header_records_lineage():
    store = make_store()
    parent = parent_with(store, cwd="/work/project")
    child = store.fork(parent.id, child_id="kid")
    header = child.header
    assert (header.id, header.parent_session, header.is_seeded, header.cwd) == ("kid", parent.id, True, "/work/project")
    assert header.version == dshpy.FORMAT_VERSION == 4
    assert header.origin is None
    assert header.delegation_depth == 0
    assert store.stat("kid").header == header
    assert store.stat(parent.id).forks == ("kid",)
    assert parent.header.is_seeded is False


def test_child_without_parent_cwd_has_none():
    store = make_store()
    parent = parent_with(store, cwd=None)
    assert store.fork(parent.id).header.cwd is None


def test_fork_mints_a_fresh_child_id():
    store = make_store()
    parent = parent_with(store)
    first = store.fork(parent.id)
    second = store.fork(parent.id)
    assert first.id != second.id
    assert first.id.startswith("session-")
    assert store.stat(parent.id).forks == tuple(sorted([first.id, second.id]))


def test_fork_at_an_earlier_boundary_inherits_only_the_prefix():
    store = make_store()
    parent = parent_with(store, turns=2, open_turn=True)
    events = list(parent.events)
    first_end = index_of(events, "turn/end")
    child = store.fork(parent.id, boundary=first_end, child_id="kid")
    assert list(child.events[: first_end + 1]) == events[: first_end + 1]
    assert [e.type for e in child.events[first_end + 1 :]] == ["session/end-seed"]
    assert child.inherited_event_count == first_end + 1
    assert child.next_turn == 2
    assert all(m.seq <= first_end for m in child.derive_messages())


def test_fork_on_a_closed_turn_includes_trailing_log_only_events():
    store = make_store()
    s = store.create(session_id="parent")
    TurnScript(s).turn()
    s.append("session/title", {"title": "T", "messageSeqs": [], "source": {"kind": "user"}})
    s.append("todo/write", {"todos": [{"content": "x", "status": "pending"}]})
    s.append("plugin:dshpy/note", {"n": 1})
    s.append("compaction/start", {"compactionId": "k1", "turn": None})  # a plugin bracket between turns
    s.flush()
    child = store.fork(s.id, child_id="kid")
    n = len(s.events)
    assert [e.type for e in child.events[n - 4 :]] == [
        "session/title",
        "todo/write",
        "plugin:dshpy/note",
        "compaction/start",
        "session/end-seed",
    ]
    # the inherited bracket is stale behind the marker: the child may start a turn
    child.append("turn/start", {"turn": 2})
    assert [e.type for e in store.read(s.id)][-1] == "compaction/start"


def test_fork_of_an_empty_session():
    store = make_store()
    empty = store.create(session_id="empty", cwd="/srv/app")
    child = store.fork(empty.id, child_id="kid")
    assert [(e.type, e.seq, dict(e.data)) for e in child.events] == [("session/end-seed", 0, {"inherited": True})]
    assert child.inherited_event_count == 0
    assert (child.header.is_seeded, child.header.parent_session, child.header.cwd) == (True, "empty", "/srv/app")
    assert child.next_turn == 1
    assert list(store.read(empty.id)) == []


def test_child_continues_its_own_turn_numbering():
    store = make_store()
    parent = parent_with(store, turns=3)
    child = store.fork(parent.id, child_id="kid")
    assert child.next_turn == 4
    with pytest.raises(dshpy.InvariantError) as info:
        child.append("turn/start", {"turn": 1})
    assert info.value.rule == "turn-numbering"
    TurnScript(child).turn(prompt="branch")
    child.flush()
    assert [e.data["turn"] for e in store.read("kid") if e.type == "turn/start"] == [1, 2, 3, 4]


def test_parent_is_untouched_by_the_fork_and_the_childs_appends():
    store = make_store()
    parent = parent_with(store, turns=2)
    before = stored_bytes(store, parent.id)
    child = store.fork(parent.id, child_id="kid")
    TurnScript(child).turn(prompt="branch")
    child.flush()
    assert stored_bytes(store, parent.id) == before
    assert "session/end-seed" not in [e.type for e in store.read(parent.id)]
    assert store.stat(parent.id).event_count == len(before)
    # and the parent's later appends do not leak into the child
    TurnScript(parent).turn(prompt="parent goes on")
    parent.flush()
    child_events = list(store.read("kid"))
    assert child_events == list(child.events)
    assert not any(e.type == "user/message" and e.data["content"][0]["text"] == "parent goes on" for e in child_events)


# -- close_open_turn --------------------------------------------------------------------------------------------------


def test_close_open_turn_appends_forked_closers_after_the_marker():
    store = make_store()
    parent = parent_with(store, open_turn=True)
    events = list(parent.events)
    last = events[-1]
    call_seq = last.seq  # the tool/call of c2
    child = store.fork(parent.id, child_id="kid", close_open_turn=True)
    own = list(child.events[len(events) :])
    assert [e.type for e in own] == ["session/end-seed", "tool/result", "tool/result", "step/end", "turn/end"]
    assert [e.seq for e in own] == list(range(len(events), len(events) + 5))
    assert {e.time for e in own} == {last.time}
    assert dict(own[0].data) == {"inherited": True}
    c1, c2 = own[1].data, own[2].data
    assert c1["message"]["id"] == f"forked-tool-result-c1-{own[1].seq}"
    assert c1["error"] == {"name": "ToolNotStartedError", "code": "TOOL_NOT_STARTED"}
    assert own[1].source_event_seqs is None
    assert c2["message"]["id"] == f"forked-tool-result-c2-{own[2].seq}"
    assert c2["error"] == {"name": "ToolOutcomeUnknownError", "code": "TOOL_OUTCOME_UNKNOWN"}
    assert own[2].source_event_seqs == (call_seq,)
    assert own[-1].data["reason"] == {"kind": "forked"}
    assert child.inherited_event_count == len(events)
    assert child.open_turn is None
    assert child.next_turn == 3
    dshpy.validate(child.events)
    assert list(store.read("kid")) == list(child.events)
    # the parent keeps its open turn
    assert list(store.read(parent.id)) == events


def test_close_open_turn_at_an_inner_boundary():
    store = make_store()
    parent = parent_with(store, open_turn=True)
    events = list(parent.events)
    step_start = [e.seq for e in events if e.type == "step/start"][-1]
    child = store.fork(parent.id, boundary=step_start, child_id="kid", close_open_turn=True)
    assert [e.type for e in child.events[step_start + 1 :]] == ["session/end-seed", "step/end", "turn/end"]
    dshpy.validate(child.events)


def test_close_open_turn_is_a_no_op_on_a_closed_boundary():
    store = make_store()
    parent = parent_with(store)
    child = store.fork(parent.id, child_id="kid", close_open_turn=True)
    assert [e.type for e in child.events[len(parent.events) :]] == ["session/end-seed"]


def test_plan_fork_with_close_open_turn_matches_the_store():
    store = make_store()
    parent = parent_with(store, open_turn=True)
    plan = dshpy.plan_fork(list(parent.events), close_open_turn=True)
    child = store.fork(parent.id, child_id="kid", close_open_turn=True)
    assert list(child.events[plan.inherited_count :]) == list(plan.own)
