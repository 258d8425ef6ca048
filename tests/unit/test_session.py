"""Session.append basics (DESIGN §3, dataplane §2.1–§2.5, dsh-v4 §2.2): stamping, lossless JSON, vocabulary, shapes."""

import copy
import decimal
import itertools
import math

import pytest

import dshpy
from dshpy.core.events import event_from_parts
from dshpy.testing.builders import TurnScript, assistant_data, system_data, tool_result_data, user_message

# -- helpers ---------------------------------------------------------------------------------------------------------


def new_session(start=1_000, step=5):
    clock = itertools.count(start, step)
    return dshpy.Session.new(clock=lambda: next(clock))


def state(s):
    return list(s.events), list(s.derive_messages()), s.pending_count, s.surface_nodes, s.request_header()


def refused(s, error_type, call, match=None):
    """Run ``call`` (an append) expecting ``error_type``; assert the session did not change."""
    before = state(s)
    with pytest.raises(error_type, match=match) as info:
        call()
    assert state(s) == before
    return info.value


def with_history(s):
    """A closed turn plus a user message: something to lose if a refusal leaked."""
    TurnScript(s).turn(system="be brief")
    s.append("user/message", user_message("next"), surface_op="append")
    s.derive_messages()
    return s


def setup_fresh(s):
    return s


def setup_turn(s):
    s.append("turn/start", {"turn": 1})
    return s


def setup_step(s):
    setup_turn(s)
    s.append("step/start", {"turn": 1, "step": 1})
    return s


def setup_call(s):
    setup_step(s)
    s.append("assistant/message", assistant_data(1, 1, "", tool_calls=[("c1", "run", "{}")]), surface_op="append")
    s.append("tool/call", {"turn": 1, "step": 1, "callId": "c1", "name": "run", "arguments": "{}"})
    return s


# -- seq and time -----------------------------------------------------------------------------------------------------


def test_append_stamps_contiguous_seqs_and_clock_times():
    s = new_session(start=1_000, step=5)
    assert s.header.created_at == 1_000
    assert (len(s), s.next_seq, list(s.events)) == (0, 0, [])
    first = s.append("turn/start", {"turn": 1})
    second = s.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    third = s.append("user/message", user_message("hi"), surface_op="append")
    assert [(e.seq, e.time) for e in (first, second, third)] == [(0, 1_005), (1, 1_010), (2, 1_015)]
    assert list(s.events) == [first, second, third]
    assert (len(s), s.next_seq, s.pending_count) == (3, 3, 3)


def test_appended_event_carries_its_envelope():
    s = new_session()
    event = s.append("user/message", user_message("hi", message_id="m1"), surface_op="append")
    assert isinstance(event, dshpy.SessionEvent)
    assert event.type == "user/message"
    assert event.surface_op == "append"
    assert event.source_event_seqs is None
    assert event.ignorable is False
    assert event.is_surface
    assert event.to_wire() == {
        "type": "user/message",
        "seq": 0,
        "time": event.time,
        "data": {"id": "m1", "role": "user", "content": [{"type": "text", "text": "hi"}], "source": {"kind": "user"}},
        "surfaceOp": "append",
    }


def test_refused_append_does_not_consume_a_seq_or_a_clock_tick():
    s = new_session(start=0, step=1)
    s.append("turn/start", {"turn": 1})
    with pytest.raises(dshpy.EventError):
        s.append("turn/start", {"turn": 2})
    event = s.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    assert event.seq == 1


def test_detached_session_flush_clears_pending():
    s = new_session()
    s.append("turn/start", {"turn": 1})
    assert s.pending_count == 1
    assert s.flush() == 0
    assert s.pending_count == 0
    s.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    assert s.pending_count == 1


def test_store_session_flushes_pending_events():
    store = dshpy.open_store("memory:")
    s = store.create(session_id="s1")
    TurnScript(s).turn()
    pending = s.pending_count
    assert pending == len(s.events) > 0
    assert s.flush() == pending
    assert s.pending_count == 0
    assert list(store.read("s1")) == list(s.events)


@pytest.mark.parametrize("kind", ["", None, 3])
def test_event_type_must_be_a_non_empty_string(kind):
    s = new_session()
    refused(s, dshpy.EventError, lambda: s.append(kind, {}))


# -- lossless JSON ----------------------------------------------------------------------------------------------------


