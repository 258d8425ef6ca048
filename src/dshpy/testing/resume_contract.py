"""The resume part of the backend contract: opening from a resume point is opening from the whole log.

:class:`~dshpy.testing.contract.StoreContract` inherits these tests. A store with the
projection cache capability keeps each session's resume point as a cache row
(:mod:`dshpy.storage.resume_cache`); ``open`` and ``inspect`` then read only the tail
after it. Every way the point can be wrong — another session's, a stale seq, damaged
bytes, a log another writer extended, a tail that does not follow it — must either be
used correctly or fall back to the whole log, and in every case give exactly the
session a full read gives. The damaging tests write rows through the backend's cache
primitives, as a broken or hostile store would; stores without the capability skip them.
"""

from __future__ import annotations

from typing import Any, cast

import pytest

from dshpy.core.events import encode_event
from dshpy.core.json import dumps, loads
from dshpy.log.repair import interrupted_turn_closers
from dshpy.log.session import Session
from dshpy.projections.checkpoint import CachedState
from dshpy.projections.registry import default_registry
from dshpy.projections.runner import runner_of
from dshpy.storage.backend import ProjectionCache
from dshpy.storage.contract import SessionStore
from dshpy.storage.projection_cache import ProjectionRow, rows_of, session_identity
from dshpy.storage.resume_cache import RESUME_KEY
from dshpy.testing.builders import TurnScript, assistant_data, user_message

__all__ = ["ResumeContract", "assert_same_session", "fully_loaded"]


def fully_loaded(store: SessionStore, session_id: str) -> Session:
    """The session as reading its whole stored log gives it (with the closers repair would show), detached."""
    events = list(store.read(session_id))
    header = store.stat(session_id).header
    return Session(header, [*events, *interrupted_turn_closers(events)])


def assert_same_session(session: Session, expected: Session) -> None:
    """Everything a caller can observe of a session's log and derived state is the same."""
    assert len(session) == len(expected)
    assert [encode_event(e) for e in session.events] == [encode_event(e) for e in expected.events]
    assert [encode_event(e) for e in session.events[3:-2]] == [encode_event(e) for e in expected.events[3:-2]]
    assert session.surface_nodes == expected.surface_nodes
    assert [(m.seq, m.data) for m in session.derive_messages()] == [(m.seq, m.data) for m in expected.derive_messages()]
    assert session.lifecycle == expected.lifecycle
    assert session.request_header() == expected.request_header()
    assert session.inherited_event_count == expected.inherited_event_count
    assert session.next_turn == expected.next_turn
    assert session.resume_point() == expected.resume_point()
    assert session.snapshot()["values"] == expected.snapshot()["values"]


def _cache(store: SessionStore) -> ProjectionCache:
    if "projection_cache" not in store.capabilities:
        pytest.skip("the store keeps no projection cache, so no resume points")
    return cast(ProjectionCache, store)


def _resumed(store: SessionStore, point: int) -> int | None:
    """What ``resumed_from`` must say for a session with a point at ``point``: without a cache, there is none."""
    return point if "projection_cache" in store.capabilities else None


def _rows(store: SessionStore, session_id: str) -> dict[str, ProjectionRow]:
    return {row.key: row for row in _cache(store)._load_projection_rows(session_id)}


def _talk(session: Session, turns: int, text: str = "hello") -> None:
    script = TurnScript(session)
    for index in range(turns):
        script.turn(f"{text} {index}", steps=2, tools_per_step=1)


