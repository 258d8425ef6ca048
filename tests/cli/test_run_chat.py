"""``dshpy run`` and ``dshpy chat`` against FakeModelServer (in-process through click's runner)."""

from __future__ import annotations

import json

import pytest
from cli_support import model_environment, session_id_of, stored

from dshpy.testing.fake_model import FakeModelServer, Reply


@pytest.fixture
def model(monkeypatch):
    with FakeModelServer(default=Reply.text("Default answer.")) as server:
        model_environment(monkeypatch, server)
        yield server


def test_run_streams_the_answer_and_names_the_session(dshpy_cli, model, store_url):
    model.add(Reply.text("Four.", reasoning="2+2"))
    result = dshpy_cli("run", "What is 2+2?", "--system", "Be terse.")
    assert result.stdout == "Four.\n"
    session = stored(store_url, session_id_of(result))
    assert [m.text for m in session.derive_messages()] == ["Be terse.", "What is 2+2?", "Four."]
    assert session.events[-1].data["reason"] == {"kind": "completed"}
    assert model.requests[0]["model"] == "deepseek-chat"


def test_run_continues_a_session_and_keeps_its_system_prompt(dshpy_cli, model, store_url):
    first = dshpy_cli("run", "Remember kiwi.", "--system", "Be terse.")
    session_id = session_id_of(first)
    model.add(Reply.text("Kiwi."))
    second = dshpy_cli("run", "Which word?", "--session", session_id, "--model", "deepseek-reasoner")
    assert second.stdout == "Kiwi.\n"
    session = stored(store_url, session_id)
    assert session.next_turn == 3
    assert [e.data["reason"] for e in session.events if e.type == "request/header"] == ["initial", "resume"]
    assert sum(e.type == "system/message" for e in session.events) == 1
    assert sum(e.type == "session/end-seed" for e in session.events) == 1
    assert model.requests[1]["model"] == "deepseek-reasoner"
    assert model.requests[1]["messages"][0] == {"role": "system", "content": "Be terse."}


def test_run_json(dshpy_cli, model):
    model.add(Reply.text("Yes.", usage=None))
    result = dshpy_cli("run", "Well?", "--json")
    document = json.loads(result.stdout)
    assert document["reason"] == {"kind": "completed"} and document["text"] == "Yes." and document["turn"] == 1
    assert document["sessionId"].startswith("session-")


def test_run_without_a_key_says_how_to_set_one(dshpy_cli, monkeypatch, db_path):
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    result = dshpy_cli("run", "hello", code=1)
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith("Error: no API key: set DEEPSEEK_API_KEY")
    assert not db_path.exists()


def test_run_reports_a_refused_key_and_exits_1(dshpy_cli, model, store_url):
    model.add(Reply.unauthorized())
    result = dshpy_cli("run", "hello", code=1)
    assert "the model server refused the API key (HTTP 401" in result.stderr
    assert len(model.requests) == 1
    session = stored(store_url, session_id_of(result))
    assert session.events[-1].data["reason"]["error"]["code"] == "INVALID_CREDENTIAL"


def test_run_refuses_a_bad_session_id(dshpy_cli, model):
    assert "invalid session id" in dshpy_cli("run", "x", "--session", "../etc", code=1).stderr
    assert "not found" in dshpy_cli("run", "x", "--session", "nope", code=1).stderr


def test_chat_repl_commands_and_fork(dshpy_cli, model, store_url):
    model.add(Reply.text("First answer."), Reply.text("Answer in the fork."))
    result = dshpy_cli("chat", "--system", "S", stdin="hello\n/stats\n/history\n/fork\nagain\n/nope\n/exit\n")
    out = result.stdout
    assert "First answer." in out and "Answer in the fork." in out
    assert "1 turn," in out and "tokens: 120 input" in out and "1 model answer, 0 failed attempts" in out
    assert "hello" in out  # /history
    forked = next(line for line in out.splitlines() if "forked" in line)
    parent_id, child_id = forked.split("forked ")[1].split(" at seq ")[0], forked.rsplit("now in ", 1)[1]
    assert session_id_of(result) == child_id
    assert "unknown command /nope" in result.stderr
    parent, child = stored(store_url, parent_id), stored(store_url, child_id)
    assert parent.next_turn == 2 and child.next_turn == 3
    assert child.header.parent_session == parent_id
    assert [m.text for m in child.derive_messages()] == ["S", "hello", "First answer.", "again", "Answer in the fork."]


def test_chat_fork_at_a_seq_and_bad_forks(dshpy_cli, model, store_url):
    result = dshpy_cli("chat", "--tools", "none", stdin="one\n/fork 3\n/fork x\n/fork 999\n")
    assert "fork refused (OPEN_TURN)" in result.stderr
    assert "/fork takes a seq number" in result.stderr
    assert "fork refused (INVALID_BOUNDARY)" in result.stderr