class Thing:
    pass


def _cyclic_dict():
    value = {"a": 1}
    value["self"] = value
    return value


def _cyclic_list():
    value = [1]
    value.append(value)
    return value


NOT_JSON = {
    "nan": float("nan"),
    "inf": math.inf,
    "-inf": -math.inf,
    "negative zero": -0.0,
    "int too big": 2**53,
    "int too small": -(2**53),
    "huge int": 10**30,
    "int key": {1: "a"},
    "none key": {None: "a"},
    "tuple key": {("a",): 1},
    "set": {1, 2},
    "frozenset": frozenset({"a"}),
    "object": Thing(),
    "bytes": b"abc",
    "decimal": decimal.Decimal("1.5"),
    "complex": 1j,
    "function": len,
    "nested nan": {"a": [1, {"b": float("nan")}]},
    "cycle dict": _cyclic_dict(),
    "cycle list": _cyclic_list(),
}


@pytest.mark.parametrize("label", sorted(NOT_JSON))
def test_non_lossless_json_is_refused_naming_the_event_type(label):
    s = with_history(new_session())
    data = {"todos": [], "extra": NOT_JSON[label]}
    error = refused(s, dshpy.EventError, lambda: s.append("todo/write", data))
    assert 'session event "todo/write" carries non-JSON-serializable data' in str(error)
    assert "$.extra" in str(error)
    assert error.event_type == "todo/write"
    assert error.seq == len(s.events)


@pytest.mark.parametrize(
    "value",
    [2**53 - 1, -(2**53 - 1), 0.0, 1.5, -2.25, 1e308, "", "ünïcode ✓", None, True, False, [], {}, {"a": {"b": [1]}}],
)
def test_lossless_values_are_kept(value):
    s = new_session()
    event = s.append("todo/write", {"todos": [], "extra": value})
    assert event.data["extra"] == value
    assert type(event.data["extra"]) is type(dshpy.freeze_json(value))
    if isinstance(value, float):
        assert math.copysign(1.0, event.data["extra"]) == math.copysign(1.0, value)


def test_tuples_are_stored_as_lists_and_shared_children_are_fine():
    s = new_session()
    shared = {"content": "x", "status": "pending"}
    event = s.append("todo/write", {"todos": (shared, shared)})
    assert event.data["todos"] == [shared, shared]
    assert isinstance(event.data["todos"], dshpy.FrozenList)


def test_caller_mutation_after_append_does_not_reach_the_log():
    s = new_session()
    data = {"todos": [{"content": "x", "status": "pending"}]}
    event = s.append("todo/write", data)
    data["todos"][0]["status"] = "completed"
    data["todos"].append({"content": "y", "status": "pending"})
    assert event.data == {"todos": [{"content": "x", "status": "pending"}]}
    assert s.events[0].data["todos"][0]["status"] == "pending"


def test_caller_built_frozen_containers_are_still_checked():
    s = new_session()
    with pytest.raises(dshpy.EventError, match="non-JSON"):
        s.append("todo/write", dshpy.FrozenDict({"todos": [], "extra": float("nan")}))


def test_append_events_checks_lossless_json():
    s = new_session()
    event = dshpy.SessionEvent("todo/write", 0, 1, {"todos": [], "extra": float("nan")})
    with pytest.raises(dshpy.EventError):
        s.append_events([event])


# -- rejected appends change nothing ----------------------------------------------------------------------------------

REJECTIONS = {
    "not json": lambda s: s.append("todo/write", {"todos": [], "x": float("nan")}),
    "unknown type": lambda s: s.append("future/event", {}),
    "bad plugin type": lambda s: s.append("plugin:Bad Name", {}),
    "bad data": lambda s: s.append("turn/start", {"turn": "2"}),
    "missing surfaceOp": lambda s: s.append("user/message", user_message("x")),
    "bad surfaceOp": lambda s: s.append("user/message", user_message("x"), surface_op="prepend"),
    "bad sources": lambda s: s.append("user/message", user_message("x"), surface_op="append", source_event_seqs=[99]),
    "bad replace": lambda s: s.append(
        "user/message", user_message("x"), surface_op={"op": "replace", "startSeq": 0, "endSeq": 1}
    ),
    "invariant": lambda s: s.append("turn/start", {"turn": 7}),
    "surface on non-surface": lambda s: s.append("todo/write", {"todos": []}, surface_op="append"),
    "ignorable surface type": lambda s: s.append(
        "user/message", user_message("x"), surface_op="append", ignorable=True
    ),
    "inherited end-seed": lambda s: s.append("session/end-seed", {"inherited": True}),
    "image/offload": lambda s: s.append("image/offload", {}),
}


