"""Properties of the event log over generated sessions (``dshpy.testing.strategies``).

* derivation: the incremental ``derive_messages()`` cache equals an independent
  from-scratch fold after every append (and after every ``append_events`` batch), and
  equals a restored session's; deriving only now and then, so that several replaces
  and appends land between two derivations, gives the same history as a fold from
  scratch; an earlier history snapshot never changes;
* codec: every event survives encode → decode unchanged, with and without packed
  seq ranges, and re-encodes to the same bytes;
* repair: any prefix of a valid log plus its interrupted-turn closers is a valid,
  closed log;
* refusal: a refused append (or batch) leaves the log and its history untouched,
  and the session goes on accepting the rest of the script.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dshpy
from dshpy import DshError, Message, Session, SessionEvent
from dshpy.core.events import event_from_parts
from dshpy.testing.builders import assistant_data, system_data, tool_result_data, user_message
from dshpy.testing.strategies import NOTE_TYPE, AppendOp, json_values, replay, session_scripts

SURFACE_TYPES = ("system/message", "developer/message", "user/message", "assistant/message", "tool/result")

PROPERTY = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def make_clock() -> Callable[[], int]:
    return itertools.count(1_700_000_000_000, 7).__next__


def new_session() -> Session:
    return Session.new(session_id="prop-session", clock=make_clock())


# -- the reference fold: dsh's rules, written out independently of dshpy.log ---------------------


def reference_surface(events: Sequence[SessionEvent]) -> list[int]:
    nodes: list[int] = []
    for event in events:
        wire = event.to_wire()
        op = wire.get("surfaceOp")
        if event.type not in SURFACE_TYPES or op is None:
            continue
        if op == "append":
            nodes.append(event.seq)
        else:
            start, end = nodes.index(op["startSeq"]), nodes.index(op["endSeq"])
            assert start <= end
            nodes[start : end + 1] = [event.seq]
    return nodes


def reference_messages(events: Sequence[SessionEvent]) -> list[tuple[int, Any]]:
    out: list[tuple[int, Any]] = []
    for seq in reference_surface(events):
        event = events[seq]
        if event.type == "user/message":
            out.append((seq, event.data))
        elif event.type == "tool/result" or event.data["message"]["content"]:
            # a tool result always derives; system, developer and assistant messages only with content
            out.append((seq, event.data["message"]))
    return out


def derived(session: Session) -> list[tuple[int, Any]]:
    return [(message.seq, message.data) for message in session.derive_messages()]


# -- (a) derivation ----------------------------------------------------------------------------


@PROPERTY
@given(session_scripts(max_ops=50))
def test_incremental_derivation_matches_a_fold_from_scratch(ops: list[AppendOp]) -> None:
    session = new_session()
    snapshots: list[tuple[Sequence[Message], list[Message]]] = []
    for op in ops:
        op.apply(session)
        events = list(session.events)
        expected = reference_messages(events)
        history = session.derive_messages()
        assert [(m.seq, m.data) for m in history] == expected
        assert list(session.surface_nodes) == reference_surface(events)
        assert derived(Session(session.header, events)) == expected
        snapshots.append((history, list(history)))
    for history, frozen in snapshots:  # later appends and replaces never show in an earlier snapshot
        assert list(history) == frozen


@PROPERTY
@given(session_scripts(max_ops=50), st.data())
def test_batched_appends_derive_the_same_history(ops: list[AppendOp], data: st.DataObject) -> None:
    reference = new_session()
    events = replay(ops, reference)
    session = new_session()
    while len(session) < len(events):
        size = data.draw(st.integers(1, 8), label="batch size")
        session.append_events(events[len(session) : len(session) + size])
        assert derived(session) == reference_messages(list(session.events))
    assert list(session.events) == events


@PROPERTY
@given(session_scripts(max_ops=80), st.data())
def test_derivation_now_and_then_matches_a_fold_from_scratch(ops: list[AppendOp], data: st.DataObject) -> None:
    """Replaces (compactions, prunes, system prompts, nested ones) land in any mix between two derivations."""
    session = new_session()
    every = data.draw(st.integers(1, 6), label="derive about every n ops")
    held: list[tuple[Sequence[Message], list[Message]]] = []
    for op in ops:
        op.apply(session)
        if data.draw(st.integers(1, every), label="derive now") == 1:
            history = session.derive_messages()
            events = list(session.events)
            assert [(m.seq, m.data) for m in history] == reference_messages(events)
            assert list(history) == list(Session(session.header, events).derive_messages())
            if data.draw(st.booleans(), label="hold this history"):
                held.append((history, list(history)))
    assert derived(session) == reference_messages(list(session.events))
    for history, kept in held:
        assert list(history) == kept


# -- (b) codec ---------------------------------------------------------------------------------


def assert_round_trips(event: SessionEvent) -> None:
    for seq_ranges in (True, False):
        raw = dshpy.encode_event(event, seq_ranges=seq_ranges)
        assert raw == orjson.dumps(event.to_wire(seq_ranges=seq_ranges))
        for parsed in (False, True):  # parsed=True seals the parser's containers in place (the stores' path)
            back = dshpy.decode_event(orjson.loads(raw), parsed=parsed)
            assert back == event
            assert dshpy.encode_event(back, seq_ranges=seq_ranges) == raw


@PROPERTY
@given(session_scripts())
def test_every_event_round_trips_through_the_codec(ops: list[AppendOp]) -> None:
    session = new_session()
    events = replay(ops, session)
    for event in events:
        assert_round_trips(event)
    decoded = [dshpy.decode_event(orjson.loads(dshpy.encode_event(e))) for e in events]
    assert derived(Session(session.header, decoded)) == derived(session)


ANY_DATA = json_values(max_leaves=12)


@st.composite
def envelopes(draw: st.DrawFn) -> SessionEvent:
    """Plugin records with arbitrary data and source lists: runs, gaps, and unordered lists."""
    seq = draw(st.integers(1, 200))
    sources = draw(st.none() | st.lists(st.integers(0, seq - 1), min_size=1, max_size=12, unique=True))
    if sources is not None and draw(st.booleans()):
        sources.sort()
    time = draw(st.integers(-(2**53 - 1), 2**53 - 1))
    return event_from_parts(NOTE_TYPE, seq, time, draw(ANY_DATA), None, sources, True)


@PROPERTY
@given(envelopes())
def test_any_envelope_round_trips_with_and_without_seq_ranges(event: SessionEvent) -> None:
    assert_round_trips(event)


# -- (c) repair --------------------------------------------------------------------------------


@PROPERTY
@given(session_scripts(max_ops=70), st.data())
def test_repairing_any_prefix_yields_a_valid_closed_log(ops: list[AppendOp], data: st.DataObject) -> None:
    source = new_session()
    events = replay(ops, source)
    prefix = events[: data.draw(st.integers(0, len(events)), label="cut")]
    closers = dshpy.interrupted_turn_closers(prefix)
    session = Session(source.header, prefix)
    assert (session.open_turn is None and session.lifecycle.compaction is None) == (closers == [])
    session.append_events(closers)
    repaired = list(session.events)
    assert repaired == [*prefix, *closers]
    dshpy.validate(repaired)
    assert session.open_turn is None
    assert dshpy.interrupted_turn_closers(repaired) == []
    assert derived(session) == reference_messages(repaired)
    session.append("turn/start", {"turn": session.next_turn})  # the repaired log goes on


# -- (d) refusal -------------------------------------------------------------------------------

Bad = dict[str, Any]
"""Keyword arguments of one ``Session.append`` call that must be refused."""

Mutations = list[tuple[str, Bad]]


class State:
    """What the mutations need to know about a session, read through its public API."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.seq = session.next_seq
        self.events = session.events
        self.nodes = list(session.surface_nodes)
        self.life = session.lifecycle
        # node 0 is a system message exactly when the surface began with one: the protected head
        self.head = self.nodes[0] if self.nodes and self.events[self.nodes[0]].type == "system/message" else None
        self.low = 0 if self.head is None else 1
        """Position of the first node a non-system replace may shadow."""
        self.turn = self.life.open_turn or self.life.last_turn or 1
        self.step = self.life.open_step or self.life.last_step or 1
        self.results = [i for i in range(self.low, len(self.nodes)) if self.events[self.nodes[i]].type == "tool/result"]
        """Positions of the current tool/result nodes."""

    def replace(self, kind: str, data: Any, start: int, end: int) -> Bad:
        """A replace over positions ``start..end`` citing exactly the shadowed nodes."""
        span = {"op": "replace", "startSeq": self.nodes[start], "endSeq": self.nodes[end]}
        return {"type": kind, "data": data, "surface_op": span, "source_event_seqs": self.nodes[start : end + 1]}


