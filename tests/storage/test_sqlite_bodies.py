"""Schema v6: compressed event bodies, the store's own dictionary, and the in-place upgrade of a v5 file.

``tests/fixtures/sqlite_v5/v5.db`` was written by dshpy before schema v6 (its script is beside it): after the
upgrade every session reads back byte for byte what that dshpy read, search finds the same hits, and a failed
upgrade leaves the v5 file as it was (a killed one: ``tests/crash/test_sqlite_upgrade_kill9.py``).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path

import pytest

import dshpy
from dshpy.core.events import encode_event
from dshpy.query import SessionQuery
from dshpy.storage import sqlite as sqlite_module
from dshpy.storage.sqlite import SqliteStore
from dshpy.storage.sqlite_bodies import TRAIN_AFTER_EVENTS, EventBodies
from dshpy.testing.builders import TurnScript

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "sqlite_v5"
EXPECTED = json.loads((FIXTURE / "v5.expected.json").read_text())


def _v5_copy(tmp_path: Path) -> Path:
    path = tmp_path / "v5.db"
    shutil.copyfile(FIXTURE / "v5.db", path)
    return path


def _user_version(path: Path) -> int:
    raw = sqlite3.connect(path)
    try:
        return int(raw.execute("PRAGMA user_version").fetchone()[0])
    finally:
        raw.close()


def _reads_as_v5_did(store: SqliteStore) -> None:
    for session_id, events in EXPECTED["sessions"].items():
        assert [encode_event(e, seq_ranges=False).decode() for e in store.read(session_id)] == events
        assert store.stat(session_id).event_count == len(events)
    for text, hits in EXPECTED["searches"].items():
        found = SessionQuery(store).search(text, limit=50).hits
        assert sorted([hit.session_id, hit.seq] for hit in found) == hits
    for session_id, keys in EXPECTED["cached"].items():
        assert sorted(row.key for row in store._load_projection_rows(session_id)) == keys
    assert sorted(info.id for info in store.list()) == ["child", "parent"]


def test_a_v5_file_is_upgraded_in_place_and_reads_exactly_as_before(tmp_path: Path) -> None:
    path = _v5_copy(tmp_path)
    assert _user_version(path) == 5
    store = SqliteStore(path)
    assert store.schema_version == len(sqlite_module.SCHEMA_MIGRATIONS) == 6
    _reads_as_v5_did(store)
    packed = store._db.execute("SELECT count(*) FROM events WHERE substr(body, 1, 1) = x'00'").fetchone()[0]
    assert packed > 0  # the big bodies were compressed on the way
    with store.open("parent") as parent:  # and the upgraded file takes appends
        TurnScript(parent).turn("after the upgrade")
    assert len(list(store.read("parent"))) > len(EXPECTED["sessions"]["parent"])
    store.close()
    again = SqliteStore(path)
    assert [encode_event(e, seq_ranges=False).decode() for e in again.read("child")] == EXPECTED["sessions"]["child"]
    again.close()


def test_a_failed_upgrade_leaves_the_v5_file_as_it_was(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _v5_copy(tmp_path)
    before = path.read_bytes()
    failing = (*sqlite_module.SCHEMA_MIGRATIONS[:5], (*sqlite_module.SCHEMA_MIGRATIONS[5], "SELECT no_such_function()"))
    monkeypatch.setattr(sqlite_module, "SCHEMA_MIGRATIONS", failing)
    with pytest.raises(dshpy.StoreError):
        SqliteStore(path)
    monkeypatch.undo()
    assert _user_version(path) == 5
    raw = sqlite3.connect(path)
    assert raw.execute("SELECT count(*) FROM sqlite_schema WHERE name = 'body_dictionaries'").fetchone()[0] == 0
    raw.close()
    assert path.read_bytes() == before  # rolled back: the WAL never reached the file
    store = SqliteStore(path)
    _reads_as_v5_did(store)
    store.close()


def _busy_session(store: SqliteStore, turns: int) -> dshpy.Session:
    session = store.create(cwd="/w")
    script = TurnScript(session)
    for index in range(turns):
        script.turn(f"question {index} about the lantern by the harbour", steps=2, tools_per_step=2)
    session.flush()  # one append: the dictionary is trained after it
    return session


def _stored(store: SqliteStore, session_id: str, seq: int) -> bytes:
    row = store._db.execute("SELECT body FROM events WHERE session_id = ? AND seq = ?", (session_id, seq)).fetchone()
    return bytes(row[0])


def test_a_store_trains_one_dictionary_from_its_first_events_and_writes_with_it(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    stale = SqliteStore(path)  # opened before any dictionary exists: it must still read bodies that use one
    store = SqliteStore(path)
    turns = TRAIN_AFTER_EVENTS // 14 + 4
    session = _busy_session(store, turns)
    assert store._bodies.has_dictionary
    assert store._db.execute("SELECT count(*) FROM body_dictionaries").fetchone()[0] == 1
    TurnScript(session).turn("written with the dictionary")
    session.flush()
    last = session.events[-1].seq
    assert _stored(store, session.id, last)[:2] == b"\x00\x01"  # tag, dictionary 1
    expected = [encode_event(e, seq_ranges=False) for e in session.events]
    assert [encode_event(e, seq_ranges=False) for e in stale.read(session.id)] == expected
    hits = SessionQuery(stale).search("written with the dictionary").hits
    assert [hit.seq for hit in hits] and "written with the dictionary" in hits[0].snippet.text
    session.close()
    stale.close()
    store.close()
    reopened = SqliteStore(path)  # a new codec reads the stored dictionary and keeps writing with it
    assert reopened._bodies.has_dictionary
    assert [encode_event(e, seq_ranges=False) for e in reopened.read(session.id)] == expected
    reopened.close()


def test_a_damaged_compressed_body_or_dictionary_is_reported_not_served(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.db")
    session = _busy_session(store, TRAIN_AFTER_EVENTS // 14 + 2)
    TurnScript(session).turn("x " * 200)
    session.flush()
    seq = next(e.seq for e in reversed(session.events) if e.type == "user/message")
    body = _stored(store, session.id, seq)
    assert body[:2] == b"\x00\x01"
    damaged = body[:-3] + bytes([body[-3] ^ 0x20]) + body[-2:]
    store._db.execute("UPDATE events SET body = ? WHERE session_id = ? AND seq = ?", (damaged, session.id, seq))
    with pytest.raises(dshpy.CorruptSessionError, match=f"event {seq} is damaged"):
        list(store.read(session.id))
    store._db.execute("UPDATE events SET body = ? WHERE session_id = ? AND seq = ?", (body, session.id, seq))
    assert len(list(store.read(session.id))) == len(session.events)  # the original bytes read again
    session.close()
    store._db.execute("UPDATE body_dictionaries SET dictionary = CAST(dictionary || x'00' AS BLOB)")
    store.close()
    with pytest.raises(dshpy.CorruptSessionError, match="dictionary 1 is damaged"):
        SqliteStore(tmp_path / "s.db")


def test_deleting_a_session_with_compressed_bodies_takes_out_exactly_its_postings(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = SqliteStore(path)
    keep = _busy_session(store, 3)
    doomed = _busy_session(store, TRAIN_AFTER_EVENTS // 14 + 2)
    TurnScript(doomed).turn("doomed " * 60)
    doomed.close()
    keep.close()
    assert store._bodies.has_dictionary
    store.delete(doomed.id)
    raw = sqlite3.connect(path)
    raw.execute("INSERT INTO search_text (search_text, rank) VALUES ('integrity-check', 0)")  # raises if not exact
    raw.close()
    assert {hit.session_id for hit in SessionQuery(store).search("lantern", limit=100).hits} == {keep.id}
    assert store.search_index_status().documents == store.rebuild_search_index().documents
    store.close()


def test_bodies_are_stored_as_they_were_when_compression_does_not_pay() -> None:
    bodies = EventBodies()
    small = b'{"type":"turn/start","seq":1,"time":5,"data":{"turn":1}}'
    assert bodies.encode(small) == small
    noise = b'{"t":"' + os.urandom(400).hex().encode() + b'"}'
    assert bodies.decode(bodies.encode(noise)) == noise
    assert len(bodies.encode(noise)) <= len(noise)
    with pytest.raises(ValueError, match="neither JSON nor a compressed body"):
        bodies.decode(b"\x07junk")
    with pytest.raises(ValueError, match="dictionary 9"):
        bodies.decode(b"\x00\x09abc")