@pytest.mark.parametrize("label", sorted(REJECTIONS))
def test_rejected_append_leaves_the_session_unchanged(label):
    s = with_history(new_session())
    messages = s.derive_messages()
    error = refused(s, dshpy.EventError, lambda: REJECTIONS[label](s))
    assert isinstance(error, dshpy.DshError)
    assert s.derive_messages() == messages
    # the session still works afterwards
    s.append("user/message", user_message("after"), surface_op="append")
    assert s.derive_messages()[-1].text == "after"


# -- vocabulary: unknown, ignorable, plugin records -------------------------------------------------------------------


def test_unknown_type_is_refused_unless_ignorable():
    s = new_session()
    error = refused(s, dshpy.EventError, lambda: s.append("future/event", {"x": 1}))
    assert "future/event" in str(error)
    event = s.append("future/event", {"x": 1}, ignorable=True)
    assert event.ignorable is True
    assert event.to_wire() == {
        "type": "future/event",
        "seq": 0,
        "time": event.time,
        "data": {"x": 1},
        "ignorable": True,
    }
    assert s.surface_nodes == ()
    assert list(s.derive_messages()) == []


def test_known_types_are_not_ignorable_by_default():
    s = new_session()
    assert s.append("todo/write", {"todos": []}).ignorable is False
    assert "ignorable" not in s.events[0].to_wire()


@pytest.mark.parametrize("ignorable", [False, True])
def test_plugin_records_are_always_ignorable(ignorable):
    s = new_session()
    event = s.append("plugin:dshpy/usage", {"tokens": 12}, ignorable=ignorable)
    assert event.ignorable is True
    assert event.to_wire()["ignorable"] is True
    assert event.surface_op is None
    assert not event.is_surface
    assert s.surface_nodes == ()
    assert list(s.derive_messages()) == []


def test_plugin_records_do_not_touch_the_lifecycle():
    s = new_session()
    s.append("plugin:dshpy/note", {"turn": 5, "step": 9})
    s.append("turn/start", {"turn": 1})
    s.append("plugin:dshpy/note", {})
    assert (s.open_turn, s.next_turn) == (1, 2)


@pytest.mark.parametrize(
    "kind",
    ["plugin:", "plugin:Dshpy/x", "plugin:dshpy/", "plugin:/x", "plugin:dshpy x", "plugin:dshpy//x", "plugin:-x"],
)
def test_malformed_plugin_types_are_refused(kind):
    s = new_session()
    refused(s, dshpy.EventError, lambda: s.append(kind, {}), match="plugin")


@pytest.mark.parametrize("kind", ["plugin:dshpy", "plugin:dshpy/x", "plugin:my-org.tools/sub_name/v2"])
def test_well_formed_plugin_types_are_accepted(kind):
    s = new_session()
    assert s.append(kind, None).type == kind


def test_plugin_records_refuse_surface_op():
    s = new_session()
    refused(s, dshpy.SurfaceError, lambda: s.append("plugin:dshpy/x", {}, surface_op="append"))


def test_plugin_records_refuse_source_event_seqs():
    s = new_session()
    s.append("user/message", user_message("a"), surface_op="append")
    refused(s, dshpy.SurfaceError, lambda: s.append("plugin:dshpy/x", {}, source_event_seqs=[0]))


# -- data shapes of known types ---------------------------------------------------------------------------------------


def _dev(**extra):
    message = {"id": "d1", "role": "developer", "content": [], "source": {"kind": "runtime-context"}}
    return {"turn": 1, "step": 1, "message": message, **extra}


def _header(**header):
    return {"header": {"config": {"provider": "deepseek", "model": "deepseek-chat"}, **header}, "reason": "initial"}