class ResumeContract:
    """``open``/``inspect`` from a resume point behave exactly as from the whole log, whatever the point holds."""

    def reopen(self, store: SessionStore) -> SessionStore:
        return store

    def _closed_session(self, store: SessionStore, session_id: str = "resumable", turns: int = 3) -> Session:
        session = store.create(session_id=session_id, cwd="/w")
        _talk(session, turns)
        session.close()
        return session

    def test_open_resumes_from_the_point_close_wrote(self, store: SessionStore) -> None:
        session = self._closed_session(store)
        _cache(store)
        assert _rows(store, session.id)[RESUME_KEY].seq == len(session) - 1
        again = self.reopen(store)
        expected = fully_loaded(again, session.id)
        view = again.inspect(session.id)
        assert view.resumed_from == len(session)
        assert_same_session(view, expected)
        live = again.open(session.id)
        assert live.resumed_from == len(session)
        assert_same_session(live, expected)
        _talk(live, 1, "more")  # and it goes on as a fully loaded session would
        live.close()
        expected = fully_loaded(again, session.id)
        reopened = again.open(session.id)
        assert reopened.resumed_from == len(expected)
        assert_same_session(reopened, expected)
        reopened.close()

    def test_a_point_from_another_session_is_not_used(self, store: SessionStore) -> None:
        first = self._closed_session(store, "first", turns=3)
        second = store.create(session_id="second", cwd="/w")
        _talk(second, 4, "other words")
        second.flush()
        second.close()
        foreign = _rows(store, first.id)[RESUME_KEY]
        identity = session_identity(store.stat(second.id).header)
        cache = _cache(store)
        cache._save_projection_rows(second.id, [foreign])  # recorded under the first session's identity
        assert store.inspect(second.id).resumed_from is None
        cache._save_projection_rows(second.id, [foreign._replace(identity=identity)])  # even under its own
        view = store.inspect(second.id)
        assert view.resumed_from is None  # the last event's fingerprint is not the point's
        assert_same_session(view, fully_loaded(store, second.id))

    def test_a_stale_seq_is_not_used(self, store: SessionStore) -> None:
        session = self._closed_session(store)
        row = _rows(store, session.id)[RESUME_KEY]
        cache = _cache(store)
        for seq in (len(session), len(session) + 40, row.seq - 1):  # beyond the log; not the point's own seq
            cache._save_projection_rows(session.id, [row._replace(seq=seq)])
            view = store.inspect(session.id)
            assert view.resumed_from is None
            assert_same_session(view, fully_loaded(store, session.id))

    def test_a_damaged_point_is_not_used(self, store: SessionStore) -> None:
        session = self._closed_session(store)
        row = _rows(store, session.id)[RESUME_KEY]
        state: Any = row.state
        body = state["body"]
        flipped = body.replace('"openTurn":null', '"openTurn":3', 1)
        assert flipped != body
        damaged: list[Any] = [
            {**state, "body": flipped},  # the digest no longer matches
            {**state, "format": 99},
            {"format": 1},
            "not a point",
            {**state, "body": body[: len(body) // 2]},
        ]
        cache = _cache(store)
        for bad in damaged:
            cache._save_projection_rows(session.id, [row._replace(state=bad)])
            view = store.inspect(session.id)
            assert view.resumed_from is None
            assert_same_session(view, fully_loaded(store, session.id))

    def test_a_forged_point_the_tail_does_not_follow_falls_back(self, store: SessionStore) -> None:
        """A well-formed point whose state is wrong is caught when the tail after it is validated."""
        session = store.create(session_id="forged", cwd="/w")
        _talk(session, 2)
        session.close()
        row = _rows(store, session.id)[RESUME_KEY]
        live = store.open(session.id)
        _talk(live, 1, "next")
        live.flush()
        live.close()  # rows at the new end; put the old point back, lying that turn 1 is still the last
        state: Any = row.state
        fields = loads(state["body"])
        fields["lifecycle"]["lastTurn"] = 1
        forged = _forge(fields)
        _cache(store)._save_projection_rows(session.id, [row._replace(state=forged)])
        view = store.inspect(session.id)
        assert view.resumed_from is None  # turn/start 3 does not follow a log whose last turn was 1
        assert_same_session(view, fully_loaded(store, session.id))

    def test_a_log_another_writer_extended_resumes_with_the_longer_tail(self, store: SessionStore) -> None:
        session = self._closed_session(store)
        point = len(session)
        detached = Session(session.header, list(store.read(session.id)))
        _talk(detached, 2, "written elsewhere")
        store.append(session.id, list(detached.events)[point:], expected_seq=point)
        again = self.reopen(store)
        live = again.open(session.id)
        assert live.resumed_from == _resumed(store, point)
        assert_same_session(live, fully_loaded(again, session.id))
        live.close()

    def test_an_open_turn_after_the_point_is_repaired_as_from_the_whole_log(self, store: SessionStore) -> None:
        """A crash after the events' commit and before the next point: the tail ends inside a turn."""
        session = self._closed_session(store)
        point = len(session)
        detached = Session(session.header, list(store.read(session.id)))
        turn = detached.next_turn
        detached.append("turn/start", {"turn": turn})
        detached.append("step/start", {"turn": turn, "step": 1})
        detached.append("user/message", user_message("run it"), surface_op="append")
        calls = [("call-x", "bash", '{"cmd":"ls"}'), ("call-y", "bash", '{"cmd":"pwd"}')]
        detached.append("assistant/message", assistant_data(turn, 1, "ok", tool_calls=calls), surface_op="append")
        detached.append(
            "tool/call", {"turn": turn, "step": 1, "callId": "call-x", "name": "bash", "arguments": calls[0][2]}
        )
        store.append(session.id, list(detached.events)[point:], expected_seq=point)
        expected = fully_loaded(store, session.id)
        view = store.inspect(session.id)  # shows the closers, writes nothing
        assert view.resumed_from == _resumed(store, point)
        assert_same_session(view, expected)
        assert view.pending_count == 4 and store.stat(session.id).event_count == len(detached)
        live = store.open(session.id)  # writes them
        assert live.resumed_from == _resumed(store, point)
        assert_same_session(live, expected)
        assert live.pending_count == 0 and store.stat(session.id).event_count == len(expected)
        live.close()

    def test_a_store_without_resume_points_still_opens_and_gains_one(self, store: SessionStore) -> None:
        """Sessions written before resume points existed have projection rows only: they open from the whole log."""
        cache = _cache(store)
        other = store.create(session_id="old-style", cwd="/w")
        other.close()
        detached = Session(store.stat(other.id).header, [])
        _talk(detached, 3)
        events = list(detached.events)
        store.append(other.id, events, expected_seq=0)
        folded = {
            d.key: CachedState(d.state_version, len(events) - 1, d.dump(d.fold(events))) for d in default_registry()
        }
        cache._save_projection_rows(other.id, rows_of(detached.header, folded))  # what an older dshpy wrote
        assert set(_rows(store, other.id)) == set(folded)
        live = store.open(other.id)
        assert live.resumed_from is None
        assert_same_session(live, fully_loaded(store, other.id))
        live.close()
        assert RESUME_KEY in _rows(store, other.id)
        again = store.open(other.id)
        assert again.resumed_from == len(detached)
        assert_same_session(again, fully_loaded(store, other.id))
        again.close()

    def test_the_older_events_are_read_on_demand_like_a_list(self, store: SessionStore) -> None:
        session = self._closed_session(store, turns=45)  # more than one chunk: iteration streams
        stored = list(store.read(session.id))
        view = store.inspect(session.id)
        assert view.resumed_from == _resumed(store, len(stored))
        events = view.events
        assert len(events) == len(stored)
        wire = [encode_event(e) for e in stored]
        assert [encode_event(events[i]) for i in (0, 1, len(stored) // 2, -1)] == [
            wire[0],
            wire[1],
            wire[len(stored) // 2],
            wire[-1],
        ]
        assert [encode_event(e) for e in events[5:600:7]] == wire[5:600:7]
        assert [encode_event(e) for e in events[-3:]] == wire[-3:]
        assert [encode_event(e) for e in events] == wire
        with pytest.raises(IndexError):
            events[len(stored)]
        messages = view.derive_messages()
        assert messages[-1] is view.derive_messages()[-1]
        assert [m.seq for m in messages] == [m.seq for m in fully_loaded(store, session.id).derive_messages()]

    def test_a_fork_starts_from_its_parents_point(self, store: SessionStore) -> None:
        parent = self._closed_session(store, "parent", turns=3)
        child = store.fork(parent.id, child_id="child")
        assert child.resumed_from == _resumed(store, len(parent))
        assert_same_session(child, fully_loaded(store, child.id))
        _talk(child, 1, "child talk")
        child.close()
        again = store.open(child.id)
        assert again.resumed_from == _resumed(store, len(again))
        assert_same_session(again, fully_loaded(store, child.id))
        again.close()
        assert runner_of(again) is not None


def _forge(fields: dict[str, Any]) -> dict[str, Any]:
    """A point whose body is ``fields``, with a matching digest (as a store with bad state but good bytes holds)."""
    import hashlib

    body = dumps(fields)
    return {"format": 1, "sha256": hashlib.sha256(body).hexdigest(), "body": body.decode()}
