"""``session_search`` / ``session_read``: scoped to the cwd (or all), the current session left out, cited results."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

import dshpy
from dshpy.agent.memory_tools import memory_tools
from dshpy.agent.tools import Tool, ToolContext, ToolOutcome
from dshpy.testing.builders import TurnScript


@pytest.fixture
def store():
    opened = dshpy.open_store("memory:")
    for sid, cwd, prompt in [
        ("alpha", "/srv/app", "connection refused when dialing the database"),
        ("other", "/elsewhere", "connection refused over there"),
    ]:
        with opened.create(session_id=sid, cwd=cwd) as session:
            TurnScript(session).turn(prompt)
    yield opened
    opened.close()


@pytest.fixture
def current(store):
    session = store.create(session_id="now", cwd="/srv/app")
    TurnScript(session).turn("connection refused right now")
    session.flush()
    yield session
    session.close()


def _call(tool: Tool, session: Any, **arguments: Any) -> ToolOutcome:
    context = ToolContext(agent=None, session=session, call_id="c1", turn=1, step=1)
    return asyncio.run(tool.invoke(json.dumps(arguments), context))


def _text(outcome: ToolOutcome) -> str:
    return str(outcome.content[0]["text"])


def test_search_sees_this_directory_without_the_current_session(store, current):
    search, _read = memory_tools(store)
    outcome = _call(search, current, query="connection refused")

    assert not outcome.is_error
    assert _text(outcome).splitlines()[1] == "[alpha#4] user/message: «connection refused» when dialing the database"
    assert outcome.meta == {"hits": [["alpha", 4]]}


def test_scope_all_sees_every_directory(store, current):
    search, _read = memory_tools(store, scope="all")
    outcome = _call(search, current, query="connection refused")

    assert {tuple(hit) for hit in outcome.meta["hits"]} == {("alpha", 4), ("other", 4)}
    with pytest.raises(ValueError, match="memory scope"):
        memory_tools(store, scope="everything")  # type: ignore[arg-type]


def test_search_reports_no_matches_and_refusals(store, current):
    search, _read = memory_tools(store)
    assert _text(_call(search, current, query="kiwi")).startswith("No matches for 'kiwi' in sessions in /srv/app")
    refused = _call(search, current, query="\x00")
    assert refused.is_error and "SESSION_QUERY_INVALID_QUERY" in _text(refused)
    too_many = _call(search, current, query="x", limit=50)
    assert too_many.is_error and "limit" in _text(too_many)


def test_read_shows_a_window_marking_the_target(store, current):
    _search, read = memory_tools(store)
    outcome = _call(read, current, session_id="alpha", seq=4, before=1, after=1)

    lines = _text(outcome).splitlines()
    assert lines[0] == "Session alpha, events 3..5 (> marks #4):"
    assert lines[2] == ">#4 user/message: connection refused when dialing the database"
    assert outcome.meta == {"session": "alpha", "seqs": [3, 5]}


def test_read_refuses_sessions_out_of_scope_bad_ids_and_missing_events(store, current):
    _search, read = memory_tools(store)
    assert "no session 'other' among the sessions in /srv/app" in _text(_call(read, current, session_id="other", seq=1))
    assert "no session 'ghost'" in _text(_call(read, current, session_id="ghost", seq=1))
    assert "is not a session id" in _text(_call(read, current, session_id="../x", seq=1))
    missing = _call(read, current, session_id="alpha", seq=999)
    assert missing.is_error and "SESSION_QUERY_EVENT_NOT_FOUND" in _text(missing)
    _search, wide = memory_tools(store, scope="all")
    assert not _call(wide, current, session_id="other", seq=4).is_error
    assert not _call(read, current, session_id="now", seq=0).is_error  # its own log is in scope