def _user(**overrides: Any) -> dict[str, Any]:
    return {**user_message("bad", message_id="bad-user"), **overrides}


def _appended(kind: str, data: Any, **extra: Any) -> Bad:
    return {"type": kind, "data": data, "surface_op": "append", **extra}


def envelope_mutations(s: State) -> Mutations:
    user = _user()
    out: Mutations = [
        ("unknown type", {"type": "x/unknown", "data": {}}),
        ("bad plugin name", {"type": "plugin:Bad Name", "data": {}}),
        ("non-json data", _appended("user/message", _user(extra=math.nan))),
        ("unsafe integer", {"type": "todo/write", "data": {"todos": [], "n": 2**60}}),
        ("missing role", _appended("user/message", {**user, "role": None})),
        ("retired plugin source", _appended("user/message", _user(source={"kind": "plugin"}))),
        ("surface type without surfaceOp", {"type": "user/message", "data": user}),
        ("ignorable surface event", _appended("user/message", user, ignorable=True)),
        ("surfaceOp on a record", {"type": "todo/write", "data": {"todos": []}, "surface_op": "append"}),
        ("sources on a record", {"type": "todo/write", "data": {"todos": []}, "source_event_seqs": [0]}),
        ("plugin record on the surface", {"type": NOTE_TYPE, "data": {}, "surface_op": "append", "ignorable": True}),
        ("empty sources", _appended("user/message", user, source_event_seqs=[])),
        ("own seq cited", _appended("user/message", user, source_event_seqs=[s.seq])),
        ("inherited end-seed", {"type": "session/end-seed", "data": {"inherited": True}}),
        ("error turn/end without error", {"type": "turn/end", "data": {"turn": s.turn, "reason": {"kind": "error"}}}),
        (
            "assistant with sources",
            _appended(
                "assistant/message", assistant_data(s.turn, s.step, "hi"), source_event_seqs=[0] if s.seq else []
            ),
        ),
    ]
    if s.seq:
        out += [
            (
                "plugin record citing sources",
                {"type": NOTE_TYPE, "data": {}, "source_event_seqs": [0], "ignorable": True},
            ),
            ("duplicate sources", _appended("user/message", user, source_event_seqs=[0, 0])),
        ]
    return out


