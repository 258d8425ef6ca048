"""Session ids with control characters and lone surrogates, which dsh stores and dshpy must too.

dsh 0.2.1rc2 checks nothing in a session id but emptiness; its JSONL backend escapes
every UTF-16 code unit outside ``A-Z a-z 0-9 . _ -`` as ``~XXXX`` (``encodeSegment``)
and its header is ``JSON.stringify``'s. The directory names and header lines below
are what dsh's own code produced for these ids (run under Node); the sessions under
``tests/fixtures/dsh/odd_ids`` were written by the real runtime
(``tests/fixtures/dsh/make_odd_ids.py``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import dshpy
from dshpy.testing.builders import user_message
from dshpy.testing.fake_model import FakeModelServer, Reply

DSH_SEGMENTS = {
    "tab\there": "tab~0009here",
    "new\nline\r": "new~000Aline~000D",
    "lone \ud800 x": "lone~0020~D800~0020x",
    "\udcff": "~DCFF",
    "del\x7f": "del~007F",
    "bell\x07 ~": "bell~0007~0020~007E",
    "😀 half \ud83d": "~D83D~DE00~0020half~0020~D83D",
}
"""dsh's ``encodeSegment`` of each id (the session's directory name)."""
DSH_HEADER_IDS = {
    "tab\there": r'"id":"tab\there"',
    "new\nline\r": r'"id":"new\nline\r"',
    "lone \ud800 x": r'"id":"lone \ud800 x"',
    "bell\x07 ~": r'"id":"bell\u0007 ~"',
}
"""How dsh's ``JSON.stringify`` writes each id in the header line."""
ODD_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "dsh" / "odd_ids"
_DSHPY = (sys.executable, "-m", "dshpy")
WITH_SURROGATE = ("lone \ud800 x", "\udcff", "😀 half \ud83d")


def _write(store: dshpy.BaseStore, session_id: str) -> None:
    session = store.create(session_id=session_id, cwd="/srv/app")
    session.append("turn/start", {"turn": 1})
    session.append("user/message", user_message(f"hello from {session_id}"), surface_op="append")
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    session.close()


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_jsonl_lays_out_and_reads_back_every_id_as_dsh_does(tmp_path: Path, compression: str) -> None:
    root = tmp_path / "root"
    store = dshpy.open_store(f"jsonl:///{root}?compression={compression}")
    for session_id in DSH_SEGMENTS:
        _write(store, session_id)
    assert sorted(p.name for p in (root / "--srv-app--").iterdir()) == sorted(DSH_SEGMENTS.values())
    if compression == "none":
        for session_id, member in DSH_HEADER_IDS.items():
            header = (root / "--srv-app--" / DSH_SEGMENTS[session_id] / "session.v4.jsonl").read_bytes()
            assert member.encode() in header.split(b"\n", 1)[0]
    store.close()

    reopened = dshpy.open_store(f"jsonl:///{root}?compression={compression}")
    assert sorted(info.id for info in reopened.list()) == sorted(DSH_SEGMENTS)
    for session_id in DSH_SEGMENTS:
        session = reopened.open(session_id)
        assert session.id == session_id
        assert [e.type for e in session.events] == ["turn/start", "user/message", "turn/end"]
        session.close()
    hits = dshpy.SessionQuery(reopened).search("hello", limit=20).hits
    assert sorted(hit.session_id for hit in hits) == sorted(DSH_SEGMENTS)
    scoped = dshpy.SessionQuery(reopened).search("hello", session_id="lone \ud800 x").hits
    assert [hit.session_id for hit in scoped] == ["lone \ud800 x"]
    reopened.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_text_column_stores_keep_control_characters_and_refuse_lone_surrogates_by_name(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = request.getfixturevalue("postgres_url") if backend == "postgres" else f"sqlite:///{tmp_path}/s.db"
    store = dshpy.open_store(url)
    try:
        for session_id in ("tab\there", "new\nline\r", "del\x7f"):
            _write(store, session_id)
            assert [e.type for e in store.read(session_id)] == ["turn/start", "user/message", "turn/end"]
        for session_id in WITH_SURROGATE:
            with pytest.raises(dshpy.InvalidSessionIdError, match="lone UTF-16 surrogate"):
                store.create(session_id=session_id)
            with pytest.raises(dshpy.InvalidSessionIdError, match="lone UTF-16 surrogate"):
                store.open(session_id)
        assert sorted(info.id for info in store.list()) == sorted(["tab\there", "new\nline\r", "del\x7f"])
    finally:
        store.close()


def _cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dshpy", "--store", f"jsonl:///{root}?compression=none", *args],
        check=False,
        capture_output=True,
        text=True,
        errors="surrogateescape",
        timeout=60,
    )


def test_sessions_the_dsh_runtime_wrote_under_odd_ids_list_show_and_continue(tmp_path: Path) -> None:
    root = tmp_path / "root"
    shutil.copytree(ODD_FIXTURES, root)
    listed = _cli(root, "sessions", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    ids = {row["id"] for row in json.loads(listed.stdout.encode("utf-8", "surrogateescape"))}
    assert ids == {"tab\there", "two\nlines\r", "half \ud83d emoji"}

    table = _cli(root, "sessions", "list")
    assert "tab\\x09here" in table.stdout and "two\\x0alines\\x0d" in table.stdout
    assert "half \\ud83d emoji  " in table.stdout  # escaped before the column is sized
    shown = _cli(root, "sessions", "show", "tab\there")
    assert shown.returncode == 0, shown.stderr
    assert "session tab\\x09here" in shown.stdout and "Say hello." in shown.stdout

    with FakeModelServer(default=Reply.text("Hello again.")) as server:
        env = {**os.environ, "DEEPSEEK_API_KEY": "test-key", "DEEPSEEK_BASE_URL": server.base_url}
        ran = subprocess.run(
            [
                *_DSHPY,
                "--store",
                f"jsonl:///{root}?compression=none",
                "run",
                "Say hello again.",
                "--session",
                "two\nlines\r",
            ],
            check=False,
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == "Hello again.\n" and "session: two\\x0alines\\x0d" in ran.stderr

    store = dshpy.open_store(f"jsonl:///{root}?compression=none")
    session = store.open("half \ud83d emoji")
    before = len(session.events)
    assert session.events[-1].type == "turn/end"  # dsh's model transport failed; the log is whole
    session.append("turn/start", {"turn": 2})
    session.append("turn/end", {"turn": 2, "reason": {"kind": "completed"}})
    session.close()
    assert len(list(store.read("half \ud83d emoji"))) == before + 2
    store.close()
