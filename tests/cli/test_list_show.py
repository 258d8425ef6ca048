"""``sessions list`` and ``sessions show``: tables, JSON results, transcripts."""

from __future__ import annotations

import json
import sqlite3

import pytest
from cli_support import build_session, run_cli

import dshpy
from dshpy.cli.app import AppState
from dshpy.storage.sqlite import SqliteStore
from dshpy.testing.builders import assistant_data


def test_list_json_reports_turns_title_lifecycle_and_forks(store, dshpy_cli):
    build_session(store, "titled", title="Reading a.txt")
    build_session(store, "plain", turns=3, prompt="   what   is\nin a.txt?  ")
    store.fork("titled", child_id="child").close()
    store.create(session_id="new").close()

    rows = {row["id"]: row for row in json.loads(dshpy_cli("sessions", "list", "--json").stdout)}

    assert set(rows) == {"titled", "plain", "child", "new"}
    assert rows["titled"]["turns"] == 2
    assert (rows["titled"]["title"], rows["titled"]["titleSource"]) == ("Reading a.txt", "event")
    assert rows["titled"]["forks"] == ["child"]
    assert rows["titled"]["lifecycle"] == "active"
    assert rows["plain"]["turns"] == 3
    assert (rows["plain"]["title"], rows["plain"]["titleSource"]) == ("what is in a.txt?", "prompt")  # cleaned
    assert rows["child"]["parentSession"] == "titled"
    assert rows["child"]["turns"] == 2  # inherited turns count
    assert rows["child"]["lifecycle"] == "created"  # a fork starts its own life
    assert rows["child"]["eventCount"] == store.stat("child").event_count
    assert (rows["new"]["turns"], rows["new"]["title"], rows["new"]["lifecycle"]) == (0, None, "created")


def test_list_table_shows_every_column(store, dshpy_cli):
    build_session(store, "titled", title="Reading a.txt")
    build_session(store, "plain", prompt="x" * 500)
    store.fork("titled", child_id="child").close()

    out = dshpy_cli("sessions", "list").stdout

    header = out.splitlines()[0].split()
    assert header[:7] == ["id", "created", "cwd", "turns", "events", "state", "title"]
    assert header[-1] == "parent"
    child = next(line for line in out.splitlines() if line.startswith("child "))
    assert "Reading a.txt" in child and child.split()[-1] == "titled"
    plain = next(line for line in out.splitlines() if line.startswith("plain "))
    assert "x" * 50 in plain and "…" in plain and "x" * 200 not in plain  # truncated prompt


def test_list_reads_no_events_when_the_cache_is_current(store, dshpy_cli, monkeypatch):
    build_session(store, "a", turns=3)  # closed by its writer: cache rows at the end of the log

    def no_reads(*_args, **_kwargs):
        raise AssertionError("list must answer from the projection cache")

    monkeypatch.setattr(SqliteStore, "_own_events", no_reads)
    monkeypatch.setattr(SqliteStore, "read", no_reads)
    rows = json.loads(dshpy_cli("sessions", "list", "--json").stdout)
    assert rows[0]["turns"] == 3


def test_list_without_a_cache_folds_the_logs_and_writes_the_rows_back(store, dshpy_cli, db_path):
    build_session(store, "a", turns=3, title="Three turns")
    with sqlite3.connect(db_path) as db:
        db.execute("DELETE FROM projection_cache")
    db.close()

    rows = json.loads(dshpy_cli("sessions", "list", "--json").stdout)

    assert (rows[0]["turns"], rows[0]["title"], rows[0]["lifecycle"]) == (3, "Three turns", "active")
    keys = {row.key for row in store._load_projection_rows("a")}
    assert keys == {"title", "stats", "lifecycle"}  # refreshed for the next list


def test_list_limit_and_empty_store(store, dshpy_cli):
    assert "no sessions" in dshpy_cli("sessions", "list").stdout
    assert json.loads(dshpy_cli("sessions", "list", "--json").stdout) == []
    for name in ("a", "b", "c"):
        build_session(store, name, turns=1)
    assert len(json.loads(dshpy_cli("sessions", "list", "--limit", "2", "--json").stdout)) == 2


def test_show_json_has_header_stats_and_derived_messages(store, dshpy_cli):
    build_session(store, "demo", title="T")
    store.fork("demo", child_id="kid").close()

    shown = json.loads(dshpy_cli("sessions", "show", "demo", "--json").stdout)

    session = store.inspect("demo")
    assert shown["session"]["id"] == "demo"
    assert shown["session"]["cwd"] == "/srv/app"
    assert shown["session"]["version"] == dshpy.FORMAT_VERSION
    assert shown["title"] == "T"
    assert shown["stats"] == {
        "events": len(session.events),
        "turns": 2,
        "messages": len(session.derive_messages()),
        "inherited": 0,
        "forks": ["kid"],
        "pendingRepair": 0,
    }
    assert [m["seq"] for m in shown["messages"]] == [m.seq for m in session.derive_messages()]
    assert shown["messages"][0]["message"] == session.derive_messages()[0].to_dict()


