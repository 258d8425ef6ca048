"""SQLite specifics: file hygiene, pragmas, schema identity, zero-copy forks, damaged rows."""

from __future__ import annotations

import sqlite3
import stat

import pytest

import dshpy
from dshpy.storage.sqlite import APPLICATION_ID, SCHEMA_MIGRATIONS, SqliteStore
from dshpy.testing.builders import TurnScript


@pytest.fixture
def db_path(tmp_path):
    return tmp_path / "nested" / "sessions.db"


def make_session(store, turns=2):
    session = store.create(cwd="/w")
    for _ in range(turns):
        TurnScript(session).turn(steps=2)
    session.flush()
    return session


def test_new_database_is_private_wal_full_and_identified(db_path):
    store = SqliteStore(db_path)
    make_session(store)
    assert stat.S_IMODE(db_path.stat().st_mode) == 0o600
    assert stat.S_IMODE(db_path.parent.stat().st_mode) == 0o700
    raw = sqlite3.connect(db_path)
    assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert raw.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    assert raw.execute("PRAGMA user_version").fetchone()[0] == len(SCHEMA_MIGRATIONS)
    assert store._db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    tables = {row[0] for row in raw.execute("SELECT name FROM sqlite_schema WHERE type='table'")}
    assert {"sessions", "events"} <= tables
    raw.close()
    store.close()


def test_default_url_uses_dshpy_home(monkeypatch, tmp_path):
    monkeypatch.delenv("DSHPY_STORE", raising=False)
    monkeypatch.setenv("DSHPY_HOME", str(tmp_path / "home"))
    from dshpy.storage.urls import default_store_url

    url = default_store_url()
    assert url == f"sqlite:///{tmp_path}/home/sessions.db"
    store = dshpy.open_store(url)
    assert isinstance(store, SqliteStore)
    assert (tmp_path / "home" / "sessions.db").exists()
    store.close()
    monkeypatch.setenv("DSHPY_STORE", "memory:")
    assert default_store_url() == "memory:"


def _bytes(path):
    return path.read_bytes()


def test_foreign_database_is_refused_untouched(tmp_path):
    path = tmp_path / "app.db"
    other = sqlite3.connect(path)
    other.execute("CREATE TABLE users (id INTEGER PRIMARY KEY)")
    other.commit()
    other.close()
    before = _bytes(path)
    with pytest.raises(dshpy.StoreError, match="not a dshpy session database"):
        SqliteStore(path)
    assert _bytes(path) == before


def test_other_application_id_is_refused(tmp_path):
    path = tmp_path / "app.db"
    other = sqlite3.connect(path)
    other.execute("PRAGMA application_id = 1234")
    other.commit()
    other.close()
    with pytest.raises(dshpy.StoreError, match="application_id 1234"):
        SqliteStore(path)


def test_newer_schema_is_refused_with_upgrade_advice(db_path):
    SqliteStore(db_path).close()
    raw = sqlite3.connect(db_path)
    raw.execute(f"PRAGMA user_version = {len(SCHEMA_MIGRATIONS) + 3}")
    raw.commit()
    raw.close()
    with pytest.raises(dshpy.FormatVersionError, match="upgrade dshpy"):
        SqliteStore(db_path)


def test_unexpected_schema_is_refused(db_path):
    store = SqliteStore(db_path)
    session = make_session(store)
    store.close()
    raw = sqlite3.connect(db_path)
    raw.execute("ALTER TABLE events ADD COLUMN extra TEXT")
    raw.commit()
    raw.close()
    with pytest.raises(dshpy.CorruptSessionError, match="expected dshpy schema"):
        SqliteStore(db_path)
    raw = sqlite3.connect(db_path)  # nothing valid was lost
    assert raw.execute("SELECT count(*) FROM events WHERE session_id = ?", (session.id,)).fetchone()[0] == len(
        session.events
    )
    raw.close()


def test_a_file_that_is_not_a_database_is_refused_untouched(tmp_path):
    path = tmp_path / "notes.db"
    path.write_bytes(b"these are my notes, not a database\n" * 100)
    before = _bytes(path)
    with pytest.raises(dshpy.CorruptSessionError, match="not a usable SQLite database"):
        SqliteStore(path)
    assert _bytes(path) == before


def test_damaged_event_row_names_the_seq(db_path):
    store = SqliteStore(db_path)
    session = make_session(store)
    session.close()
    store._db.execute("UPDATE events SET body = ? WHERE session_id = ? AND seq = 5", (b"{not json", session.id))
    with pytest.raises(dshpy.CorruptSessionError, match="event 5 is damaged"):
        list(store.read(session.id))
    # open() resumes from the point close() wrote and reads only the tail: the damage shows when event 5 is read
    with store.open(session.id) as opened, pytest.raises(dshpy.CorruptSessionError, match="event 5 is damaged"):
        list(opened.events)
    store._db.execute("DELETE FROM projection_cache WHERE session_id = ?", (session.id,))
    with pytest.raises(dshpy.CorruptSessionError, match="event 5 is damaged"):
        store.open(session.id)  # without a resume point, open() reads and checks every event
    store._db.execute("DELETE FROM events WHERE session_id = ? AND seq = 5", (session.id,))
    with pytest.raises(dshpy.CorruptSessionError, match="missing event 5"):
        list(store.read(session.id))
    store.close()


def test_fork_stores_only_the_childs_own_events(db_path):
    store = SqliteStore(db_path)
    small = make_session(store, turns=1)
    large = make_session(store, turns=60)

    def own_rows(session_id):
        return store._db.execute("SELECT count(*) FROM events WHERE session_id = ?", (session_id,)).fetchone()[0]

    child_small = store.fork(small.id)
    child_large = store.fork(large.id)
    assert own_rows(child_small.id) == own_rows(child_large.id) == 1  # just the end-seed marker
    assert len(child_large.events) == len(large.events) + 1
    assert [e.to_wire() for e in store.read(child_large.id)][:-1] == [e.to_wire() for e in large.events]
    store.close()


def test_detaching_forks_copies_the_prefix(db_path):
    store = SqliteStore(db_path)
    parent = make_session(store)
    child = store.fork(parent.id)
    grandchild = store.fork(child.id)
    expected = [e.to_wire() for e in store.read(grandchild.id)]
    with pytest.raises(dshpy.StoreError, match=child.id):
        store.delete(parent.id)
    parent.close()  # a live session cannot be deleted from under its writer
    store.delete(parent.id, detach_forks=True)
    store.close()
    again = SqliteStore(db_path)
    assert [e.to_wire() for e in again.read(grandchild.id)] == expected
    assert again.stat(child.id).event_count == len(parent.events) + 1
    again.close()
