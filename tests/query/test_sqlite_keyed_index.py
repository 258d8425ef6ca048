"""The session database's contentless FTS5 index keyed by (session number, seq) (schema v5).

What the layout must keep: a v4 file is upgraded with its hits intact; deleting a
session takes out exactly its postings, even for text with NUL and lone surrogates
(the index is re-told the very text it was given); a deleted session's number is never
given again; a detached fork indexes its prefix under its own number; phrases work.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from sqlite_v5_layout import events_as_v5

import dshpy
from dshpy.query import SessionQuery
from dshpy.storage import sqlite as sqlite_module
from dshpy.storage.sqlite_search import FILL_FROM_EVENTS, SEARCH_SCHEMA
from dshpy.testing.builders import TurnScript, user_message


def _found(store: dshpy.SessionStore, text: str, **options: object) -> set[tuple[str, int]]:
    return {(hit.session_id, hit.seq) for hit in SessionQuery(store).search(text, **options).hits}  # type: ignore[arg-type]


def _integrity(path: Path) -> int:
    """Postings FTS5 holds (its own check raising if they do not add up), from a plain connection."""
    db = sqlite3.connect(path)
    db.execute("INSERT INTO search_text (search_text, rank) VALUES ('integrity-check', 0)")
    count = int(db.execute("SELECT count(*) FROM search_text_docsize").fetchone()[0])
    db.close()
    return count


def test_a_v4_store_is_upgraded_with_its_hits(tmp_path: Path) -> None:
    path = tmp_path / "v4.db"
    store = dshpy.open_store(f"sqlite:///{path}")
    with store.create(session_id="parent", cwd="/a") as parent:
        TurnScript(parent).turn("the quick brown fox")
    with store.fork("parent", child_id="child") as child:
        TurnScript(child).turn("a lazy dog sleeps")
    store.close()
    raw = sqlite3.connect(path, isolation_level=None)  # back to schema v4 as it was written: search_docs
    sqlite_module._register_functions(raw)
    events_as_v5(raw)
    for table in ("search_text", "search_keys", "search_state"):
        raw.execute(f"DROP TABLE {table}")
    for statement in (*SEARCH_SCHEMA, *FILL_FROM_EVENTS):
        raw.execute(statement)
    raw.execute("PRAGMA user_version = 4")
    assert raw.execute("SELECT count(*) FROM search_docs").fetchone()[0] == 4
    raw.close()

    upgraded = dshpy.open_store(f"sqlite:///{path}")
    assert upgraded.schema_version == len(sqlite_module.SCHEMA_MIGRATIONS) == 6
    tables = {row[0] for row in sqlite3.connect(path).execute("SELECT name FROM sqlite_schema WHERE type = 'table'")}
    assert "search_docs" not in tables and "search_keys" in tables
    assert {s for s, _ in _found(upgraded, "quick brown fox")} == {"parent", "child"}
    assert {s for s, _ in _found(upgraded, "lazy dog")} == {"child"}
    assert _found(upgraded, "brown quick") == set()  # a phrase: its words in order
    assert upgraded.search_index_status().documents == 4
    upgraded.close()
    assert _integrity(path) == 4


def test_deleting_a_session_takes_out_exactly_its_postings(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = dshpy.open_store(f"sqlite:///{path}")
    odd = "nul\x00byte and a lone \udcff surrogate beside ünïcödé words"
    with store.create(session_id="odd") as session:
        session.append("user/message", user_message(odd), surface_op="append")
        TurnScript(session).turn("shared words here")
    with store.create(session_id="kept") as session:
        TurnScript(session).turn("shared words here")
    before = store.search_index_status().documents
    assert _found(store, "unicode words") == {("odd", 0)}
    store.delete("odd")
    assert store.search_index_status().documents == before - 3
    assert {s for s, _ in _found(store, "shared words")} == {"kept"}
    assert _found(store, "unicode words") == set()
    store.close()
    assert _integrity(path) == before - 3


def test_a_deleted_sessions_number_is_never_given_again(tmp_path: Path) -> None:
    store = dshpy.open_store(f"sqlite:///{tmp_path / 's.db'}")
    with store.create(session_id="first") as session:
        TurnScript(session).turn("alpha beta")
    with store.create(session_id="newest") as session:
        TurnScript(session).turn("gamma delta")
    keys = dict(store._db.execute("SELECT session_id, key FROM search_keys").fetchall())  # type: ignore[attr-defined]
    store.delete("newest")
    with store.create(session_id="again") as session:
        TurnScript(session).turn("epsilon")
    again = store._db.execute("SELECT key FROM search_keys WHERE session_id = 'again'").fetchone()[0]  # type: ignore[attr-defined]
    assert again > max(keys.values())
    assert _found(store, "gamma delta") == set()
    assert {s for s, _ in _found(store, "epsilon")} == {"again"}
    store.close()


def test_a_detached_fork_indexes_its_prefix_under_its_own_number(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = dshpy.open_store(f"sqlite:///{path}")
    with store.create(session_id="parent") as session:
        TurnScript(session).turn("inherited words")
    store.fork("parent", child_id="child").close()
    store.delete("parent", detach_forks=True)
    assert {s for s, _ in _found(store, "inherited words")} == {"child"}
    assert {s for s, _ in _found(store, "inherited words", session_id="child")} == {"child"}
    store.close()
    assert _integrity(path) == 2


def test_ranking_in_the_index_alone_agrees_with_the_event_filtered_plan(tmp_path: Path) -> None:
    """A search without event filters ranks in the index and reads only its page's rows; one with a type filter
    joins every match's row. Both must find the same hits with the same scores, and honour every session filter."""
    store = dshpy.open_store(f"sqlite:///{tmp_path / 's.db'}")
    for number in range(12):
        with store.create(session_id=f"s{number:02d}", cwd=f"/p{number % 3}") as session:
            for repeat in range(number % 4 + 1):
                session.append("user/message", user_message(f"flaky parser {'again ' * repeat}"), surface_op="append")
    query = SessionQuery(store)
    every_type = ["user/message", "assistant/message", "tool/result", "tool/call", "todo/write", "turn/end"]

    def page(**options: object) -> list[tuple[str, int, float]]:
        hits = query.search("flaky parser", limit=100, **options).hits  # type: ignore[arg-type]
        return [(hit.session_id, hit.seq, round(hit.score, 9)) for hit in hits]

    fast, joined = page(), page(types=every_type)
    assert sorted(fast) == sorted(joined) and len(fast) == sum(n % 4 + 1 for n in range(12))
    assert [score for *_, score in fast] == sorted((score for *_, score in fast), reverse=True)
    assert {s for s, *_ in page(filters={"cwd": "/p1"})} == {"s01", "s04", "s07", "s10"}
    assert {s for s, *_ in page(filters={"cwd": "/p1", "exclude_ids": ["s04"]})} == {"s01", "s07", "s10"}
    assert {s for s, *_ in page(session_id="s07")} == {"s07"}
    first = query.search("flaky parser", limit=5)
    rest = query.search("flaky parser", limit=100, cursor=first.next_cursor)
    assert len({(h.session_id, h.seq) for h in [*first.hits, *rest.hits]}) == len(fast)  # pages do not overlap
    store.close()
