"""Lone UTF-16 surrogates round-trip exactly on every backend, written as dsh's ``JSON.stringify`` writes them.

They reach a log for real: ``os.listdir()`` returns ``"\\udcff"`` for a file name byte
that is not UTF-8 (surrogateescape), and a model stream can cut an emoji between its
halves. ``append()`` accepts such strings, so every backend must store them, read them
back identical, and stay writable afterwards.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import dshpy
from dshpy.core.json import dumps, loads
from dshpy.testing.builders import user_message

LISTED = "report-\udcff.txt"
"""What ``os.listdir()`` gives for the file name ``b"report-\\xff.txt"``."""
HALF = "cut here \ud83d"
"""The first half of 😀 (U+1F600), as a stream cut between two chunks leaves it."""
DATA: dict[str, Any] = {
    "name": LISTED,
    "halves": [HALF, "\ude00 second half", "\udc80\ud800", "whole 😀 kept"],
    "key \udcff": {"nested": [LISTED, 1, None, True, 2.5]},
}
NOTE = "plugin:dshpy/note"


@pytest.fixture(params=["memory", "jsonl-plain", "jsonl-zstd", "sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    kind = request.param
    if kind == "postgres":
        yield request.getfixturevalue("postgres_url")
    elif kind == "memory":
        yield "memory:"
    elif kind == "sqlite":
        yield f"sqlite:///{tmp_path}/sessions.db"
    else:
        yield f"jsonl:///{tmp_path}/root?compression={'zstd' if kind == 'jsonl-zstd' else 'none'}"


@pytest.fixture
def store(store_url: str) -> Iterator[dshpy.BaseStore]:
    opened = dshpy.open_store(store_url)
    yield opened
    opened.close()


def test_lone_surrogates_round_trip_exactly_and_the_session_stays_writable(store: dshpy.BaseStore) -> None:
    session = store.create(cwd="/srv/app")
    session.append("turn/start", {"turn": 1})
    session.append("user/message", user_message(f"look at {LISTED} and {HALF}"), surface_op="append")
    session.append(NOTE, DATA)
    session.flush()
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    session.close()

    reopened = store.open(session.id)
    assert dshpy.thaw(reopened.events[2].data) == DATA
    assert reopened.derive_messages()[0].content[0]["text"] == f"look at {LISTED} and {HALF}"
    reopened.append(NOTE, {"after": "still writable", "again": LISTED})
    reopened.flush()
    reopened.close()

    stored = list(store.read(session.id))
    assert [event.type for event in stored] == ["turn/start", "user/message", NOTE, "turn/end", NOTE]
    assert dshpy.thaw(stored[2].data) == DATA
    assert stored[4].data["again"] == LISTED
    assert [e.to_wire() for e in stored[:4]] == [e.to_wire() for e in session.events]


def test_export_and_import_carry_lone_surrogates(store: dshpy.BaseStore, tmp_path: Path) -> None:
    session = store.create(cwd="/srv/app")
    session.append(NOTE, DATA)
    session.close()
    document = loads(dumps(store.export(session.id)))  # as written to and read from a file
    target = dshpy.open_store(f"jsonl:///{tmp_path}/imported?compression=none")
    info = target.import_session(document)
    assert info.event_count == 1
    assert dshpy.thaw(next(iter(target.read(session.id))).data) == DATA
    target.close()


def test_a_cwd_with_a_non_utf8_byte_is_stored_and_read_back(store: dshpy.BaseStore) -> None:
    cwd = "/srv/\udcff-project"  # os.getcwd() in a directory named b"/srv/\xff-project"
    session = store.create(cwd=cwd)
    session.append(NOTE, {"cwd": cwd})
    session.close()
    assert store.stat(session.id).header.cwd == cwd
    assert [info.header.cwd for info in store.list()] == [cwd]
    reopened = store.open(session.id)
    assert reopened.header.cwd == cwd and reopened.events[0].data == {"cwd": cwd}
    reopened.close()


def test_projection_state_holding_a_lone_surrogate_is_cached_and_served(store: dshpy.BaseStore) -> None:
    todo = {"content": f"rename {LISTED}", "status": "pending", "note": HALF}
    session = store.create(cwd="/srv/app")
    session.append("turn/start", {"turn": 1})
    # pydantic cannot hold a key with a lone surrogate: the projection leaves that key out, the log keeps it
    session.append("todo/write", {"todos": [{**todo, "key \udcff": 1}]})
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    session.close()  # checkpoints the projection cache
    for _ in range(2):  # folded (and written back), then served from the cache
        assert store.projections(session.id, ["todos"])["values"]["todos"]["todos"] == [todo]
    [listed] = store.list_projections(["todos"])
    assert listed.values["todos"]["todos"] == [todo]
    reopened = store.open(session.id)  # seeded from the cache
    assert dshpy.snapshot(reopened, ["todos"])["values"]["todos"]["todos"] == [todo]
    reopened.close()


JS_ROUND_TRIP = "process.stdout.write(JSON.stringify(JSON.parse(require('fs').readFileSync(0, 'utf8'))))"


def _jsonl_lines(root: Path) -> list[bytes]:
    [log_file] = root.glob("*/*/session.v4.jsonl")
    return log_file.read_bytes().splitlines()


def test_jsonl_lines_hold_the_escapes_json_stringify_writes(tmp_path: Path) -> None:
    store = dshpy.open_store(f"jsonl:///{tmp_path}/root?compression=none")
    session = store.create(cwd="/srv/app")
    session.append(NOTE, DATA)
    session.close()
    line = _jsonl_lines(tmp_path / "root")[1]
    assert b'"name":"report-\\udcff.txt"' in line
    assert b'"halves":["cut here \\ud83d","\\ude00 second half","\\udc80\\ud800","whole \xf0\x9f\x98\x80 kept"]' in line
    assert b'"key \\udcff":{"nested":["report-\\udcff.txt",1,null,true,2.5]}' in line
    store.close()


@pytest.mark.skipif(shutil.which("node") is None, reason="node (for JSON.stringify) is not installed")
def test_jsonl_lines_are_byte_identical_to_json_stringify(tmp_path: Path) -> None:
    """node parses each line we wrote and stringifies it again: the bytes must not change."""
    store = dshpy.open_store(f"jsonl:///{tmp_path}/root?compression=none")
    session = store.create(cwd="/srv/\udcff")
    session.append("user/message", user_message(f"{HALF} {LISTED}"), surface_op="append")
    session.append(NOTE, DATA)
    session.close()
    for line in _jsonl_lines(tmp_path / "root"):
        node = subprocess.run(["node", "-e", JS_ROUND_TRIP], input=line, capture_output=True, check=True, timeout=30)
        assert node.stdout == line
    store.close()
