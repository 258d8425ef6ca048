"""The search index is never behind or ahead of the log: same transaction (SQLite, PostgreSQL), catch-up (JSONL).

Also: stores written before the index existed (schema v3) are indexed when they are
upgraded, on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from sqlite_v5_layout import events_as_v5

import dshpy
from dshpy.query import SessionQuery
from dshpy.storage import postgres as postgres_module
from dshpy.storage import sqlite as sqlite_module
from dshpy.storage.jsonl.search_sidecar import SEARCH_INDEX_FILENAME
from dshpy.storage.postgres_schema import APPEND_FUNCTION_V3
from dshpy.testing.builders import TurnScript
from dshpy.testing.postgres import store_url


def _found(store: dshpy.SessionStore, text: str, **options: Any) -> list[tuple[str, int]]:
    return [(hit.session_id, hit.seq) for hit in SessionQuery(store).search(text, **options).hits]


def _prompt_seq(store: dshpy.SessionStore, session_id: str, text: str) -> int:
    return next(
        e.seq for e in store.read(session_id) if e.type == "user/message" and e.data["content"][0]["text"] == text
    )


# -- SQLite: the index rows are in the append's transaction --------------------------------------------


def test_a_failed_sqlite_flush_leaves_neither_events_nor_index_rows(tmp_path: Path, monkeypatch) -> None:
    store = dshpy.open_store(f"sqlite:///{tmp_path}/s.db")
    session = store.create()
    TurnScript(session).turn("stored before the failure")
    session.flush()
    TurnScript(session).turn("the doomed batch")
    real = sqlite_module.index_rows

    def fail_after_the_events(cursor: Any, key: int, rows: Any) -> None:
        real(cursor, key, rows)
        raise RuntimeError("the process died between the log and the index")

    monkeypatch.setattr(sqlite_module, "index_rows", fail_after_the_events)
    with pytest.raises(RuntimeError):
        session.flush()
    monkeypatch.undo()
    stored = len(list(store.read(session.id)))
    assert stored < len(session.events)
    assert _found(store, "doomed batch") == []  # not ahead of the log
    assert store.search_index_status().documents == 2  # the first turn's prompt and reply, nothing more
    session.flush()  # the batch is still pending: retrying stores both
    assert len(_found(store, "doomed batch")) == 1
    session.close()
    store.close()


def test_a_sqlite_v3_store_is_indexed_when_upgraded(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    store = dshpy.open_store(f"sqlite:///{path}")
    with store.create(cwd="/old") as parent:
        TurnScript(parent).turn("an ancient grievance")
    child = store.fork(parent.id)
    TurnScript(child).turn("a newer grievance")
    child.close()
    store.close()
    raw = sqlite3.connect(path, isolation_level=None)  # back to schema v3: the store as dshpy wrote it before search
    events_as_v5(raw)
    for table in ("search_text", "search_keys", "search_state"):
        raw.execute(f"DROP TABLE {table}")
    raw.execute("PRAGMA user_version = 3")
    raw.close()
    upgraded = dshpy.open_store(f"sqlite:///{path}")
    assert upgraded.schema_version == len(sqlite_module.SCHEMA_MIGRATIONS) == 6
    ancient = _prompt_seq(upgraded, parent.id, "an ancient grievance")
    assert set(_found(upgraded, "grievance")) == {
        (parent.id, ancient),
        (child.id, ancient),  # the fork finds its inherited prefix through its parent's rows
        (child.id, _prompt_seq(upgraded, child.id, "a newer grievance")),
    }
    assert upgraded.search_index_status().documents == 4  # 2 prompts, 2 replies: the prefix is indexed once
    upgraded.close()


# -- PostgreSQL: the index rows are in append_events' statement ----------------------------------------


def test_a_failed_postgres_flush_leaves_neither_events_nor_index_rows(postgres_url: str, monkeypatch) -> None:
    store = dshpy.open_store(postgres_url)
    session = store.create()
    TurnScript(session).turn("the doomed batch")
    real = postgres_module.doc_columns

    def broken(events: Any) -> Any:
        seqs, kinds, times, texts, words = real(events)
        return seqs, kinds, times, [None] * len(texts), words  # the index insert fails inside the statement

    monkeypatch.setattr(postgres_module, "doc_columns", broken)
    with pytest.raises(dshpy.DshError):
        session.flush()
    monkeypatch.undo()
    assert list(store.read(session.id)) == []
    assert store.search_index_status().documents == 0
    session.flush()
    assert len(_found(store, "doomed batch")) == 1
    session.close()
    store.close()


def test_a_postgres_v3_schema_is_indexed_when_upgraded(postgres_url: str, postgres_dsn: str) -> None:
    store = dshpy.open_store(postgres_url)
    with store.create(cwd="/old") as parent:
        TurnScript(parent).turn("an ancient grievance")
    child = store.fork(parent.id)
    TurnScript(child).turn("a newer grievance")
    child.close()
    schema = store.schema
    store.close()
    quoted = sql.Identifier(schema).as_string(None)  # type: ignore[arg-type]
    with psycopg.connect(postgres_dsn, autocommit=True) as conn, conn.transaction():  # back to schema v3
        conn.execute(f"DROP TABLE {quoted}.search_docs, {quoted}.search_state")
        conn.execute(
            f"DROP FUNCTION {quoted}.append_events(text, bigint, bigint[], text[], bigint[], text[], bigint[], text, "
            "bigint[], text[], bigint[], text[], text[])"
        )
        conn.execute(APPEND_FUNCTION_V3.format(schema=quoted))
        conn.execute(f"DELETE FROM {quoted}.schema_version WHERE version = 4")
    upgraded = dshpy.open_store(store_url(postgres_dsn, schema))
    assert upgraded.applied_migrations == (4,)
    ancient = _prompt_seq(upgraded, parent.id, "an ancient grievance")
    assert set(_found(upgraded, "grievance")) == {
        (parent.id, ancient),
        (child.id, ancient),
        (child.id, _prompt_seq(upgraded, child.id, "a newer grievance")),
    }
    assert upgraded.search_index_status().documents == 4
    with upgraded.open(child.id) as again:  # and the upgraded append function indexes new batches
        TurnScript(again).turn("a fresh grievance")
    assert len(_found(upgraded, "fresh grievance")) == 1
    upgraded.close()


# -- JSONL: a derived sidecar that catches up -----------------------------------------------------------


def _jsonl(tmp_path: Path) -> str:
    return f"jsonl:///{tmp_path}/root?compression=none"


def test_the_jsonl_sidecar_catches_up_with_what_another_writer_flushed(tmp_path: Path) -> None:
    reader = dshpy.open_store(_jsonl(tmp_path))
    assert _found(reader, "anything at all") == []
    writer = dshpy.open_store(_jsonl(tmp_path))
    with writer.create() as session:
        TurnScript(session).turn("written elsewhere")
        session.flush()
        assert len(_found(reader, "written elsewhere")) == 1  # the writer never touched the index
        TurnScript(session).turn("and then some more")
    assert len(_found(reader, "and then some more")) == 1
    assert reader.search_index_status().pending == 0
    reader.close()
    writer.close()


def test_the_jsonl_sidecar_is_never_ahead_of_a_log_that_lost_its_tail(tmp_path: Path) -> None:
    store = dshpy.open_store(_jsonl(tmp_path))
    session = store.create()
    TurnScript(session).turn("kept turn")
    session.flush()
    log = next(Path(tmp_path, "root").glob("*/*/session.v4.jsonl"))
    kept = log.stat().st_size
    TurnScript(session).turn("lost turn")
    session.close()
    assert len(_found(store, "lost turn")) == 1
    with open(log, "r+b") as file:  # a crash lost the last flush (never acknowledged)
        file.truncate(kept)
    assert _found(store, "lost turn") == []
    with store.open(session.id) as again:  # and the log was continued: other events at the same seqs
        TurnScript(again).turn("replacement turn")
    assert _found(store, "lost turn") == []
    assert len(_found(store, "replacement turn")) == 1
    assert len(_found(store, "kept turn")) == 1
    store.close()


def test_an_unusable_jsonl_sidecar_is_replaced(tmp_path: Path) -> None:
    store = dshpy.open_store(_jsonl(tmp_path))
    with store.create() as session:
        TurnScript(session).turn("survives a broken index")
    store.close()
    (tmp_path / "root" / SEARCH_INDEX_FILENAME).write_bytes(b"this is not a database" * 100)
    again = dshpy.open_store(_jsonl(tmp_path))
    assert len(_found(again, "broken index")) == 1
    assert again.search_index_status().documents == 2
    assert again.rebuild_search_index().documents == 2
    again.close()


def test_a_read_only_jsonl_root_is_searched_by_a_scan(tmp_path: Path) -> None:
    store = dshpy.open_store(_jsonl(tmp_path))
    with store.create() as session:
        TurnScript(session).turn("on a read-only mount")
    store.close()
    root = tmp_path / "root"
    root.chmod(0o555)
    try:
        readonly = dshpy.open_store(_jsonl(tmp_path))
        if readonly.search_index_status().kind != "scan":
            pytest.skip("this user can write anywhere (root)")
        assert len(_found(readonly, "read-only mount")) == 1
        assert not (root / SEARCH_INDEX_FILENAME).exists()
    finally:
        root.chmod(0o755)