def lifecycle_mutations(s: State) -> Mutations:
    turn, step, life = s.turn, s.step, s.life
    out: Mutations = [
        ("turn/end of no open turn", {"type": "turn/end", "data": {"turn": turn + 1, "reason": {"kind": "completed"}}})
    ]
    if life.open_turn is None:
        out += [
            ("turn number skipped", {"type": "turn/start", "data": {"turn": s.session.next_turn + 1}}),
            ("step outside a turn", {"type": "step/start", "data": {"turn": s.session.next_turn, "step": 1}}),
            ("request/context outside a turn", {"type": "request/context", "data": {"provider": "p", "model": "m"}}),
        ]
        return out
    out.append(("nested turn", {"type": "turn/start", "data": {"turn": s.session.next_turn}}))
    call = {"turn": turn, "step": step, "callId": "nope", "name": "x", "arguments": "{}"}
    out.append(("unadvertised tool/call", {"type": "tool/call", "data": call}))
    if life.open_step is None:
        out += [
            ("assistant outside a step", _appended("assistant/message", assistant_data(turn, step, "x"))),
            ("step number skipped", {"type": "step/start", "data": {"turn": turn, "step": life.last_step + 2}}),
        ]
        return out
    out += [
        ("nested step", {"type": "step/start", "data": {"turn": turn, "step": step + 1}}),
        ("turn/end over an open step", {"type": "turn/end", "data": {"turn": turn, "reason": {"kind": "completed"}}}),
        (
            "orphan tool/result",
            _appended("tool/result", tool_result_data(turn, step, "nope", "x"), source_event_seqs=[0]),
        ),
        (
            "tool-call block without id",
            _appended("assistant/message", assistant_data(turn, step, tool_calls=[("", "x", "{}")])),
        ),
    ]
    if life.calls:
        call_id, pending = next(iter(life.calls.items()))
        repeat = assistant_data(turn, step, tool_calls=[(call_id, pending.name, pending.arguments)])
        out += [
            ("step/end over an unanswered call", {"type": "step/end", "data": {"turn": turn, "step": step}}),
            ("assistant repeats an unanswered call id", _appended("assistant/message", repeat)),
        ]
    for call_id, pending in life.calls.items():
        data = {"turn": turn, "step": step, "callId": call_id, "name": pending.name, "arguments": pending.arguments}
        if pending.call_seq is None:
            out += [
                ("tool/call with other arguments", {"type": "tool/call", "data": {**data, "arguments": '{"x":1}'}}),
                (
                    "tool/result before its tool/call",
                    _appended("tool/result", tool_result_data(turn, step, call_id, "r")),
                ),
            ]
        else:
            out.append(("tool/call repeated", {"type": "tool/call", "data": data}))
    return out