SHAPES = {
    # type: (setup, good data, surfaceOp)
    "turn/start": (setup_fresh, {"turn": 1}, None),
    "turn/end": (setup_turn, {"turn": 1, "reason": {"kind": "completed"}}, None),
    "step/start": (setup_turn, {"turn": 1, "step": 1}, None),
    "user/message": (setup_fresh, user_message("hi"), "append"),
    "system/message": (setup_step, system_data(1, 1, "sys"), "append"),
    "developer/message": (setup_step, _dev(), "append"),
    "assistant/message": (setup_step, assistant_data(1, 1, "hello"), "append"),
    "tool/call": (setup_step, None, None),  # filled in below
    "tool/result": (setup_call, tool_result_data(1, 1, "c1", "out"), "append"),
    "request/header": (setup_turn, _header(), None),
    "request/context": (setup_turn, {"provider": "deepseek", "model": "deepseek-chat"}, None),
    "todo/write": (setup_fresh, {"todos": [{"content": "x", "status": "pending"}]}, None),
    "session/title": (setup_fresh, {"title": "T", "messageSeqs": [], "source": {"kind": "user"}}, None),
    "compaction/start": (setup_fresh, {"compactionId": "k1", "turn": None}, None),
}
del SHAPES["tool/call"]


def _set(path, value):
    def change(data):
        *parents, last = path
        target = data
        for key in parents:
            target = target[key]
        target[last] = value

    return change


def _drop(path):
    def change(data):
        *parents, last = path
        target = data
        for key in parents:
            target = target[key]
        del target[last]

    return change


MALFORMED = [
    ("turn/start", "no turn", _drop(["turn"])),
    ("turn/start", "string turn", _set(["turn"], "1")),
    ("turn/start", "float turn", _set(["turn"], 1.0)),
    ("turn/start", "bool turn", _set(["turn"], True)),
    ("turn/end", "unknown reason", _set(["reason", "kind"], "done")),
    ("turn/end", "error without error", _set(["reason", "kind"], "error")),
    ("turn/end", "no reason", _drop(["reason"])),
    ("step/start", "no step", _drop(["step"])),
    ("user/message", "plugin source", _set(["source", "kind"], "plugin")),
    ("user/message", "empty source kind", _set(["source", "kind"], "")),
    ("user/message", "no source", _drop(["source"])),
    ("user/message", "empty id", _set(["id"], "")),
    ("user/message", "wrong role", _set(["role"], "assistant")),
    ("user/message", "content not a list", _set(["content"], "hi")),
    ("user/message", "tool-result wrapper", _set(["content"], [{"type": "tool-result", "toolCallId": "c"}])),
    ("user/message", "tool-addition block", _set(["content"], [{"type": "tool-addition", "toolName": "f"}])),
    ("user/message", "text block without text", _set(["content"], [{"type": "text"}])),
    ("system/message", "wrong source", _set(["message", "source", "kind"], "user")),
    ("system/message", "plugin source", _set(["message", "source", "kind"], "plugin")),
    ("developer/message", "headerSeq without additions", _set(["headerSeq"], 0)),
    (
        "developer/message",
        "additions without headerSeq",
        _set(["message", "content"], [{"type": "tool-addition", "toolName": "f"}]),
    ),
    ("assistant/message", "user source", _set(["message", "source"], {"kind": "user"})),
    ("assistant/message", "no provider", _drop(["message", "source", "provider"])),
    ("assistant/message", "no stream", _drop(["stream"])),
    ("tool/result", "toolCallId differs", _set(["message", "toolCallId"], "c2")),
    ("tool/result", "callId differs", _set(["message", "source", "callId"], "c2")),
    ("tool/result", "source kind", _set(["message", "source", "kind"], "user")),
    ("tool/result", "plugin source", _set(["message", "source", "kind"], "plugin")),
    ("tool/result", "role", _set(["message", "role"], "user")),
    ("tool/result", "error without isError", _set(["error"], {"name": "E", "code": "X"})),
    ("tool/result", "wrapper block", _set(["message", "content"], [{"type": "tool-result", "toolCallId": "c1"}])),
    ("request/header", "header.system", _set(["header", "system"], "you are helpful")),
    ("request/header", "empty system", _set(["header", "system"], "")),
    ("request/header", "empty tools", _set(["header", "tools"], [])),
    ("request/header", "empty adapterDefaults", _set(["header", "adapterDefaults"], {})),
    ("request/header", "no provider", _drop(["header", "config", "provider"])),
    ("request/header", "fallback reason", _set(["reason"], "fallback")),
    ("request/context", "no model", _drop(["model"])),
    ("todo/write", "unknown status", _set(["todos", 0, "status"], "done")),
    ("session/title", "messageSeqs not a list", _set(["messageSeqs"], 0)),
    ("compaction/start", "no compactionId", _drop(["compactionId"])),
]


