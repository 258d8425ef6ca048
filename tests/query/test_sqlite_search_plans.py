"""SQLite's two search plans: a few sessions walk only their stretch of the index, and a very common match
is ranked by recency."""

from __future__ import annotations

from pathlib import Path

import dshpy
from dshpy.query import SessionQuery
from dshpy.storage import sqlite_search
from dshpy.testing.builders import TurnScript


def _sessions(store: dshpy.SessionStore, count: int) -> list[str]:
    """``count`` sessions; the two oldest say "needle" most often, so bm25 ranks them first."""
    made = []
    for index in range(count):
        with store.create(cwd=f"/p{index % 2}") as session:
            TurnScript(session).turn("needle needle needle" if index < 2 else f"needle number {index}")
        made.append(session.id)
    return made


def test_a_whole_store_search_past_the_window_ranks_the_most_recent_matches(tmp_path: Path, monkeypatch) -> None:
    store = dshpy.open_store(f"sqlite:///{tmp_path}/s.db")
    made = _sessions(store, 5)
    query = SessionQuery(store)
    ranked = query.search("needle", limit=2).hits
    assert {hit.session_id for hit in ranked} == set(made[:2])
    monkeypatch.setattr(sqlite_search, "RANK_WINDOW", 3)
    first = query.search("needle", limit=2)
    assert {hit.session_id for hit in first.hits} <= set(made[-3:])  # ranked among the 3 most recent matches
    second = query.search("needle", limit=2, cursor=first.next_cursor)  # a page never reaches past the window
    assert len(second.hits) == 2
    filtered = query.search("needle", filters={"cwd": ["/p0", "/p1"]})  # a filtered search ranks every match
    assert {hit.session_id for hit in filtered.hits} == set(made)
    store.close()


def test_a_search_of_a_few_sessions_walks_only_their_keys(tmp_path: Path) -> None:
    store = dshpy.open_store(f"sqlite:///{tmp_path}/s.db")
    made = _sessions(store, 4)
    child = store.fork(made[0])
    TurnScript(child).turn("needle in the fork")
    child.close()
    query = SessionQuery(store)
    statements: list[str] = []
    store._db.set_trace_callback(statements.append)  # type: ignore[attr-defined]
    hits = query.search("needle", session_id=child.id).hits
    store._db.set_trace_callback(None)  # type: ignore[attr-defined]
    assert {hit.seq for hit in hits} == {
        4,
        next(e.seq for e in store.read(child.id) if e.type == "user/message" and e.seq > 4),
    }
    assert any("search_text.rowid BETWEEN" in statement for statement in statements)
    everyone = query.search("needle", filters={"ids": made})
    assert {hit.session_id for hit in everyone.hits} == set(made)
    store.close()