def test_show_renders_roles_reasoning_tool_calls_and_error_results(store, dshpy_cli):
    session = store.create(session_id="rich", cwd="/w")
    session.append("turn/start", {"turn": 1})
    session.append("step/start", {"turn": 1, "step": 1})
    session.append(
        "user/message",
        {
            "id": "u1",
            "role": "user",
            "content": [{"type": "text", "text": "list [bold]files[/bold]"}],
            "source": {"kind": "user"},
        },
        surface_op="append",
    )
    session.append(
        "assistant/message",
        assistant_data(1, 1, "Listing.", tool_calls=[("c1", "bash", '{"cmd":"ls"}')], reasoning="I should call ls"),
        surface_op="append",
    )
    call = session.append(
        "tool/call", {"turn": 1, "step": 1, "callId": "c1", "name": "bash", "arguments": '{"cmd":"ls"}'}
    )
    session.append(
        "tool/result",
        {
            "turn": 1,
            "step": 1,
            "message": {
                "id": "t1",
                "role": "tool",
                "source": {"kind": "tool", "callId": "c1"},
                "toolCallId": "c1",
                "content": [{"type": "text", "text": "ls: \x1b[31mpermission denied"}],
                "isError": True,
            },
            "error": {"name": "ToolError", "code": "EACCES"},
        },
        surface_op="append",
        source_event_seqs=[call.seq],
    )
    session.append("step/end", {"turn": 1, "step": 1})
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    session.close()

    out = dshpy_cli("sessions", "show", "rich").stdout

    assert "session rich" in out
    assert "turn 1" in out
    assert "list [bold]files[/bold]" in out  # data is never parsed as rich markup
    assert "I should call ls" in out
    assert "Listing." in out
    assert '→ bash({"cmd":"ls"})' in out
    assert "tool bash [c1]" in out
    assert "✗ error EACCES" in out
    assert "\\x1b[31mpermission denied" in out and "\x1b" not in out  # terminal escapes made visible
    assert "events" in out and "1 turn ·" in out


def test_show_marks_an_interrupted_turn_without_writing(store, dshpy_cli):
    build_session(store, "crashed", turns=1, open_turn=True)
    before = store.stat("crashed").event_count

    out = dshpy_cli("sessions", "show", "crashed").stdout
    shown = json.loads(dshpy_cli("sessions", "show", "crashed", "--json").stdout)

    assert "interrupted" in out and "dshpy sessions repair crashed" in out
    assert shown["stats"]["pendingRepair"] == 1  # the turn/end closer, shown but not stored
    assert store.stat("crashed").event_count == before


def test_show_shortens_long_results_unless_full(store, dshpy_cli):
    session = store.create(session_id="long")
    session.append("turn/start", {"turn": 1})
    session.append("step/start", {"turn": 1, "step": 1})
    text = "\n".join(f"line {n}" for n in range(100))
    session.append(
        "user/message",
        {"id": "u", "role": "user", "content": [{"type": "text", "text": text}], "source": {"kind": "user"}},
        surface_op="append",
    )
    session.close()

    short = dshpy_cli("sessions", "show", "long").stdout
    full = dshpy_cli("sessions", "show", "long", "--full").stdout

    assert "line 5" in short and "line 99" not in short and "more lines" in short
    assert "line 99" in full and "more lines" not in full


def test_show_against_an_injected_memory_store(runner):
    memory = dshpy.open_store("memory:")
    build_session(memory, "mem", turns=1)
    result = run_cli(runner, ["sessions", "show", "mem", "--json"], obj=AppState(store=memory))
    assert json.loads(result.stdout)["session"]["id"] == "mem"
    assert (
        json.loads(run_cli(runner, ["sessions", "list", "--json"], obj=AppState(store=memory)).stdout)[0]["turns"] == 1
    )


@pytest.mark.parametrize("command", ["list", "show demo", "log demo", "export demo"])
def test_store_and_json_options_work_after_the_command_too(runner, store, store_url, command):
    build_session(store, "demo", turns=1)
    args = ["sessions", *command.split(), "--store", store_url]
    result = run_cli(runner, args)
    assert result.stdout.strip()
    if command != "export demo":  # export is JSON already
        json_result = run_cli(runner, [*args, "--json"])
        lines = json_result.stdout.splitlines() if command.startswith("log") else [json_result.stdout]
        for line in lines:
            json.loads(line)


def test_store_from_environment(runner, store, store_url, monkeypatch):
    build_session(store, "env", turns=1)
    monkeypatch.setenv("DSHPY_STORE", store_url)
    rows = json.loads(run_cli(runner, ["sessions", "list", "--json"]).stdout)
    assert [row["id"] for row in rows] == ["env"]