@pytest.mark.parametrize("kind", sorted(SHAPES))
def test_well_formed_data_is_accepted(kind):
    setup, data, op = SHAPES[kind]
    s = setup(new_session())
    event = s.append(kind, copy.deepcopy(data), surface_op=op)
    assert event.data == data


@pytest.mark.parametrize(("kind", "label", "change"), MALFORMED, ids=[f"{k}:{label}" for k, label, _ in MALFORMED])
def test_malformed_data_is_refused(kind, label, change):
    setup, good, op = SHAPES[kind]
    s = setup(new_session())
    data = copy.deepcopy(good)
    change(data)
    error = refused(s, dshpy.EventError, lambda: s.append(kind, data, surface_op=op))
    # refused for its data, before any surface or lifecycle rule looked at it
    assert not isinstance(error, dshpy.SurfaceError | dshpy.InvariantError), error
    assert error.event_type == kind
    assert error.seq == len(s.events)


def test_inherited_end_seed_is_only_for_a_forks_starting_log():
    s = new_session()
    refused(s, dshpy.EventError, lambda: s.append("session/end-seed", {"inherited": True}), match="fork")
    marker = s.append("session/end-seed", {})
    assert marker.data == {}
    assert s.inherited_event_count == 0


# -- append_events ----------------------------------------------------------------------------------------------------


def test_append_events_keeps_times_and_appends_all():
    s = new_session()
    batch = [
        event_from_parts("turn/start", 0, 7, {"turn": 1}),
        event_from_parts("user/message", 1, 8, user_message("hi"), "append"),
        event_from_parts("turn/end", 2, 9, {"turn": 1, "reason": {"kind": "completed"}}),
    ]
    assert s.append_events(batch) == batch
    assert list(s.events) == batch
    assert [e.time for e in s.events] == [7, 8, 9]
    assert [m.text for m in s.derive_messages()] == ["hi"]
    assert s.pending_count == 3


@pytest.mark.parametrize(
    "bad",
    [
        event_from_parts("turn/start", 2, 0, {"turn": 2}),  # nesting
        event_from_parts("turn/start", 3, 0, {"turn": 1}),  # seq gap
        event_from_parts("turn/start", 2, 0, {"turn": "x"}),  # data
        event_from_parts("user/message", 2, 0, user_message("x")),  # no surfaceOp
        event_from_parts("session/end-seed", 2, 0, {"inherited": True}),  # only a fork's start may carry it
        dshpy.SessionEvent("future/event", 2, 0, {}),  # unknown, not ignorable
    ],
)
def test_append_events_is_all_or_nothing(bad):
    s = with_history(new_session())
    n = len(s.events)
    good = [
        event_from_parts("user/message", n, 1, user_message("one"), "append"),
        event_from_parts("turn/start", n + 1, 1, {"turn": 2}),
    ]
    bad = dshpy.SessionEvent(
        bad.type, bad.seq + n, bad.time, bad.data, bad.surface_op, bad.source_event_seqs, bad.ignorable
    )
    refused(s, dshpy.DshError, lambda: s.append_events([*good, bad]))
    assert s.open_turn is None
    assert s.append_events(good) == good
    assert s.open_turn == 2


def test_append_events_refuses_a_batch_that_does_not_start_at_the_next_seq():
    s = with_history(new_session())
    stale = event_from_parts("user/message", 0, 1, user_message("x"), "append")
    refused(s, dshpy.EventError, lambda: s.append_events([stale]), match="not contiguous")


# -- immutability -----------------------------------------------------------------------------------------------------

FROZEN_DICT_MUTATIONS = {
    "setitem": lambda d: d.__setitem__("k", 1),
    "delitem": lambda d: d.__delitem__("a"),
    "clear": lambda d: d.clear(),
    "pop": lambda d: d.pop("a"),
    "popitem": lambda d: d.popitem(),
    "setdefault": lambda d: d.setdefault("k", 1),
    "update": lambda d: d.update(k=1),
    "ior": lambda d: d.__ior__({"k": 1}),
}

