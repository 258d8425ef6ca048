"""A session resumed from a resume point behaves exactly like the same log loaded in full (issue #20).

Over generated logs (``dshpy.testing.strategies``), cut anywhere: the point taken after
the first ``k`` events, written to JSON and read back, plus the events after it give a
session whose events, surface, messages, lifecycle, request header, repair closers and
next resume point are the fully loaded session's; and both accept the same further
events. The older events are served by a :class:`~dshpy.log.stored_log.StoredLog` over
the log itself, counting how many it had to read.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dshpy import Session, SessionEvent
from dshpy.core.json import dumps, loads
from dshpy.errors import DshError
from dshpy.log.repair import interrupted_turn_closers
from dshpy.log.resume import parse_resume_point
from dshpy.log.stored_log import StoredLog
from dshpy.testing.strategies import replay, session_scripts

PROPERTY = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def make_clock() -> Callable[[], int]:
    return itertools.count(1_700_000_000_000, 7).__next__


def generated_log(ops: Sequence[object]) -> tuple[Session, list[SessionEvent]]:
    session = Session.new(session_id="resume-prop", clock=make_clock())
    replay(ops, session)  # type: ignore[arg-type]
    return session, list(session.events)


def resumed(full: Session, events: list[SessionEvent], cut: int, end: int) -> tuple[Session, list[int]]:
    """The session over ``events[:end]`` resumed from the point after ``events[:cut]``; and the reads it made."""
    base = Session(full.header, events[:cut])
    point = base.resume_point()
    assert point is not None
    again = parse_resume_point(loads(dumps(point.to_state())))
    assert again == point
    reads: list[int] = []

    def fetch(start: int, stop: int) -> list[SessionEvent]:
        reads.append(stop - start)
        return events[start:stop]

    older = StoredLog(full.id, cut, fetch)
    return Session.resumed(full.header, again, older, events[cut:end]), reads


def same_session(left: Session, right: Session) -> None:
    assert len(left) == len(right)
    assert list(left.events) == list(right.events)
    assert left.surface_nodes == right.surface_nodes
    assert [(m.seq, m.data) for m in left.derive_messages()] == [(m.seq, m.data) for m in right.derive_messages()]
    assert left.lifecycle == right.lifecycle
    assert left.request_header() == right.request_header()
    assert left.inherited_event_count == right.inherited_event_count
    assert left.open_turn == right.open_turn
    assert left.next_turn == right.next_turn
    assert left.resume_point() == right.resume_point()


@PROPERTY
@given(session_scripts(min_ops=1, max_ops=50), st.data())
def test_a_resumed_session_is_the_fully_loaded_session(ops, data) -> None:
    full, events = generated_log(ops)
    cut = data.draw(st.integers(1, len(events)), label="cut")
    end = data.draw(st.integers(cut, len(events)), label="end")
    loaded = Session(full.header, events[:end])
    session, _reads = resumed(full, events, cut, end)
    same_session(session, loaded)
    repaired = interrupted_turn_closers(events[:end])
    assert interrupted_turn_closers(events[session.repair_window_start : end]) == repaired
    # both accept the rest of the log alike, checking messages after each event as they go
    before = session.derive_messages()
    frozen = [(m.seq, m.data) for m in before]
    for event in events[end:]:
        session.append_events([event])
        loaded.append_events([event])
        assert [(m.seq, m.data) for m in session.derive_messages()] == [
            (m.seq, m.data) for m in loaded.derive_messages()
        ]
    assert [(m.seq, m.data) for m in before] == frozen  # an earlier history snapshot never changes
    same_session(session, full)


@PROPERTY
@given(session_scripts(min_ops=2, max_ops=40), st.data())
def test_resumed_and_loaded_sessions_refuse_the_same_events(ops, data) -> None:
    """An event from elsewhere in the log (wrong seq, broken pairing, a replay) is refused by both, or by neither."""
    full, events = generated_log(ops)
    cut = data.draw(st.integers(1, len(events)), label="cut")
    session, _ = resumed(full, events, cut, len(events))
    loaded = Session(full.header, events)
    donor = data.draw(st.sampled_from(events), label="donor")
    candidate = SessionEvent(
        donor.type, len(events), donor.time, donor.data, donor.surface_op, donor.source_event_seqs, donor.ignorable
    )
    outcomes = []
    for target in (session, loaded):
        try:
            target.append_events([candidate])
            outcomes.append(None)
        except DshError as error:
            outcomes.append((type(error), str(error)))
    assert outcomes[0] == outcomes[1]
    same_session(session, loaded)


def test_only_the_tail_is_read_when_nothing_looks_back() -> None:
    """Resuming and deriving reads none of the older events; reading a message reads its chunk."""
    session = Session.new(session_id="resume-reads", clock=make_clock())
    for turn in range(1, 301):
        session.append("turn/start", {"turn": turn})
        session.append(
            "user/message",
            {"id": f"u{turn}", "role": "user", "content": [{"type": "text", "text": "hi"}], "source": {"kind": "user"}},
            surface_op="append",
        )
        session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
    events = list(session.events)
    resumed_session, reads = resumed(session, events, 850, len(events))
    messages = resumed_session.derive_messages()
    assert len(messages) == 300 and reads == []
    assert messages[0].id == "u1" and reads[0] == 512 and sum(reads) <= 850  # the first chunk, and what follows
    assert messages[0] is resumed_session.derive_messages()[0]
