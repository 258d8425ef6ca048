"""``dshpy sessions compact``, ``/compact`` in ``dshpy chat`` and the context line, against FakeModelServer."""

from __future__ import annotations

import json

import pytest
from cli_support import build_session

import dshpy
from dshpy.compaction import SUMMARY_INSTRUCTION
from dshpy.log import records
from dshpy.testing import builders
from dshpy.testing.fake_model import FakeModelServer, Reply

SUMMARY = "## Primary Request and Intent\n- read a.txt\n\n## Next Step\n- (none)"


def summary_requests(server: FakeModelServer) -> list[dict]:
    return [r for r in server.requests if r["messages"][-1] == {"role": "user", "content": SUMMARY_INSTRUCTION}]


@pytest.fixture
def model(monkeypatch):
    with FakeModelServer(default=Reply.text(SUMMARY)) as server:
        monkeypatch.setenv("DEEPSEEK_API_KEY", "test-key")
        monkeypatch.setenv("DEEPSEEK_BASE_URL", server.base_url)
        monkeypatch.delenv("DEEPSEEK_MODEL", raising=False)
        yield server


def events_of(store_url: str, session_id: str) -> list[dshpy.SessionEvent]:
    store = dshpy.open_store(store_url)
    try:
        return list(store.read(session_id))
    finally:
        store.close()


def test_compact_condenses_all_but_the_newest_message(dshpy_cli, model, store, store_url):
    build_session(store, "demo", turns=3)
    before = len(events_of(store_url, "demo"))
    result = dshpy_cli("sessions", "compact", "demo")
    assert result.stdout.startswith("demo: compacted ")
    assert "context: " in result.stdout and "% used (" in result.stdout
    events = events_of(store_url, "demo")
    assert [e.type for e in events[before:]] == [
        "compaction/start",
        "compaction/summary",
        "user/message",
        "compaction/end",
    ]
    summary = events[before + 1].data
    assert summary["llmStreamCall"] is True and summary["model"] == "deepseek-chat"
    (request,) = summary_requests(model)
    assert request["model"] == "deepseek-chat"  # the session's own route (its request/context)
    assert request["max_tokens"] == 8_192
    dshpy.validate(events)
    view = dshpy.open_store(store_url)
    try:  # a resumed session derives its older messages from the store on first read: read them while it is open
        messages = view.inspect("demo").derive_messages()
        assert [m.role for m in messages] == ["system", "user", "assistant"]  # system, checkpoint, the newest answer
        assert messages[1].data["source"]["kind"] == "compact-checkpoint"
    finally:
        view.close()


def test_compact_json(dshpy_cli, model, store):
    build_session(store, "demo", turns=2)
    out = json.loads(dshpy_cli("sessions", "compact", "demo", "--json").stdout)
    assert out["sessionId"] == "demo"
    assert {"compactionId", "startSeq", "summarySeq", "endSeq", "shadowedSeqs", "shadowedTokenCount"} <= out.keys()
    assert out["summarySeq"] == out["startSeq"] + 1
    assert set(out["context"]) == {"used", "window", "ratio"} and out["context"]["window"] == 128_000


def test_dry_run_writes_nothing_and_needs_no_key(dshpy_cli, monkeypatch, store, store_url):
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    build_session(store, "demo", turns=2)
    before = events_of(store_url, "demo")
    out = json.loads(dshpy_cli("sessions", "compact", "demo", "--dry-run", "--json").stdout)
    assert out["dryRun"] is True
    assert out["shadowedSeqs"][0] == out["shadowedRange"]["start"]
    assert out["summaryRequest"]["model"] == "deepseek-chat"
    text = dshpy_cli("sessions", "compact", "demo", "--dry-run").stdout
    assert text.startswith(f"demo: would compact {len(out['shadowedSeqs'])} history items")
    assert events_of(store_url, "demo") == before


@pytest.mark.parametrize("dry_run", [False, True])
def test_an_empty_session_is_refused_with_nothing_written(dshpy_cli, monkeypatch, store, store_url, dry_run):
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)  # refused before any model is needed
    store.create(session_id="empty").close()
    args = ["sessions", "compact", "empty", *(["--dry-run"] if dry_run else [])]
    result = dshpy_cli(*args, code=1)
    assert result.stderr.startswith("Error: No compactable history yet:")
    assert events_of(store_url, "empty") == []


def test_only_one_indivisible_tool_pair_is_nothing_to_compact(dshpy_cli, model, store, store_url):
    """The newest node is always kept, and it answers the only other node's call: no balanced span."""
    session = store.create(session_id="pair")
    session.append("turn/start", {"turn": 1})
    session.append("step/start", {"turn": 1, "step": 1})
    session.append("system/message", records.system_data(1, 1, "S"), surface_op="append")
    answer = builders.assistant_data(1, 1, tool_calls=[("c1", "read_file", "{}")])
    session.append("assistant/message", answer, surface_op="append")
    started = session.append("tool/call", records.tool_call_data(1, 1, "c1", "read_file", "{}"))
    result = builders.tool_result_data(1, 1, "c1", "x" * 400)
    session.append("tool/result", result, surface_op="append", source_event_seqs=[started.seq])
    session.append("step/end", {"turn": 1, "step": 1})
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    session.close()
    before = events_of(store_url, "pair")
    assert "tool call is never separated" in dshpy_cli("sessions", "compact", "pair", code=1).stderr
    assert events_of(store_url, "pair") == before and model.requests == []


