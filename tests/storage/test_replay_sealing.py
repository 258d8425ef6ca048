"""Replay seals data as it is reached (issue #20), with every guarantee of eager sealing kept.

Real stores: a SQLite file, plain and zstd JSONL. Replayed events must be immutable
all the way down, encode to the bytes appended, and a stored number no reader can
keep exactly must still be refused as corruption naming its row, whether the rest of
its chunk is clean or holds only look-alikes.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

import dshpy
from dshpy.core.events import encode_event
from dshpy.core.json import FrozenDict, FrozenList
from dshpy.errors import CorruptSessionError
from dshpy.storage.base import events_digest
from dshpy.storage.checksum import event_row_crc
from dshpy.testing.builders import TurnScript

URLS = {
    "sqlite": "sqlite:///{root}/s.db",
    "jsonl": "jsonl:///{root}/j?compression=none",
    "jsonl-zstd": "jsonl:///{root}/z",
}


@pytest.fixture(params=list(URLS))
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return URLS[request.param].format(root=tmp_path)


def frozen_all_the_way(value: Any) -> None:
    if isinstance(value, dict):
        assert isinstance(value, FrozenDict)
        with pytest.raises(TypeError):
            value["x"] = 1  # type: ignore[index]
        for item in value.values():
            frozen_all_the_way(item)
    elif isinstance(value, list):
        assert isinstance(value, FrozenList)
        with pytest.raises(TypeError):
            value.append(1)
        for item in value:
            frozen_all_the_way(item)


@pytest.fixture
def stored(url: str) -> Iterator[tuple[dshpy.BaseStore, str, list[dshpy.SessionEvent]]]:
    store = dshpy.open_store(url)
    session = store.create(cwd="/w")
    TurnScript(session).turn("read 2024-01-05 -0.5 1234567890123456789 please", steps=2, tools_per_step=1)
    session.append("todo/write", {"todos": [{"content": "x", "status": "pending"}]})
    session.flush()
    written = list(session.events)
    session.close()
    yield store, session.id, written
    store.close()


def test_replayed_events_are_the_appended_ones_and_immutable_throughout(
    url: str, stored: tuple[dshpy.BaseStore, str, list[dshpy.SessionEvent]]
) -> None:
    _writer, sid, written = stored
    store = dshpy.open_store(url)  # a JSONL store object that wrote a log serves its reads from the writes
    for round_ in range(2):  # the second read of a JSONL log comes from its scan cache
        events = list(store.read(sid))
        if round_ == 0:  # (the checks below ripen every container they reach)
            kinds = {type(event.data).__name__ for event in events}
            assert {"_RipeningDict", "_SealedDict"} <= kinds  # most rows wrapped, the look-alikes' checked whole
        assert [encode_event(e) for e in events] == [encode_event(e) for e in written]
        assert events == written
        assert events_digest(events) == events_digest(written)
        for event in events:
            frozen_all_the_way(event.data)
    store.close()


def test_open_and_export_see_the_same_session(stored: tuple[dshpy.BaseStore, str, list[dshpy.SessionEvent]]) -> None:
    store, sid, written = stored
    with store.open(sid) as session:
        assert list(session.events) == written
        messages = session.derive_messages()
        assert messages
        frozen_all_the_way(messages[-1])
    document = store.export(sid)
    assert document["eventsSha256"] == events_digest(written)


def _replace_sqlite_body(path: str, sid: str, seq: int, body: bytes) -> None:
    db = sqlite3.connect(path)
    with db:
        db.execute(
            "UPDATE events SET body = ?, crc = ? WHERE session_id = ? AND seq = ?",
            (body, event_row_crc(sid, seq, body), sid, seq),
        )
    db.close()


def _replace_jsonl_line(root: Path, seq: int, line: bytes) -> None:
    (path,) = root.rglob("*.jsonl")
    lines = path.read_bytes().split(b"\n")
    lines[seq + 1] = line  # the header is line 0
    path.write_bytes(b"\n".join(lines))


BAD_NUMBERS = {"negative zero": b"-0.0", "unsafe integer": b"9007199254740993", "underflow": b"-1e-400"}


@pytest.mark.parametrize("number", BAD_NUMBERS, ids=list(BAD_NUMBERS))
@pytest.mark.parametrize("kind", ["sqlite", "jsonl"])
def test_a_stored_number_no_reader_keeps_is_refused_naming_its_row(tmp_path: Path, kind: str, number: str) -> None:
    url = URLS[kind].format(root=tmp_path)
    store = dshpy.open_store(url)
    session = store.create(cwd="/w")
    for index in range(5):
        session.append("todo/write", {"todos": [{"content": f"item {index}", "status": "pending"}]})
    session.flush()
    sid = session.id
    session.close()
    store.close()
    bad = b'{"type":"todo/write","seq":3,"time":0,"data":{"todos":[],"n":[%s]}}' % BAD_NUMBERS[number]
    if kind == "sqlite":
        _replace_sqlite_body(f"{tmp_path}/s.db", sid, 3, bad)
        where = "event 3"
    else:
        _replace_jsonl_line(tmp_path / "j", 3, bad)
        where = "line 5"
    with dshpy.open_store(url) as reopened:
        with pytest.raises(CorruptSessionError, match=where):
            list(reopened.read(sid))
        with pytest.raises(CorruptSessionError, match=where), reopened.open(sid) as opened:
            list(opened.events)  # a resumed open (SQLite) reads older events when they are iterated, JSONL at open


@pytest.mark.parametrize("kind", ["sqlite", "jsonl"])
def test_look_alikes_in_a_chunk_read_as_written(tmp_path: Path, kind: str) -> None:
    """Strings that look like unsafe numbers make the scan look closer, never refuse or change anything."""
    store = dshpy.open_store(URLS[kind].format(root=tmp_path))
    session = store.create(cwd="/w")
    for text in ["plain", "-0.0", "9007199254740993", "1e-400", "-0E1 and -0e2", "plain again"]:
        session.append("todo/write", {"todos": [{"content": text, "status": "pending"}], "n": [-0.5, 12.5e-3]})
    session.flush()
    written = list(session.events)
    session.close()
    events = list(store.read(session.id))
    assert [orjson.dumps(e.data) for e in events] == [orjson.dumps(e.data) for e in written]
    for event in events:
        frozen_all_the_way(event.data)
    store.close()
