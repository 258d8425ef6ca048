"""The session-query part of the backend contract: search, listing, reading and tracing, on every store.

:class:`~dshpy.testing.contract.StoreContract` inherits these tests, so every backend
that runs the contract runs them: a store with a search index
(:class:`~dshpy.storage.backend.SearchIndex`) and one that is scanned must find the
same events, page them the same way and refuse the same bad input. They go through
the public surface only (:mod:`dshpy.query`).
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from dshpy.core.events import SurfaceReplace
from dshpy.log import records
from dshpy.log.session import Session
from dshpy.projections.commands import set_lifecycle
from dshpy.query import (
    InvalidQueryError,
    QueryError,
    QueryNotFoundError,
    SessionQuery,
    StaleCursorError,
)
from dshpy.storage.contract import SessionStore
from dshpy.testing.builders import TurnScript, assistant_data, attempt_data, text_stream, user_message

__all__ = ["SearchContract"]


def _talk(session: Session, prompt: str, reply: str, *, tool: tuple[str, str, str] | None = None) -> dict[str, int]:
    """One closed turn: ``prompt``, a ``reply`` (calling ``tool`` = ``(name, arguments, output)`` if given), and
    its result; returns the seqs of what was appended by type."""
    turn = session.next_turn
    seqs: dict[str, int] = {}
    session.append("turn/start", {"turn": turn})
    session.append("step/start", {"turn": turn, "step": 1})
    seqs["user"] = session.append("user/message", user_message(prompt), surface_op="append").seq
    calls = [] if tool is None else [(f"call-{turn}", tool[0], tool[1])]
    data = assistant_data(turn, 1, reply, tool_calls=calls, reasoning="secret musing about pelicans")
    seqs["assistant"] = session.append("assistant/message", data, surface_op="append").seq
    if tool is not None:
        seqs["call"] = session.append("tool/call", records.tool_call_data(turn, 1, calls[0][0], tool[0], tool[1])).seq
        result = records.tool_result_data(
            turn,
            1,
            calls[0][0],
            [{"type": "text", "text": tool[2]}],
            is_error=True,
            error={"name": "ToolTimeout", "code": "E_TOOL_TIMEOUT"},
        )
        seqs["result"] = session.append(
            "tool/result", result, surface_op="append", source_event_seqs=[seqs["call"]]
        ).seq
    session.append("step/end", {"turn": turn, "step": 1})
    seqs["end"] = session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}}).seq
    return seqs


def _found(page: Any) -> list[tuple[str, int]]:
    return [(hit.session_id, hit.seq) for hit in page.hits]


class SearchContract:
    """Session query behaviour every backend must show (mixed into the store contract)."""

    def reopen(self, store: SessionStore) -> SessionStore:
        return store

    # -- search: what is found ------------------------------------------------------------

    def test_search_finds_what_the_same_flush_appended(self, store: SessionStore) -> None:
        session = store.create(cwd="/srv/app")
        seqs = _talk(session, "why does the flux capacitor overheat", "It lacks coolant.")
        query = SessionQuery(store)
        assert query.search("flux capacitor").hits == []  # not flushed: not stored, not found
        session.flush()
        page = SessionQuery(self.reopen(store)).search("flux capacitor")
        assert _found(page) == [(session.id, seqs["user"])]
        hit = page.hits[0]
        assert hit.type == "user/message"
        assert hit.snippet.text == "why does the flux capacitor overheat"
        assert hit.snippet.marked() == "why does the [flux capacitor] overheat"
        assert page.next_cursor is None
        session.close()

    def test_search_indexes_exactly_what_dsh_extracts(self, store: SessionStore) -> None:
        session = store.create()
        seqs = _talk(
            session, "hello", "I will grep", tool=("ripgrep_search", '{"pattern": "quasar"}', "no quasar matched")
        )
        turn = session.next_turn
        session.append("turn/start", {"turn": turn})
        session.append("step/start", {"turn": turn, "step": 1})
        todo = session.append("todo/write", {"todos": [{"content": "polish the nebula", "status": "in_progress"}]})
        attempt = session.append("assistant/attempt", attempt_data(turn, 1, "zeppelin partial words"))
        session.append("step/end", {"turn": turn, "step": 1})
        failure = {"message": "upstream gateway meltdown", "code": "UNKNOWN"}
        end = session.append("turn/end", {"turn": turn, "reason": {"kind": "error", "error": failure}})
        session.flush()
        query = SessionQuery(store)
        by_type = {hit.type: hit.seq for hit in query.search("quasar").hits}
        assert by_type == {
            "assistant/message": seqs["assistant"],
            "tool/call": seqs["call"],
            "tool/result": seqs["result"],
        }
        named = set(_found(query.search("ripgrep search")))  # the tool's name, in the call and in the message
        assert named == {(session.id, seqs["assistant"]), (session.id, seqs["call"])}
        assert _found(query.search("E_TOOL_TIMEOUT")) == [(session.id, seqs["result"])]
        assert _found(query.search("ToolTimeout")) == [(session.id, seqs["result"])]
        assert _found(query.search("polish the nebula")) == [(session.id, todo.seq)]
        assert _found(query.search("in progress")) == [(session.id, todo.seq)]
        assert _found(query.search("gateway meltdown")) == [(session.id, end.seq)]
        assert query.search("pelicans").hits == []  # reasoning is no text
        assert query.search("zeppelin").hits == []  # a failed attempt is never indexed
        assert attempt.seq not in {hit.seq for hit in query.search("partial").hits}
        assert query.search("completed").hits == []  # a completed turn says nothing
        session.close()

    def test_words_are_matched_as_the_index_cuts_them(self, store: SessionStore) -> None:
        session = store.create()
        seqs = _talk(session, "Le Café: parse_config() raised KeyError", "Voilà.")
        session.flush()
        query = SessionQuery(store)
        for text in ("cafe", "CAFÉ", "parse config", "parse_config", "config() raised", "keyerror"):
            assert _found(query.search(text)) == [(session.id, seqs["user"])], text
        assert query.search("raised parse").hits == []  # a phrase keeps its order
        assert query.search("pars").hits == []  # whole words unless a prefix is asked for
        assert _found(query.search("pars*", operators=True)) == [(session.id, seqs["user"])]
        session.close()

    def test_operators_only_when_asked(self, store: SessionStore) -> None:
        session = store.create()
        a = _talk(session, "alpha bravo charlie", "ok")["user"]
        b = _talk(session, "alpha delta", "ok")["user"]
        c = _talk(session, "echo OR foxtrot", "ok")["user"]
        session.flush()
        query = SessionQuery(store)
        assert _found(query.search("echo OR foxtrot")) == [(session.id, c)]  # literal: OR is a word
        assert set(_found(query.search("bravo OR delta", operators=True))) == {(session.id, a), (session.id, b)}
        assert _found(query.search("alpha -bravo", operators=True)) == [(session.id, b)]
        assert _found(query.search("alpha NOT delta", operators=True)) == [(session.id, a)]
        assert _found(query.search('"alpha bravo" charlie', operators=True)) == [(session.id, a)]
        assert _found(query.search("alph* delta", operators=True)) == [(session.id, b)]
        session.close()

    def test_ranking_prefers_the_better_match(self, store: SessionStore) -> None:
        session = store.create()
        weak = _talk(session, "the gizmo " + "filler words here " * 30, "ok")["user"]
        strong = _talk(session, "gizmo gizmo gizmo", "ok")["user"]
        session.flush()
        assert [hit.seq for hit in SessionQuery(store).search("gizmo").hits] == [strong, weak]
        session.close()

    # -- search: forks, deletes, filters, pages ----------------------------------------------

    def test_forks_find_their_inherited_prefix(self, store: SessionStore) -> None:
        parent = store.create(cwd="/w")
        first = _talk(parent, "the marmalade incident", "noted")["user"]
        parent.close()
        query = SessionQuery(store)
        before = query.index_status().documents
        child = store.fork(parent.id)
        own = _talk(child, "marmalade again, in the fork", "noted")["user"]
        child.close()
        assert set(_found(query.search("marmalade", session_id=child.id))) == {(child.id, first), (child.id, own)}
        assert _found(query.search("marmalade", session_id=parent.id)) == [(parent.id, first)]
        assert set(_found(query.search("marmalade"))) == {(parent.id, first), (child.id, first), (child.id, own)}
        after = query.index_status().documents
        if store.zero_copy_fork and before is not None and after is not None:
            assert after == before + 2  # the fork's own prompt and reply: the prefix was not indexed again
        grandchild = store.fork(child.id)
        grandchild.close()
        found = set(_found(query.search("marmalade", session_id=grandchild.id)))
        assert found == {(grandchild.id, first), (grandchild.id, own)}

    def test_search_filters_forks_by_header_and_lineage(self, store: SessionStore) -> None:
        parent = store.create(cwd="/tree")
        first = _talk(parent, "quince jelly recipe", "ok")["user"]
        parent.close()
        time.sleep(0.002)
        child = store.fork(parent.id)
        own = _talk(child, "more quince", "ok")["user"]
        child.close()
        query = SessionQuery(store)
        roots = _found(query.search("quince", filters={"parent": None}))
        assert roots == [(parent.id, first)]
        forks = set(_found(query.search("quince", filters={"parent": [parent.id], "cwd": "/tree"})))
        assert forks == {(child.id, first), (child.id, own)}
        created = store.stat(child.id).created_at
        older = _found(query.search("quince", filters={"created_to": created - 1}))
        assert older == [(parent.id, first)]
        newer = set(_found(query.search("quince", filters={"created_from": created})))
        assert newer == {(child.id, first), (child.id, own)}
        tree = set(_found(query.search("quince", filters={"lineage": parent.id, "exclude_ids": [parent.id]})))
        assert tree == {(child.id, first), (child.id, own)}
        assert query.search("quince", filters={"cwd": None}).hits == []

    def test_deleting_a_session_removes_its_hits(self, store: SessionStore) -> None:
        keep, drop = store.create(), store.create()
        kept = _talk(keep, "a kumquat for the archive", "ok")["user"]
        _talk(drop, "a kumquat to forget", "ok")
        keep.close()
        drop.close()
        query = SessionQuery(store)
        assert len(query.search("kumquat").hits) == 2
        store.delete(drop.id)
        assert _found(SessionQuery(self.reopen(store)).search("kumquat")) == [(keep.id, kept)]
        with pytest.raises(QueryNotFoundError) as missing:
            query.search("kumquat", session_id=drop.id)
        assert missing.value.code == "SESSION_QUERY_SESSION_NOT_FOUND"

    def test_deleting_a_parent_with_detached_forks_keeps_their_hits(self, store: SessionStore) -> None:
        parent = store.create()
        seq = _talk(parent, "the walrus protocol", "ok")["user"]
        parent.close()
        child = store.fork(parent.id)
        child.close()
        store.delete(parent.id, detach_forks=True)
        assert _found(SessionQuery(store).search("walrus protocol")) == [(child.id, seq)]

    def test_search_filters_sessions_and_events(self, store: SessionStore) -> None:
        here, there = store.create(cwd="/here"), store.create(cwd="/there")
        seqs_here = _talk(here, "lighthouse keeper", "lighthouse beam", tool=("lamp", "{}", "lighthouse lit"))
        seqs_there = _talk(there, "lighthouse keeper", "ok")
        set_lifecycle(there, "completed")
        here.close()
        there.close()
        query = SessionQuery(store)
        assert {sid for sid, _ in _found(query.search("lighthouse", filters={"cwd": "/here"}))} == {here.id}
        assert _found(query.search("lighthouse", filters={"state": "completed"})) == [(there.id, seqs_there["user"])]
        assert {sid for sid, _ in _found(query.search("lighthouse", filters={"exclude_ids": [here.id]}))} == {there.id}
        typed = query.search("lighthouse", types=["tool/result"])
        assert _found(typed) == [(here.id, seqs_here["result"])]
        events = list(store.read(here.id))
        at = events[seqs_here["assistant"]].time
        timed = query.search("lighthouse", session_id=here.id, since=at, until=at)
        assert {hit.time for hit in timed.hits} == {at}
        assert query.search("lighthouse", filters={"cwd": "/nowhere"}).hits == []
        assert query.search("lighthouse", filters={"ids": []}).hits == []  # an empty list matches nothing

    def test_search_pages_with_cursors_and_stale_ones_are_refused(self, store: SessionStore) -> None:
        sessions = [store.create() for _ in range(3)]
        for session in sessions:
            for _ in range(2):
                _talk(session, "pagination pineapple", "ok")
            session.close()
        query = SessionQuery(store)
        seen: list[tuple[str, int]] = []
        page = query.search("pineapple", limit=4)
        while True:
            assert len(page.hits) <= 4
            seen += _found(page)
            if page.next_cursor is None:
                break
            page = query.search("pineapple", limit=4, cursor=page.next_cursor)
        assert len(seen) == len(set(seen)) == 6
        first = query.search("pineapple", limit=2)
        assert first.next_cursor is not None
        with pytest.raises(InvalidQueryError) as other:
            query.search("another query", limit=2, cursor=first.next_cursor)
        assert other.value.code == "SESSION_QUERY_INVALID_CURSOR"
        store.delete(sessions[0].id)
        with pytest.raises(StaleCursorError) as stale:
            query.search("pineapple", limit=2, cursor=first.next_cursor)
        assert stale.value.code == "SESSION_QUERY_STALE_CURSOR"

    def test_bad_search_input_is_refused_clearly(self, store: SessionStore) -> None:
        query = SessionQuery(store)
        cases: list[tuple[dict[str, Any], str, str]] = [
            ({"query": ""}, "SESSION_QUERY_INVALID_QUERY", "empty"),
            ({"query": "  \n\t "}, "SESSION_QUERY_INVALID_QUERY", "empty"),
            ({"query": "null\x00byte"}, "SESSION_QUERY_INVALID_QUERY", "NUL"),
            ({"query": "x" * (1 << 20)}, "SESSION_QUERY_INVALID_QUERY", "4096"),
            ({"query": "y" * 4097}, "SESSION_QUERY_INVALID_QUERY", "at most 4096"),
            ({"query": "?! -- ..."}, "SESSION_QUERY_INVALID_QUERY", "no words"),
            ({"query": 'un "balanced', "operators": True}, "SESSION_QUERY_INVALID_QUERY", "unbalanced"),
            ({"query": "-only", "operators": True}, "SESSION_QUERY_INVALID_QUERY", "exclude"),
            ({"query": "ok", "filters": {"colour": "red"}}, "SESSION_QUERY_INVALID_FILTER", "unknown filter 'colour'"),
            ({"query": "ok", "filters": {"state": "asleep"}}, "SESSION_QUERY_INVALID_FILTER", "asleep"),
            ({"query": "ok", "since": "2024-01-01T10:00"}, "SESSION_QUERY_INVALID_FILTER", "time zone"),
            ({"query": "ok", "limit": 0}, "SESSION_QUERY_INVALID_LIMIT", "limit"),
            ({"query": "ok", "limit": 101}, "SESSION_QUERY_INVALID_LIMIT", "100"),
            ({"query": "ok", "cursor": "garbage"}, "SESSION_QUERY_INVALID_CURSOR", "cursor"),
            ({"query": "ok", "cursor": "v1.!!!"}, "SESSION_QUERY_INVALID_CURSOR", "cursor"),
        ]
        for arguments, code, words in cases:
            with pytest.raises(InvalidQueryError) as refused:
                query.search(**arguments)
            assert refused.value.code == code, arguments
            assert words in str(refused.value), arguments
        with pytest.raises(QueryNotFoundError):
            query.search("ok", session_id="no-such-session")

    def test_the_index_can_be_rebuilt(self, store: SessionStore) -> None:
        session = store.create()
        seq = _talk(session, "rebuild the zeppelin hangar", "ok")["user"]
        session.close()
        query = SessionQuery(store)
        status = query.rebuild_index()
        assert status.kind in ("scan", "sqlite-fts5", "postgres-tsvector", "jsonl-fts5-sidecar")
        assert _found(query.search("zeppelin hangar")) == [(session.id, seq)]
        assert query.index_status().pending == 0

    # -- listing -------------------------------------------------------------------------

    def test_list_filters_sorts_and_pages(self, store: SessionStore) -> None:
        made = []
        for index in range(5):
            session = store.create(cwd="/list" if index % 2 == 0 else "/other")
            TurnScript(session).turn(f"list prompt number {index}", steps=1 + index % 2)
            if index == 4:
                set_lifecycle(session, "paused")
            session.close()
            made.append(session.id)
            time.sleep(0.002)  # distinct creation times
        query = SessionQuery(store)
        newest_first = [summary.id for summary in query.list().sessions]
        assert newest_first == list(reversed(made))
        oldest_first = [summary.id for summary in query.list(descending=False).sessions]
        assert oldest_first == made
        top = query.list().sessions[0]
        assert top.title == "list prompt number 4"
        assert top.state == "paused"
        assert top.turns == 1
        assert top.models == ("deepseek-chat",)
        assert [s.id for s in query.list({"cwd": "/list"}).sessions] == [made[4], made[2], made[0]]
        assert [s.id for s in query.list({"state": ["paused"]}).sessions] == [made[4]]
        assert [s.id for s in query.list({"title": "NUMBER 3"}).sessions] == [made[3]]
        assert {s.id for s in query.list({"min_turns": 1, "model": "DeepSeek-Chat"}).sessions} == set(made)
        assert query.list({"min_turns": 2}).sessions == []
        page = query.list(limit=2)
        assert [s.id for s in page.sessions] == [made[4], made[3]]
        late = store.create()  # a session created between pages does not shift them
        late.close()
        rest = query.list(limit=2, cursor=page.next_cursor)
        assert [s.id for s in rest.sessions] == [made[2], made[1]]
        last = query.list(limit=2, cursor=rest.next_cursor)
        assert [s.id for s in last.sessions] == [made[0]]
        assert last.next_cursor is None
        with pytest.raises(InvalidQueryError) as other:
            query.list({"cwd": "/list"}, limit=2, cursor=page.next_cursor)
        assert other.value.code == "SESSION_QUERY_INVALID_CURSOR"
        for bad, code in (
            ({"filters": {"nope": 1}}, "SESSION_QUERY_INVALID_FILTER"),
            ({"filters": {"min_turns": -1}}, "SESSION_QUERY_INVALID_FILTER"),
            ({"filters": {"created_from": "yesterday"}}, "SESSION_QUERY_INVALID_FILTER"),
            ({"sort": "size"}, "SESSION_QUERY_INVALID_SORT"),
            ({"limit": 10_000}, "SESSION_QUERY_INVALID_LIMIT"),
        ):
            with pytest.raises(InvalidQueryError) as refused:
                query.list(**bad)
            assert refused.value.code == code

    def test_list_by_lineage_and_parent(self, store: SessionStore) -> None:
        root = store.create()
        TurnScript(root).turn()
        root.close()
        child = store.fork(root.id)
        child.close()
        grandchild = store.fork(child.id)
        grandchild.close()
        other = store.create()
        other.close()
        query = SessionQuery(store)
        assert {s.id for s in query.list({"lineage": child.id}).sessions} == {child.id, grandchild.id}
        assert {s.id for s in query.list({"parent": root.id}).sessions} == {child.id}
        assert {s.id for s in query.list({"parent": None}).sessions} == {root.id, other.id}
        trace = query.trace_session(grandchild.id)
        assert [a.id for a in trace.ancestors] == [child.id, root.id]
        assert trace.complete and trace.root is not None and trace.root.id == root.id
        down = query.trace_session(root.id)
        assert [node.session.id for node in down.descendants] == [child.id]
        assert [node.session.id for node in down.descendants[0].forks] == [grandchild.id]
        store.delete(root.id, detach_forks=True)
        partial = query.trace_session(grandchild.id)
        assert not partial.complete and partial.unresolved_parent == root.id and partial.root is None
        with pytest.raises(QueryNotFoundError):
            query.trace_session(root.id)

    # -- reading and tracing ----------------------------------------------------------------

    def _compacted(self, store: SessionStore) -> tuple[Session, dict[str, int], int]:
        """A session whose first tool result was replaced (pruned) in the next turn."""
        session = store.create()
        seqs = _talk(session, "show the log", "reading", tool=("cat", '{"path": "log"}', "a very long log " * 20))
        turn = session.next_turn
        session.append("turn/start", {"turn": turn})
        original = session.events[seqs["result"]].data
        pruned = records.tool_result_data(
            original["turn"],
            original["step"],
            original["message"]["toolCallId"],
            [{"type": "text", "text": "[pruned]"}],
            is_error=True,
            error={"name": "ToolTimeout", "code": "E_TOOL_TIMEOUT"},
            message_id=original["message"]["id"],
        )
        replacement = session.append(
            "tool/result",
            pruned,
            surface_op=SurfaceReplace(seqs["result"], seqs["result"]),
            source_event_seqs=[seqs["result"]],
        ).seq
        session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
        session.close()
        return session, seqs, replacement

    def test_read_log_tells_where_each_event_stands(self, store: SessionStore) -> None:
        session, seqs, replacement = self._compacted(store)
        query = SessionQuery(store)
        log = query.read_log(session.id)
        where = {entry.event.seq: entry.surface for entry in log.entries}
        assert where[seqs["user"]] == "current"
        assert where[seqs["result"]] == "shadowed"
        assert where[replacement] == "current"
        assert where[seqs["call"]] == "log-only"
        assert log.next_seq is None
        shadowed = query.read_log(session.id, surface="shadowed")
        assert [entry.event.seq for entry in shadowed.entries] == [seqs["result"]]
        typed = query.read_log(session.id, types=["tool/result"], from_seq=seqs["result"] + 1)
        assert [entry.event.seq for entry in typed.entries] == [replacement]
        page = query.read_log(session.id, limit=3)
        assert [entry.event.seq for entry in page.entries] == [0, 1, 2] and page.next_seq == 3
        with pytest.raises(InvalidQueryError):
            query.read_log(session.id, surface="visible")
        with pytest.raises(QueryNotFoundError):
            query.read_log("no-such-session")

    def test_read_event_shows_a_bounded_window(self, store: SessionStore) -> None:
        session, seqs, _ = self._compacted(store)
        query = SessionQuery(store)
        window = query.read_event(session.id, seqs["assistant"], before=2, after=1)
        assert window.target.event.seq == seqs["assistant"]
        assert [e.event.seq for e in window.entries] == list(range(seqs["assistant"] - 2, seqs["assistant"] + 2))
        assert (window.start_seq, window.end_seq) == (seqs["assistant"] - 2, seqs["assistant"] + 1)
        edge = query.read_event(session.id, 0, before=50, after=0)
        assert edge.start_seq == 0 and [e.event.seq for e in edge.entries] == [0]
        for bad in ({"before": 51}, {"after": -1}, {"before": 1.5}):
            with pytest.raises(InvalidQueryError) as refused:
                query.read_event(session.id, 0, **bad)
            assert refused.value.code == "SESSION_QUERY_INVALID_WINDOW"
        with pytest.raises(QueryNotFoundError) as missing:
            query.read_event(session.id, 10_000)
        assert missing.value.code == "SESSION_QUERY_EVENT_NOT_FOUND"

    def test_trace_event_follows_replacements_and_citations(self, store: SessionStore) -> None:
        session, seqs, replacement = self._compacted(store)
        query = SessionQuery(store)
        original = query.trace_event(session.id, seqs["result"])
        assert original.target.surface == "shadowed"
        assert original.replaced_by == replacement
        assert original.replacement_chain == (replacement,)
        assert original.source_event_seqs == (seqs["call"],)
        assert original.derived_event_seqs == (replacement,)
        new = query.trace_event(session.id, replacement)
        assert new.replaced_event_seqs == (seqs["result"],) and new.replaced_by is None
        call = query.trace_event(session.id, seqs["call"])
        assert call.target.surface == "log-only" and call.derived_event_seqs == (seqs["result"],)
        with pytest.raises(QueryError) as missing:
            query.trace_event(session.id, 10_000)
        assert missing.value.code == "SESSION_QUERY_EVENT_NOT_FOUND"

    def test_inspect_reports_projections_without_repairing(self, store: SessionStore) -> None:
        session = store.create(cwd="/i")
        TurnScript(session).turn("inspect me", close=False)
        session.flush()
        stored = len(list(store.read(session.id)))
        view = SessionQuery(store).inspect(session.id)
        assert view.info.id == session.id and view.info.cwd == "/i"
        assert view.as_of_seq == stored - 1
        assert view.projections["title"]["title"] == "inspect me"
        assert len(list(store.read(session.id))) == stored  # the open turn was not closed by a query
        session.close()
        with pytest.raises(QueryNotFoundError):
            SessionQuery(store).inspect("no-such-session")

    def test_text_stream_records_are_no_text(self, store: SessionStore) -> None:
        session = store.create()
        turn = session.next_turn
        session.append("turn/start", {"turn": turn})
        session.append("step/start", {"turn": turn, "step": 1})
        data = assistant_data(turn, 1, "visible answer")
        data["stream"] = text_stream("streamed okapi chunks")
        session.append("assistant/message", data, surface_op="append")
        session.append("step/end", {"turn": turn, "step": 1})
        session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
        session.close()
        query = SessionQuery(store)
        assert query.search("okapi").hits == []
        assert len(query.search("visible answer").hits) == 1