def surface_mutations(s: State) -> Mutations:
    nodes, low, user = s.nodes, s.low, _user()
    system = system_data(s.turn, s.step, "s")
    out: Mutations = []
    if nodes:
        own = {"op": "replace", "startSeq": s.seq, "endSeq": s.seq}
        out.append(
            (
                "replace cites its own seq",
                {"type": "user/message", "data": user, "surface_op": own, "source_event_seqs": nodes[-1:]},
            )
        )
    if nodes and s.head is None:
        out.append(("system/message without a head", _appended("system/message", system)))
    if s.head is not None:
        out.append(("user replaces the system head", s.replace("user/message", user, 0, min(len(nodes), 2) - 1)))
        if len(nodes) >= 2:
            out.append(("system replaces more than the head", s.replace("system/message", system, 0, 1)))
    if len(nodes) > low:
        last = len(nodes) - 1
        replace = s.replace("user/message", user, low, last)
        partial = list(replace["source_event_seqs"][1:]) or None
        out.append(("replace without every shadowed source", {**replace, "source_event_seqs": partial}))
        hidden = sorted(set(range(s.seq)) - set(nodes))
        if hidden:
            op = {"op": "replace", "startSeq": hidden[-1], "endSeq": nodes[last]}
            sources = [hidden[-1], *replace["source_event_seqs"]]
            out.append(
                ("replace start not on the surface", {**replace, "surface_op": op, "source_event_seqs": sources})
            )
        if last > low:
            op = {"op": "replace", "startSeq": nodes[last], "endSeq": nodes[low]}
            out.append(("replace start after end", {**replace, "surface_op": op}))
        result = next((e for e in s.events if e.type == "tool/result"), None)
        if s.life.open_turn is not None and s.events[nodes[low]].type != "tool/result" and result is not None:
            out.append(("tool/result rewrites a non-result node", s.replace("tool/result", result.data, low, low)))
    if not s.results:
        return out
    first = s.results[0]
    original = s.events[nodes[first]].data
    if s.life.open_turn is None:
        rewrite = dshpy.thaw(original)
        rewrite["message"]["content"] = []
        out.append(("tool/result rewrite outside a turn", s.replace("tool/result", rewrite, first, first)))
        return out
    other_call = {"toolCallId": "other", "source": {"kind": "tool", "callId": "other"}}
    for what, changed in (
        ("message id", {**original, "message": {**original["message"], "id": "changed"}}),
        ("tool call", {**original, "message": {**original["message"], **other_call}}),
        ("turn", {**original, "turn": original["turn"] + 1}),
    ):
        out.append((f"tool/result rewrite changes the {what}", s.replace("tool/result", changed, first, first)))
    if len(nodes) - low >= 2:
        j = first + 1 if first + 1 < len(nodes) else first - 1
        out.append(("tool/result rewrites two nodes", s.replace("tool/result", original, min(first, j), max(first, j))))
    return out


