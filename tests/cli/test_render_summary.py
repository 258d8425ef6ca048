"""Rendering helpers and the typed reads behind ``sessions list``."""

from __future__ import annotations

import io

import pytest
from cli_support import build_session
from rich.console import Console, Group
from rich.text import Text

import dshpy
from dshpy.cli import render
from dshpy.cli.summary import LIST_KEYS, preview, read_types, summary_of


def test_clean_makes_control_characters_visible():
    assert render.clean("a\x1b[2Jb\rc\x07\u202e") == "a\\x1b[2Jb\\x0dc\\x07\\u202e"
    assert render.clean("tabs\tand\nnewlines stay") == "tabs\tand\nnewlines stay"


def test_preview_collapses_whitespace_and_cuts():
    assert preview("  a \n b  ") == "a b"
    assert preview("x" * 10, 5) == "xxxx…"


def test_indent_wraps_without_padding():
    buffer = io.StringIO()
    console = Console(file=buffer, width=20)
    console.print(render.Indent(Group(Text("word " * 8), Text("short"))))
    lines = buffer.getvalue().splitlines()
    assert all(line.startswith("  ") and line == line.rstrip() for line in lines)
    assert len(lines) > 2


def test_event_summary_of_common_types():
    session = dshpy.Session.new()
    start = session.append("turn/start", {"turn": 1})
    assert render.event_summary(start) == "turn 1"
    assert render.event_line(start).plain.split()[-3:] == ["turn/start", "turn", "1"]


@pytest.fixture(params=["memory", "sqlite"])
def any_store(request, tmp_path):
    url = "memory:" if request.param == "memory" else f"sqlite:///{tmp_path / 's.db'}"
    store = dshpy.open_store(url)
    yield store
    store.close()


def test_typed_reads_follow_fork_chains(any_store):
    store = any_store
    build_session(store, "root", turns=3)
    ends = [e.seq for e in store.read("root") if e.type == "turn/end"]
    store.fork("root", ends[1], child_id="mid").close()
    grand = store.fork("mid", ends[0], child_id="leaf")
    grand.close()
    types = ("turn/start", "user/message", "session/end-seed")
    for session_id in ("root", "mid", "leaf"):
        expected = [e.to_wire() for e in store.read(session_id) if e.type in types]
        assert [e.to_wire() for e in read_types(store, session_id, types)] == expected
        for start in (0, 5, ends[0] + 1):
            tail = [e.to_wire() for e in store.read(session_id, start) if e.type in types]
            assert [e.to_wire() for e in read_types(store, session_id, types, start)] == tail
    turns = {listed.info.id: summary_of(listed).turns for listed in store.list_projections(LIST_KEYS)}
    assert turns == {"root": 3, "mid": 2, "leaf": 1}
