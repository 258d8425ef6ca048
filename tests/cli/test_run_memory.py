"""``dshpy run|chat --memory``: the model may call session_search / session_read; off unless asked."""

from __future__ import annotations

import json

import pytest
from cli_support import model_environment, session_id_of, stored

from dshpy.log.event_text import event_text
from dshpy.testing.builders import TurnScript
from dshpy.testing.fake_model import FakeModelServer, Reply


@pytest.fixture
def model(monkeypatch):
    with FakeModelServer(default=Reply.text("Done.")) as server:
        model_environment(monkeypatch, server)
        yield server


BUILTIN = ["read", "write", "edit", "glob", "grep", "bash", "job_output", "job_list", "job_kill", "todo_write"]


def _tool_names(request) -> list[str]:
    return [tool["function"]["name"] for tool in request.get("tools", [])]


def test_memory_is_off_by_default_and_on_with_the_flag(dshpy_cli, model, store_url):
    model.add(Reply.text("The port is 8443."))
    earlier = session_id_of(dshpy_cli("run", "Which port does the staging proxy use?", "--tools", "none"))
    assert _tool_names(model.requests[0]) == []

    model.add(
        Reply.tool_calls(("session_search", json.dumps({"query": "staging proxy"}), "c1")),
        Reply.tool_calls(("session_read", json.dumps({"session_id": earlier, "seq": 5, "after": 3}), "c2")),
        Reply.text("8443, as found earlier."),
    )
    now = session_id_of(dshpy_cli("run", "What did we find about the staging proxy?", "--memory"))

    assert _tool_names(model.requests[1]) == [*BUILTIN, "session_search", "session_read"]
    results = [e for e in stored(store_url, now).events if e.type == "tool/result"]
    found, read = (event_text(r) for r in results)
    assert f"[{earlier}#5] user/message: Which port does the «staging proxy» use?" in found
    assert now not in found  # the current session is left out
    assert f"Session {earlier}" in read and "The port is 8443." in read


def test_memory_scope_cwd_leaves_other_directories_out(dshpy_cli, model, store, store_url):
    with store.create(session_id="elsewhere", cwd="/some/other/project") as session:
        TurnScript(session).turn("kiwi")
    model.add(
        Reply.tool_calls(("session_search", json.dumps({"query": "kiwi"}), "c1")),
        Reply.text("Nothing."),
        Reply.tool_calls(("session_search", json.dumps({"query": "kiwi"}), "c1")),
        Reply.text("Found it."),
    )
    here = session_id_of(dshpy_cli("run", "kiwi?", "--memory"))
    wide = session_id_of(dshpy_cli("run", "kiwi?", "--memory-scope", "all"))

    def result(session_id: str) -> str:
        event = next(e for e in stored(store_url, session_id).events if e.type == "tool/result")
        return event_text(event)

    assert result(here).startswith("No matches for 'kiwi' in sessions in ")
    assert "[elsewhere#" in result(wide) and here in result(wide)


def test_memory_from_the_profile_and_no_memory_wins(dshpy_cli, model, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text('[profiles.default]\nmemory = true\nmemory_scope = "all"\n')
    dshpy_cli("run", "hello", "--tools", "none")
    dshpy_cli("run", "hello", "--no-memory")
    assert _tool_names(model.requests[0]) == ["session_search", "session_read"]
    assert _tool_names(model.requests[1]) == BUILTIN

    (home / "config.toml").write_text('[profiles.default]\nmemory_scope = "everything"\n')
    assert "memory_scope" in dshpy_cli("run", "hello", code=1).stderr