FROZEN_LIST_MUTATIONS = {
    "setitem": lambda v: v.__setitem__(0, 1),
    "setslice": lambda v: v.__setitem__(slice(0, 1), [1]),
    "delitem": lambda v: v.__delitem__(0),
    "append": lambda v: v.append(1),
    "extend": lambda v: v.extend([1]),
    "insert": lambda v: v.insert(0, 1),
    "pop": lambda v: v.pop(),
    "remove": lambda v: v.remove(v[0]),
    "clear": lambda v: v.clear(),
    "reverse": lambda v: v.reverse(),
    "sort": lambda v: v.sort(),
    "iadd": lambda v: v.__iadd__([1]),
    "imul": lambda v: v.__imul__(2),
}


def _frozen_event():
    s = new_session()
    return s.append(
        "todo/write",
        {"a": {"b": 1}, "todos": [{"content": "x", "status": "pending"}, {"content": "y", "status": "pending"}]},
    )


@pytest.mark.parametrize("name", sorted(FROZEN_DICT_MUTATIONS))
def test_event_data_dicts_are_frozen(name):
    event = _frozen_event()
    before = dshpy.thaw(event.data)
    for target in (event.data, event.data["a"], event.data["todos"][0]):
        assert isinstance(target, dshpy.FrozenDict)
        with pytest.raises(TypeError):
            FROZEN_DICT_MUTATIONS[name](target)
    assert dshpy.thaw(event.data) == before


@pytest.mark.parametrize("name", sorted(FROZEN_LIST_MUTATIONS))
def test_event_data_lists_are_frozen(name):
    event = _frozen_event()
    before = dshpy.thaw(event.data)
    todos = event.data["todos"]
    assert isinstance(todos, dshpy.FrozenList)
    with pytest.raises(TypeError):
        FROZEN_LIST_MUTATIONS[name](todos)
    assert dshpy.thaw(event.data) == before


def test_frozen_values_stay_json_and_thaw_to_mutable_copies():
    event = _frozen_event()
    assert isinstance(event.data, dict)
    assert isinstance(event.data["todos"], list)
    plain = dshpy.thaw(event.data)
    assert type(plain) is dict
    assert type(plain["todos"]) is list
    plain["todos"].append({"content": "z", "status": "pending"})
    assert len(event.data["todos"]) == 2
    assert copy.deepcopy(event.data) == event.data


def test_events_view_and_event_envelope_are_immutable():
    s = new_session()
    event = s.append("turn/start", {"turn": 1})
    events = s.events
    with pytest.raises(TypeError):
        events[0] = event
    with pytest.raises(AttributeError):
        events.append(event)
    with pytest.raises(AttributeError):
        event.seq = 5
    with pytest.raises(AttributeError):
        event.data = {}
    s.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    assert len(events) == 1  # a held view is a snapshot
    assert len(s.events) == 2


# -- request_header ---------------------------------------------------------------------------------------------------


def test_request_header_follows_the_latest_header():
    s = new_session()
    assert s.request_header() is None
    s.append("turn/start", {"turn": 1})
    s.append("request/header", _header())
    assert s.request_header() == {"config": {"provider": "deepseek", "model": "deepseek-chat"}}
    with pytest.raises(TypeError):
        s.request_header()["config"]["model"] = "other"
    tools = [{"name": "read_file", "description": "read", "parameters": {"type": "object"}}]
    s.append("request/header", _header(tools=tools) | {"reason": "change"})
    assert s.request_header()["tools"] == tools


def test_refused_request_header_keeps_the_previous_one():
    s = new_session()
    s.append("turn/start", {"turn": 1})
    s.append("request/header", _header())
    before = s.request_header()
    refused(s, dshpy.EventError, lambda: s.append("request/header", _header(system="x")), match="header.system")
    bad_batch = [
        event_from_parts("request/header", 2, 0, _header(tools=[{"name": "f"}]) | {"reason": "change"}),
        event_from_parts("turn/start", 3, 0, {"turn": 2}),
    ]
    refused(s, dshpy.InvariantError, lambda: s.append_events(bad_batch))
    assert s.request_header() is before


def test_request_header_is_restored_from_the_log():
    s = new_session()
    s.append("turn/start", {"turn": 1})
    s.append("request/header", _header())
    restored = dshpy.Session(s.header, s.events)
    assert restored.request_header() == s.request_header()
