"""``sessions log``, ``sessions fork`` and ``sessions repair``."""

from __future__ import annotations

import json

import pytest
from cli_support import build_session

from dshpy.core.events import encode_event
from dshpy.testing.builders import assistant_data, user_message


def test_log_json_is_exactly_the_wire_form_one_per_line(store, dshpy_cli):
    build_session(store, "demo")
    lines = dshpy_cli("sessions", "log", "demo", "--json").stdout.splitlines()
    events = list(store.read("demo"))
    assert lines == [encode_event(event, seq_ranges=False).decode() for event in events]
    assert [json.loads(line) for line in lines] == [json.loads(json.dumps(event.to_wire())) for event in events]


def test_log_from_and_types(store, dshpy_cli):
    build_session(store, "demo", turns=3)
    events = list(store.read("demo"))

    tail = [
        json.loads(line) for line in dshpy_cli("sessions", "log", "demo", "--from", "10", "--json").stdout.splitlines()
    ]
    assert [e["seq"] for e in tail] == list(range(10, len(events)))

    picked = dshpy_cli("sessions", "log", "demo", "--type", "turn/start", "--type", "turn/end", "--json").stdout
    assert [json.loads(line)["type"] for line in picked.splitlines()] == ["turn/start", "turn/end"] * 3

    pattern = dshpy_cli("sessions", "log", "demo", "--type", "step/*", "--from", "5", "--json").stdout
    expected = [e.seq for e in events if e.type.startswith("step/") and e.seq >= 5]
    assert [json.loads(line)["seq"] for line in pattern.splitlines()] == expected


def test_log_human_lines(store, dshpy_cli):
    build_session(store, "demo", turns=1)
    out = dshpy_cli("sessions", "log", "demo").stdout.splitlines()
    assert len(out) == store.stat("demo").event_count
    assert out[1].split()[0] == "1" and "turn/start" in out[1] and "turn 1" in out[1]
    assert any("user/message" in line and "[user] please read a.txt" in line for line in out)
    assert any("tool/call" in line and "read_file" in line for line in out)


def test_log_of_a_fork_includes_the_inherited_prefix(store, dshpy_cli):
    build_session(store, "demo", turns=2)
    store.fork("demo", child_id="kid").close()
    parent = dshpy_cli("sessions", "log", "demo", "--json").stdout.splitlines()
    child = dshpy_cli("sessions", "log", "kid", "--json").stdout.splitlines()
    assert child[: len(parent)] == parent
    assert json.loads(child[len(parent)])["type"] == "session/end-seed"
    turns = dshpy_cli("sessions", "log", "kid", "--type", "turn/start", "--json").stdout.splitlines()
    assert len(turns) == 2


def test_fork_prints_the_child_id(store, dshpy_cli):
    build_session(store, "demo", turns=2)
    child_id = dshpy_cli("sessions", "fork", "demo").stdout.strip()
    child = store.stat(child_id)
    assert child.parent_session == "demo"
    assert child.event_count == store.stat("demo").event_count + 1


def test_fork_at_a_boundary_as_json(store, dshpy_cli):
    build_session(store, "demo", turns=2)
    first_end = next(e.seq for e in store.read("demo") if e.type == "turn/end")
    result = json.loads(dshpy_cli("sessions", "fork", "demo", "--at", str(first_end), "--json").stdout)
    assert result["parentSession"] == "demo"
    assert result["inheritedEventCount"] == first_end + 1
    assert store.inspect(result["id"]).next_turn == 2


def test_fork_inside_an_open_turn_needs_close_open_turn(store, dshpy_cli):
    build_session(store, "demo", turns=1)
    inside = next(e.seq for e in store.read("demo") if e.type == "tool/call")
    before = {info.id for info in store.list()}

    refused = dshpy_cli("sessions", "fork", "demo", "--at", str(inside), code=1)
    assert refused.stderr.startswith("Error: fork refused (OPEN_TURN)")
    assert "--close-open-turn" in refused.stderr
    assert {info.id for info in store.list()} == before

    child_id = dshpy_cli("sessions", "fork", "demo", "--at", str(inside), "--close-open-turn").stdout.strip()
    tail = list(store.read(child_id))[inside + 1 :]
    assert [e.type for e in tail][-1] == "turn/end"
    assert tail[-1].data["reason"]["kind"] == "forked"


@pytest.mark.parametrize(
    ("args", "code_name"),
    [
        (["nope"], "SESSION_NOT_FOUND"),
        (["demo", "--at", "999"], "INVALID_BOUNDARY"),
    ],
)
def test_fork_errors_carry_their_code(store, dshpy_cli, args, code_name):
    build_session(store, "demo", turns=1)
    result = dshpy_cli("sessions", "fork", *args, code=1)
    assert result.stderr.startswith(f"Error: fork refused ({code_name})")
    assert len(result.stderr.strip().splitlines()) == 1
    assert result.stdout == ""


def test_repair_appends_the_interrupted_closers(store, dshpy_cli):
    session = store.create(session_id="crashed")
    session.append("turn/start", {"turn": 1})
    session.append("step/start", {"turn": 1, "step": 1})
    session.append("user/message", user_message("go"), surface_op="append")
    session.append(
        "assistant/message",
        assistant_data(1, 1, "", tool_calls=[("c1", "bash", "{}"), ("c2", "bash", '{"x":1}')]),
        surface_op="append",
    )
    session.append("tool/call", {"turn": 1, "step": 1, "callId": "c1", "name": "bash", "arguments": "{}"})
    session.close()
    stored = store.stat("crashed").event_count

    dry = dshpy_cli("sessions", "repair", "crashed", "--dry-run").stdout
    assert "would append 4 closer event(s)" in dry
    assert store.stat("crashed").event_count == stored

    out = dshpy_cli("sessions", "repair", "crashed").stdout
    assert "appended 4 closer event(s)" in out
    assert "tool/result for call c1 (TOOL_OUTCOME_UNKNOWN)" in out
    assert "tool/result for call c2 (TOOL_NOT_STARTED)" in out
    assert "step/end of turn 1 step 1" in out
    assert "turn/end of turn 1 (interrupted)" in out
    assert store.stat("crashed").event_count == stored + 4

    again = json.loads(dshpy_cli("sessions", "repair", "crashed", "--json").stdout)
    assert again == {"id": "crashed", "dryRun": False, "appended": 0, "events": []}
    assert "nothing to repair" in dshpy_cli("sessions", "repair", "crashed").stdout


def test_repair_json_lists_the_appended_events(store, dshpy_cli):
    build_session(store, "crashed", turns=1, open_turn=True)
    result = json.loads(dshpy_cli("sessions", "repair", "crashed", "--json").stdout)
    assert result["appended"] == 1
    assert result["events"][0]["type"] == "turn/end"
    assert result["events"][0]["data"]["reason"] == {"kind": "interrupted"}
    assert result["events"][0] == list(store.read("crashed"))[-1].to_wire()