@pytest.mark.parametrize(
    ("answer", "message"),
    [("", "compaction refused (summary): the summarizer produced no summary text"), ("x" * 50_000, "not smaller")],
)
def test_an_empty_or_oversized_summary_writes_nothing(dshpy_cli, model, store, store_url, answer, message):
    build_session(store, "demo", turns=2)
    before = events_of(store_url, "demo")
    model.add(Reply.text(answer))
    result = dshpy_cli("sessions", "compact", "demo", code=1)
    assert message in result.stderr
    assert events_of(store_url, "demo") == before


def test_a_session_another_writer_holds_is_refused(dshpy_cli, model, store, store_url):
    build_session(store, "demo", turns=2)
    other = dshpy.open_store(store_url)
    held = other.open("demo")
    try:
        before = len(held.events)
        result = dshpy_cli("sessions", "compact", "demo", code=1)
        assert result.stderr.startswith("Error: ")
    finally:
        held.close()
        other.close()
    assert len(events_of(store_url, "demo")) == before


def test_show_says_how_full_the_context_is(dshpy_cli, store):
    build_session(store, "demo", turns=2)
    shown = json.loads(dshpy_cli("sessions", "show", "demo", "--json").stdout)
    assert shown["context"]["window"] == 128_000 and 0 < shown["context"]["used"] < 128_000
    assert "% used (" in dshpy_cli("sessions", "show", "demo").stdout


def test_chat_compact_is_logged_as_dsh_logs_it(dshpy_cli, model, store_url):
    model.add(Reply.text("First answer."), Reply.text("Second answer, long enough to keep. " * 20))
    result = dshpy_cli("chat", "--system", "S", stdin="one " * 200 + "\ntwo\n/compact\n/compact now\n/stats\n")
    assert "Compacted 3 history items (~" in result.stdout
    assert "Error: Usage: /compact (no arguments)" in result.stderr
    assert "1 compaction summary" in result.stdout and "context: " in result.stdout
    session_id = result.stderr.rsplit("session: ", 1)[1].strip()
    events = events_of(store_url, session_id)
    commands = [e for e in events if e.type.startswith("command/")]
    first, second = commands[0].data, commands[2].data
    assert first == {"commandId": first["commandId"], "name": "compact", "args": "", "source": {"kind": "user"}}
    assert first["commandId"].startswith("cmd-")
    summary = next(e for e in events if e.type == "compaction/summary")
    assert summary.data["sourceCommandId"] == first["commandId"]
    assert commands[1].data == {
        "commandId": first["commandId"],
        "kind": "success",
        "text": commands[1].data["text"],
        "sourceEventSeq": summary.seq,
    }
    assert second["args"] == " now"
    assert commands[3].data == {
        "commandId": second["commandId"],
        "kind": "error",
        "text": "Usage: /compact (no arguments)",
    }
    checkpoint = events[summary.seq + 1]
    assert checkpoint.data["source"] == {
        "kind": "compact-checkpoint",
        "compactionId": summary.data["compactionId"],
        "sourceCommandId": first["commandId"],
    }
    dshpy.validate(events)


def test_chat_compact_on_a_new_session_has_nothing_to_compact(dshpy_cli, model, store_url):
    result = dshpy_cli("chat", "--tools", "none", stdin="/compact\n")
    assert "No compactable history yet." in result.stdout
    session_id = result.stderr.rsplit("session: ", 1)[1].strip()
    assert [e.type for e in events_of(store_url, session_id)] == ["command/run", "command/done"]


def test_the_config_file_sets_the_window_and_turns_auto_compaction_off(dshpy_cli, model, store_url, tmp_path):
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text('[models."deepseek-chat"]\ncontext_window = 4096\n\n[compaction]\nauto = false\n')
    result = dshpy_cli("run", "hello", "--json")
    session_id = json.loads(result.stdout)["sessionId"]
    (context,) = [e for e in events_of(store_url, session_id) if e.type == "request/context"]
    assert context.data["contextWindow"] == 4096
    flagged = dshpy_cli("run", "hello", "--json", "--context-window", "9000", "--auto-compact")
    (context,) = [
        e for e in events_of(store_url, json.loads(flagged.stdout)["sessionId"]) if e.type == "request/context"
    ]
    assert context.data["contextWindow"] == 9000


def test_a_malformed_window_in_the_config_file_is_one_error_line(dshpy_cli, model, tmp_path):
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text('[models."deepseek-chat"]\ncontext_window = "big"\n')
    result = dshpy_cli("run", "hello", code=1)
    assert "context_window must be a positive integer" in result.stderr