def compaction_mutations(s: State) -> Mutations:
    nodes, low, life, bracket = s.nodes, s.low, s.life, s.life.compaction
    out: Mutations = []
    if s.head is not None:
        span = {"shadowedRange": {"start": s.head, "end": s.head}, "shadowedSeqs": [s.head]}
        out.append(("prune shadows the system head", {"type": "compaction/prune", "data": span}))
    if bracket is None:
        end = {"compactionId": "c-none", "turn": life.open_turn, "error": "x"}
        out.append(("compaction/end without a start", {"type": "compaction/end", "data": end}))
        if len(nodes) > low:
            checkpoint = _user(source={"kind": "compact-checkpoint", "compactionId": "c-none"})
            out.append(("checkpoint without a bracket", s.replace("user/message", checkpoint, low, low)))
        return out
    if life.open_turn is None:
        out.append(("turn/start crosses a compaction", {"type": "turn/start", "data": {"turn": s.session.next_turn}}))
    else:
        end_turn = {"turn": life.open_turn, "reason": {"kind": "completed"}}
        out.append(("turn/end crosses a compaction", {"type": "turn/end", "data": end_turn}))
    start = {"compactionId": "c-overlap", "turn": life.open_turn}
    out.append(("overlapping compaction/start", {"type": "compaction/start", "data": start}))
    if not bracket.summarized:
        end = {"compactionId": bracket.compaction_id, "turn": bracket.turn}
        out.append(("successful compaction/end without a summary", {"type": "compaction/end", "data": end}))
        if len(nodes) - low >= 2:
            summary = {
                "compactionId": bracket.compaction_id,
                "summary": [{"type": "text", "text": "s"}],
                "shadowedRange": {"start": nodes[low], "end": nodes[-1]},
                "shadowedSeqs": nodes[low:-1],
            }
            out.append(("summary names an inexact span", {"type": "compaction/summary", "data": summary}))
    return out


def invalid_appends(session: Session) -> Mutations:
    """Appends the session must refuse in its current state, each named by the rule it breaks."""
    state = State(session)
    return [
        *envelope_mutations(state),
        *lifecycle_mutations(state),
        *surface_mutations(state),
        *compaction_mutations(state),
    ]


def prebuilt(bad: Bad, seq: int, time: int) -> SessionEvent | None:
    """``bad`` as a prebuilt event for ``append_events``, or ``None`` where only ``append`` checks it."""
    try:
        return event_from_parts(
            bad["type"],
            seq,
            time,
            bad["data"],
            bad.get("surface_op"),
            bad.get("source_event_seqs"),
            bad.get("ignorable", False),
        )
    except (DshError, ValueError):  # refused before admission (non-JSON data)
        return None


def snapshot(session: Session) -> tuple[Any, ...]:
    return (
        list(session.events),
        derived(session),
        session.surface_nodes,
        session.lifecycle,
        session.next_seq,
        session.pending_count,
    )


def assert_refused(name: str, append: Callable[..., object], *args: Any, **kwargs: Any) -> None:
    try:
        append(*args, **kwargs)
    except DshError:
        return
    pytest.fail(f"accepted an invalid append: {name}")


@PROPERTY
@given(session_scripts(min_ops=1, max_ops=50, closed=True), st.data())
def test_a_refused_append_changes_nothing(ops: list[AppendOp], data: st.DataObject) -> None:
    session = new_session()
    cut = data.draw(st.integers(0, len(ops)), label="cut")
    replay(ops[:cut], session)
    if data.draw(st.booleans(), label="warm derive cache"):
        session.derive_messages()
    before = snapshot(session)
    if cut < len(ops) and data.draw(st.booleans(), label="batch"):
        # batches whose last event is bad: the good event before it must not land either
        good = ops[cut].to_event(cut, 1)
        probe = Session(session.header, [*session.events, good])
        for name, bad in invalid_appends(probe):
            event = prebuilt(bad, cut + 1, 2)
            if event is not None:
                assert_refused(name, session.append_events, [good, event])
                assert snapshot(session) == before, name
    else:
        for name, bad in invalid_appends(session):
            assert_refused(name, session.append, **bad)
            assert snapshot(session) == before, name
    for op in ops[cut:]:
        op.apply(session)
    assert derived(session) == reference_messages(list(session.events))
