"""The backend contract suite: one set of tests every ``SessionStore`` must pass.

A backend's test module subclasses :class:`StoreContract` and provides a ``store``
fixture (and, for durable backends, overrides :meth:`StoreContract.reopen` to return a
new store object over the same storage)::

    class TestMemoryStore(StoreContract):
        @pytest.fixture
        def store(self):
            return dshpy.MemoryStore()

The class name does not start with ``Test``, so pytest only collects it through
subclasses. Tests go through the public store API only.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import replace
from typing import Any

import pytest

from dshpy.core.events import SessionEvent, event_from_parts
from dshpy.errors import (
    ConflictError,
    CorruptSessionError,
    EventError,
    ForkError,
    FormatVersionError,
    InvalidSessionIdError,
    InvariantError,
    ReadOnlySessionError,
    SessionBusyError,
    SessionExistsError,
    SessionNotFound,
    StoreError,
    UnknownEventTypeError,
)
from dshpy.log.invariants import validate
from dshpy.log.session import Session
from dshpy.storage.contract import SessionStore
from dshpy.storage.listing_page import PageRequest
from dshpy.testing.builders import TurnScript, assistant_data, user_message
from dshpy.testing.resume_contract import ResumeContract
from dshpy.testing.search_contract import SearchContract

__all__ = ["StoreContract"]

BAD_IDS = ["", ".", "..", "../etc", "a/../b", "a\\..", "/abs", "C:\\x", "x" * 129, "id\x00"]
"""Ids no store may accept: empty, directory names, path climbs, absolute paths, NUL, too long."""

DSH_IDS = [
    "my session",
    "team/alpha/run 2",
    "a\\b",
    "séance",
    "会话 1",
    "emoji 🙂",
    "~0041",
    " lead",
    "tab\tid",
    "two\nlines",
]
"""Ids dsh writes (it escapes any string on disk); every store reads and writes them (issue #16)."""


def _wire(events: Any) -> list[dict[str, Any]]:
    return [event.to_wire() for event in events]


def _open_turn_with_started_call(session: Session) -> int:
    """Append a turn that stops inside a tool call (as a crash would leave it); return the call seq."""
    turn = session.next_turn
    session.append("turn/start", {"turn": turn})
    session.append("step/start", {"turn": turn, "step": 1})
    session.append("user/message", user_message("run it"), surface_op="append")
    calls = [("call-a", "bash", '{"cmd":"ls"}'), ("call-b", "bash", '{"cmd":"pwd"}')]
    session.append("assistant/message", assistant_data(turn, 1, "running", tool_calls=calls), surface_op="append")
    call = session.append(
        "tool/call", {"turn": turn, "step": 1, "callId": "call-a", "name": "bash", "arguments": '{"cmd":"ls"}'}
    )
    return call.seq


class StoreContract(SearchContract, ResumeContract):
    """Behaviour every backend must show. Subclasses provide the ``store`` fixture.

    The session-query tests (search, listing, reading, tracing) come from
    :class:`~dshpy.testing.search_contract.SearchContract`; opening from a resume point
    from :class:`~dshpy.testing.resume_contract.ResumeContract`.
    """

    def reopen(self, store: SessionStore) -> SessionStore:
        """A fresh store object over the same storage (durable backends override)."""
        return store

    # -- create / ids -------------------------------------------------------------------

    def test_create_stores_a_v4_header(self, store: SessionStore) -> None:
        session = store.create(cwd="/srv/app")
        header = self.reopen(store).stat(session.id).header
        assert header.version == 4
        assert header.id == session.id
        assert header.cwd == "/srv/app"
        assert header.is_seeded is False
        assert header.parent_session is None
        assert header.to_record()["delegationDepth"] == 0
        assert store.exists(session.id)

    def test_create_with_taken_id_is_refused(self, store: SessionStore) -> None:
        store.create(session_id="taken")
        with pytest.raises(SessionExistsError, match="taken"):
            store.create(session_id="taken")

    @pytest.mark.parametrize("bad", BAD_IDS)
    def test_bad_session_ids_are_refused_everywhere(self, store: SessionStore, bad: str) -> None:
        for call in (
            lambda: store.create(session_id=bad),
            lambda: store.open(bad),
            lambda: store.inspect(bad),
            lambda: list(store.read(bad)),
            lambda: store.stat(bad),
            lambda: store.delete(bad),
            lambda: store.export(bad),
        ):
            with pytest.raises(InvalidSessionIdError):
                call()
        with pytest.raises(InvalidSessionIdError):
            store.fork("fine", child_id=bad)

    @pytest.mark.parametrize("session_id", DSH_IDS)
    def test_dsh_session_ids_round_trip(self, store: SessionStore, session_id: str) -> None:
        session = store.create(session_id=session_id, cwd="/w")
        TurnScript(session).turn("hello")
        session.close()
        assert [info.id for info in store.list() if info.id == session_id] == [session_id]
        reopened = self.reopen(store)
        assert _wire(reopened.read(session_id)) == _wire(session.events)
        live = reopened.open(session_id)
        TurnScript(live).turn("again")
        live.close()
        child = reopened.fork(session_id, child_id=session_id + " fork")
        assert child.header.parent_session == session_id
        child.close()
        reopened.delete(session_id + " fork")
        reopened.delete(session_id)
        assert not reopened.exists(session_id)

    def test_missing_sessions_raise_not_found(self, store: SessionStore) -> None:
        for call in (
            lambda: store.open("nope"),
            lambda: store.inspect("nope"),
            lambda: list(store.read("nope")),
            lambda: store.stat("nope"),
            lambda: store.delete("nope"),
            lambda: store.export("nope"),
        ):
            with pytest.raises(SessionNotFound):
                call()
        assert not store.exists("nope")

    # -- append / read ------------------------------------------------------------------

    def test_flushed_events_read_back_identically(self, store: SessionStore) -> None:
        session = store.create(cwd="/w")
        TurnScript(session).turn("first", steps=2, system="be brief")
        TurnScript(session).turn("second")
        assert session.pending_count == len(session.events)
        flushed = session.flush()
        assert flushed == len(session.events) and session.pending_count == 0
        session.close()  # a single-writer backend hands the session over only once its writer is gone
        again = self.reopen(store)
        assert _wire(again.read(session.id)) == _wire(session.events)
        reopened = again.open(session.id)
        assert _wire(reopened.events) == _wire(session.events)
        assert [m.data for m in reopened.derive_messages()] == [m.data for m in session.derive_messages()]
        reopened.close()

    def test_unflushed_events_are_not_stored(self, store: SessionStore) -> None:
        session = store.create()
        TurnScript(session).turn()
        assert list(store.read(session.id)) == []
        session.flush()
        assert len(list(store.read(session.id))) == len(session.events)

    def test_read_from_seq_returns_the_suffix(self, store: SessionStore) -> None:
        session = store.create()
        TurnScript(session).turn(steps=2)
        session.flush()
        events = list(store.read(session.id))
        assert _wire(store.read(session.id, from_seq=3)) == _wire(events[3:])
        assert list(store.read(session.id, from_seq=len(events))) == []
        assert list(store.read(session.id, from_seq=len(events) + 10)) == []
        with pytest.raises(ValueError, match="non-negative"):
            list(store.read(session.id, from_seq=-1))

    def test_read_types_filters_through_the_fork_chain(self, store: SessionStore) -> None:
        parent = store.create()
        TurnScript(parent).turn("one", steps=2)
        parent.close()
        child = store.fork(parent.id)
        TurnScript(child).turn("two")
        child.close()
        events = list(store.read(child.id))
        wanted = ("turn/start", "user/message")
        assert _wire(store.read_types(child.id, wanted)) == _wire(e for e in events if e.type in wanted)
        start = events[-3].seq
        assert _wire(store.read_types(child.id, ["turn/end"], start)) == _wire(
            e for e in events[start:] if e.type == "turn/end"
        )
        assert list(store.read_types(child.id, [])) == []
        with pytest.raises(ValueError, match="non-negative"):
            store.read_types(child.id, wanted, -1)

    def test_flush_without_pending_events_is_a_no_op(self, store: SessionStore) -> None:
        session = store.create()
        assert session.flush() == 0
        TurnScript(session).turn()
        assert session.flush() > 0
        assert session.flush() == 0

    def test_context_manager_flushes_on_exit(self, store: SessionStore) -> None:
        with store.create() as session:
            TurnScript(session).turn()
            expected = _wire(session.events)
        assert _wire(self.reopen(store).read(session.id)) == expected
        with pytest.raises(ReadOnlySessionError):
            session.append("turn/start", {"turn": 2})

    def test_one_live_writer_per_session_and_nothing_interleaves(self, store: SessionStore) -> None:
        session = store.create()
        TurnScript(session).turn()
        with pytest.raises(SessionBusyError):  # create() took the lease
            store.open(session.id)
        session.close()
        first = store.open(session.id)
        TurnScript(first).turn("from first")
        with pytest.raises(SessionBusyError) as busy:  # a second live handle, even in this process
            store.open(session.id)
        holder = busy.value.holder
        assert holder is None or holder.startswith(f"pid {os.getpid()} on host ")
        assert session.id in str(busy.value)
        first.flush()
        n = len(first.events)
        raw = [
            event_from_parts("turn/start", n, 0, {"turn": first.next_turn}),
            event_from_parts("turn/end", n + 1, 0, {"turn": first.next_turn, "reason": {"kind": "completed"}}),
        ]
        with pytest.raises(SessionBusyError):  # a raw append is a writer too
            store.append(session.id, raw, expected_seq=n)
        with pytest.raises(SessionBusyError):
            store.delete(session.id)
        assert _wire(store.inspect(session.id).events) == _wire(first.events)  # readers never need the lease
        assert _wire(store.read(session.id)) == _wire(first.events)
        validate(store.read(session.id))
        first.close()
        second = store.open(session.id)  # released on close
        assert second.open_turn is None and _wire(second.events) == _wire(first.events)
        second.close()
        store.append(session.id, raw, expected_seq=n)
        store.delete(session.id)
        assert not store.exists(session.id)

    def test_a_live_fork_holds_its_own_lease_not_its_parents(self, store: SessionStore) -> None:
        parent = store.create()
        TurnScript(parent).turn()
        parent.flush()
        child = store.fork(parent.id)
        with pytest.raises(SessionBusyError):
            store.open(child.id)
        TurnScript(parent).turn("the parent keeps writing")
        parent.close()
        child.close()
        store.open(child.id).close()

    def test_identical_resend_is_a_no_op_and_different_content_conflicts(self, store: SessionStore) -> None:
        session = store.create()
        TurnScript(session).turn()
        session.flush()
        events = list(store.read(session.id))
        store.append(session.id, events[-3:], expected_seq=len(events) - 3)  # a retry after a lost reply
        assert _wire(store.read(session.id)) == _wire(events)
        altered = [
            *events[-3:-1],
            event_from_parts(
                "turn/end",
                events[-1].seq,
                events[-1].time + 1,
                {"turn": 1, "reason": {"kind": "aborted", "reason": {"kind": "user"}}},
            ),
        ]
        with pytest.raises(ConflictError):
            store.append(session.id, altered, expected_seq=len(events) - 3)
        with pytest.raises(ConflictError):
            store.append(
                session.id,
                [event_from_parts("turn/start", len(events) + 1, 0, {"turn": 2})],
                expected_seq=len(events) + 1,
            )
        assert _wire(store.read(session.id)) == _wire(events)

    def test_store_append_validates_before_writing(self, store: SessionStore) -> None:
        session = store.create()
        TurnScript(session).turn()
        session.close()  # flushes and releases the writer, so raw appends may write
        n = len(list(store.read(session.id)))
        bad_turn = event_from_parts("turn/start", n, 0, {"turn": 7})
        with pytest.raises(InvariantError):
            store.append(session.id, [bad_turn], expected_seq=n)
        gap = [
            event_from_parts("turn/start", n, 0, {"turn": 2}),
            event_from_parts("turn/end", n + 2, 0, {"turn": 2, "reason": {"kind": "completed"}}),
        ]
        with pytest.raises(EventError):
            store.append(session.id, gap, expected_seq=n)
        assert len(list(store.read(session.id))) == n
        good = [
            event_from_parts("turn/start", n, 0, {"turn": 2}),
            event_from_parts("turn/end", n + 1, 0, {"turn": 2, "reason": {"kind": "completed"}}),
        ]
        store.append(session.id, good, expected_seq=n)
        assert len(list(store.read(session.id))) == n + 2

    def test_concurrent_writers_never_interleave(self, store: SessionStore) -> None:
        session = store.create()
        session.close()
        wins: list[int] = []
        errors: list[BaseException] = []

        def writer(index: int) -> None:
            try:
                for _ in range(5):
                    while True:
                        stored = list(store.read(session.id))
                        n = len(stored)
                        turn = sum(1 for e in stored if e.type == "turn/start") + 1
                        batch = [
                            event_from_parts("turn/start", n, index, {"turn": turn}),
                            event_from_parts("turn/end", n + 1, index, {"turn": turn, "reason": {"kind": "completed"}}),
                        ]
                        try:
                            store.append(session.id, batch, expected_seq=n)
                        except (ConflictError, InvariantError):
                            continue
                        wins.append(index)
                        break
            except BaseException as error:  # pragma: no cover - reported below
                errors.append(error)

        threads = [threading.Thread(target=writer, args=(i,)) for i in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not errors
        stored = list(store.read(session.id))
        assert len(stored) == 2 * len(wins) == 40
        assert [e.seq for e in stored] == list(range(40))
        validate(stored)

    # -- follow -------------------------------------------------------------------------

    def test_follow_yields_stored_then_committed_events_until_stopped(self, store: SessionStore) -> None:
        session = store.create()
        TurnScript(session).turn("before")
        session.flush()
        stop = threading.Event()
        deadline = time.monotonic() + 30  # a follower that never wakes fails the test instead of hanging it
        follower = store.follow(
            session.id, from_seq=2, poll_interval=0.01, stop=lambda: stop.is_set() or time.monotonic() > deadline
        )
        seen = [next(follower) for _ in range(len(session.events) - 2)]  # the stored suffix comes first
        assert _wire(seen) == _wire(session.events[2:])

        def write() -> None:
            for index in range(3):
                TurnScript(session).turn(f"live {index}")
                session.flush()  # only flushed (committed) events may be followed
            session.close()

        writer = threading.Thread(target=write)
        writer.start()
        try:
            while len(seen) < 2 or seen[-1].type != "turn/end" or seen[-1].data["turn"] != 4:
                seen.append(next(follower))
        finally:
            writer.join()
        stop.set()
        assert list(follower) == []  # ends once stopped
        assert [e.seq for e in seen] == list(range(2, len(session.events)))  # no gap, no duplicate
        assert _wire(seen) == _wire(store.read(session.id, 2))
        with pytest.raises(SessionNotFound):
            store.follow("nope")
        with pytest.raises(ValueError, match="from_seq"):
            store.follow(session.id, -1)

    # -- repair -------------------------------------------------------------------------

    def test_open_closes_an_interrupted_turn_durably(self, store: SessionStore) -> None:
        session = store.create()
        TurnScript(session).turn()
        call_seq = _open_turn_with_started_call(session)
        session.close()  # the writer goes away mid-turn, as a crashed process would (closing adds no closers)
        crashed = len(session.events)
        reopened = self.reopen(store).open(session.id)
        tail = list(store.read(session.id, from_seq=crashed))
        assert [e.type for e in tail] == ["tool/result", "tool/result", "step/end", "turn/end"]
        unknown, not_started = tail[0], tail[1]
        assert unknown.data["error"]["code"] == "TOOL_OUTCOME_UNKNOWN"
        assert unknown.source_event_seqs == (call_seq,)
        assert "Do not retry blindly." in unknown.data["message"]["content"][0]["text"]
        assert not_started.data["error"]["code"] == "TOOL_NOT_STARTED"
        assert not_started.data["message"]["id"] == f"interrupted-tool-result-call-b-{crashed + 1}"
        assert tail[-1].data["reason"] == {"kind": "interrupted"}
        assert reopened.open_turn is None and reopened.next_turn == 3
        assert [m.role for m in reopened.derive_messages()][-2:] == ["tool", "tool"]
        validate(store.read(session.id))
        reopened.close()

    def test_inspect_shows_the_repair_without_writing(self, store: SessionStore) -> None:
        session = store.create()
        _open_turn_with_started_call(session)
        session.flush()
        before = _wire(store.read(session.id))
        view = store.inspect(session.id)
        assert view.events[-1].type == "turn/end" and view.events[-1].data["reason"]["kind"] == "interrupted"
        assert view.read_only
        with pytest.raises(ReadOnlySessionError):
            view.append("user/message", user_message("x"), surface_op="append")
        assert _wire(store.read(session.id)) == before
        assert store.stat(session.id).event_count == len(before)

    # -- fork ---------------------------------------------------------------------------

    def test_fork_inherits_the_prefix_and_leaves_the_parent_alone(self, store: SessionStore) -> None:
        parent = store.create(cwd="/w")
        TurnScript(parent).turn("one")
        boundary = len(parent.events) - 1
        TurnScript(parent).turn("two")
        parent.flush()
        before = _wire(store.read(parent.id))
        child = store.fork(parent.id, boundary, child_id="child-1")
        assert child.header.parent_session == parent.id and child.header.is_seeded
        assert child.header.cwd == "/w"
        assert child.inherited_event_count == boundary + 1
        assert _wire(child.events[: boundary + 1]) == before[: boundary + 1]
        assert child.events[boundary + 1].type == "session/end-seed"
        assert child.events[boundary + 1].data == {"inherited": True}
        assert child.next_turn == 2
        TurnScript(child).turn("child's own")
        child.flush()
        assert _wire(store.read(parent.id)) == before
        fresh = self.reopen(store)
        assert _wire(fresh.read("child-1")) == _wire(child.events)
        assert "child-1" in fresh.stat(parent.id).forks
        grandchild = fresh.fork("child-1", child_id="grandchild")
        assert _wire(grandchild.events[: len(child.events)]) == _wire(child.events)

    def test_fork_errors_create_nothing(self, store: SessionStore) -> None:
        parent = store.create(session_id="parent")
        TurnScript(parent).turn()
        TurnScript(parent).turn(close=False)
        parent.flush()
        store.create(session_id="exists")
        with pytest.raises(ForkError) as caught:
            store.fork("parent", 10_000, child_id="exists")
        assert caught.value.code == "SESSION_ALREADY_EXISTS"
        with pytest.raises(ForkError) as caught:
            store.fork("missing", child_id="c1")
        assert caught.value.code == "SESSION_NOT_FOUND"
        with pytest.raises(ForkError) as caught:
            store.fork("parent", 10_000, child_id="c2")
        assert caught.value.code == "INVALID_BOUNDARY"
        with pytest.raises(ForkError) as caught:
            store.fork("parent", child_id="c3")
        assert caught.value.code == "OPEN_TURN"
        assert not any(store.exists(c) for c in ("c1", "c2", "c3"))
        closed = store.fork("parent", child_id="c4", close_open_turn=True)
        assert closed.events[-1].data["reason"] == {"kind": "forked"}
        validate(store.read("c4"))

    def test_delete_respects_forks_that_share_history(self, store: SessionStore) -> None:
        parent = store.create(session_id="p")
        TurnScript(parent).turn()
        parent.close()  # deleting needs no live writer on the session (single-writer backends refuse)
        child = store.fork("p", child_id="kid")
        TurnScript(child).turn()
        child.close()
        expected = _wire(store.read("kid"))
        if store.zero_copy_fork:
            with pytest.raises(StoreError, match="kid"):
                store.delete("p")
            assert store.exists("p")
            store.delete("p", detach_forks=True)
        else:
            store.delete("p")
        assert not store.exists("p")
        assert _wire(self.reopen(store).read("kid")) == expected
        store.delete("kid")
        assert not store.exists("kid")

    # -- list / stat --------------------------------------------------------------------

    def test_list_and_stat(self, store: SessionStore) -> None:
        a = store.create(session_id="a")
        b = store.create(session_id="b")
        TurnScript(b).turn()
        b.flush()
        infos = {info.id: info for info in self.reopen(store).list()}
        assert set(infos) >= {"a", "b"}
        assert infos["a"].event_count == 0
        assert infos["b"].event_count == len(b.events)
        assert infos["b"].updated_at == b.events[-1].time
        assert infos["a"].updated_at == a.header.created_at

    def test_lengths_are_the_listing_s_event_counts(self, store: SessionStore) -> None:
        """``lengths`` is what semantic search checks for changes: it must move with every append, fork and delete."""
        a = store.create(session_id="a")
        b = store.create(session_id="b")
        TurnScript(b).turn()
        b.flush()
        before = store.lengths()
        assert before == {info.id: info.event_count for info in store.list()}
        assert before["a"] == 0 and before["b"] == len(b.events)
        TurnScript(a).turn()
        a.flush()
        store.fork_stored("b", child_id="b2")
        a.close()
        store.delete("a")
        after = self.reopen(store).lengths()
        assert after == {info.id: info.event_count for info in store.list()}
        assert "a" not in after and after["b"] == before["b"] and after["b2"] >= before["b"]

    def test_list_page_is_the_cut_of_the_full_listing(self, store: SessionStore) -> None:
        """Every filter, order and cursor position of ``list_page`` agrees with cutting ``list()``, ties included."""
        root = store.create(session_id="root", cwd="/p")
        TurnScript(root).turn()
        root.close()
        document = store.export("root")
        for twin in ("twin-b", "twin-a", "twin-c"):  # same header times: ties broken by id
            store.import_session(document, session_id=twin)
        fork = store.fork("root")
        fork.close()
        for number in range(4):
            with store.create(session_id=f"s{number}", cwd=None if number == 3 else f"/w{number % 2}") as session:
                if number % 2:
                    TurnScript(session).turn()
        listing = self.reopen(store).list()
        created = sorted({info.created_at for info in listing})
        requests = [
            PageRequest(limit=100),
            PageRequest(limit=3),
            PageRequest(sort="updated", limit=100),
            PageRequest(descending=False, limit=4),
            PageRequest(sort="updated", descending=False, limit=100),
            PageRequest(parent=(None,), limit=100),
            PageRequest(parent=("root",), limit=100),
            PageRequest(cwd=("/w1", None), limit=100),
            PageRequest(cwd=(), limit=100),
            PageRequest(ids=("twin-a", "s2", "missing"), limit=100),
            PageRequest(exclude_ids=("twin-a", "root"), limit=100),
            PageRequest(created_from=created[1], created_to=created[-2], limit=100),
            PageRequest(limit=0),
        ]
        for request in requests:
            expected = request.cut(listing)
            assert store.list_page(request) == expected, request
            for last in expected:  # every cursor position, in both orders
                after = replace(request, after=(request.key(last), last.id))
                assert store.list_page(after) == after.cut(listing), after
        ties = [info.id for info in store.list_page(PageRequest(ids=("twin-b", "twin-a", "twin-c", "root")))]
        assert ties == ["root", "twin-a", "twin-b", "twin-c"]
        for info in listing:  # a listed info saves reading the header and length again, and changes nothing
            assert store.projections(info.id, info=info) == store.projections(info.id)
        other = next(info for info in listing if info.id != "root")
        with pytest.raises(ValueError, match="info of session"):
            store.projections("root", info=other)

    # -- export / import ----------------------------------------------------------------

    def test_export_import_round_trip(self, store: SessionStore) -> None:
        session = store.create(cwd="/w")
        TurnScript(session).turn(steps=2, system="sys")
        session.flush()
        document = store.export(session.id)
        assert document["header"]["id"] == session.id
        copy = store.import_session(document, session_id="copy")
        assert copy.event_count == len(session.events)
        assert _wire(store.read("copy")) == _wire(session.events)
        with pytest.raises(SessionExistsError):
            store.import_session(document)

    def test_import_refuses_tampering_and_stores_nothing(self, store: SessionStore) -> None:
        session = store.create()
        TurnScript(session).turn()
        session.flush()
        document = store.export(session.id)
        prompt = next(e for e in document["events"] if e["type"] == "user/message")
        prompt["data"]["content"] = [{"type": "text", "text": "forged"}]
        with pytest.raises(CorruptSessionError, match="digest"):
            store.import_session(document, session_id="forged")
        assert not store.exists("forged")
        truncated = store.export(session.id)
        truncated["events"].pop()
        with pytest.raises(CorruptSessionError):
            store.import_session(truncated, session_id="cut")
        assert not store.exists("cut")

    def test_import_checks_vocabulary_and_version(self, store: SessionStore) -> None:
        from dshpy.storage.base import events_digest

        session = store.create()
        session.append("user/message", user_message("hi"), surface_op="append")
        session.flush()

        def document_with(events: list[SessionEvent], version: int = 4) -> dict[str, Any]:
            doc = store.export(session.id)
            doc["header"]["version"] = version
            doc["events"] = [e.to_wire() for e in events]
            doc["eventsSha256"] = events_digest(events)
            return doc

        base = list(store.read(session.id))
        unknown = event_from_parts("future/thing", 1, 0, {"x": 1})
        with pytest.raises(UnknownEventTypeError, match="future/thing"):
            store.import_session(document_with([*base, unknown]), session_id="u1")
        skippable = event_from_parts("future/thing", 1, 0, {"x": 1}, ignorable=True)
        store.import_session(document_with([*base, skippable]), session_id="u2")
        assert _wire(store.read("u2"))[-1] == skippable.to_wire()
        with pytest.raises(FormatVersionError, match="upgrade"):
            store.import_session(document_with(base, version=5), session_id="u3")
        assert not store.exists("u1") and not store.exists("u3")
