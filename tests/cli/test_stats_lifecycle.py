"""``sessions stats`` (usage, cost estimate, work, lifecycle) and ``sessions archive|pause|resume``."""

from __future__ import annotations

import json

import pytest
from cli_support import build_session

import dshpy
from dshpy.projections import LIFECYCLE, SESSION_STATE_TYPE, state_of
from dshpy.testing.builders import TurnScript, attempt_data


def with_failed_attempt(store: dshpy.BaseStore, session_id: str = "demo") -> None:
    """Two completed turns, the first with a failed model attempt (100 in / 20 out, billed like the rest)."""
    session = store.create(session_id=session_id, cwd="/srv/app")
    script = TurnScript(session)
    script.turn("please read a.txt", steps=2, close=False)
    session.append("step/start", {"turn": 1, "step": 3})
    session.append("assistant/attempt", attempt_data(1, 3))
    session.append("step/end", {"turn": 1, "step": 3})
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    script.turn("and b.txt?", steps=1)
    session.close()


def stats_json(dshpy_cli, session_id: str = "demo") -> dict:
    return json.loads(dshpy_cli("sessions", "stats", session_id, "--json").stdout)


# -- stats -----------------------------------------------------------------------------------


def test_stats_json_counts_failed_attempts_and_has_no_cost_without_prices(store, dshpy_cli):
    with_failed_attempt(store)
    result = stats_json(dshpy_cli)
    assert result["id"] == "demo"
    assert result["asOfSeq"] == store.stat("demo").event_count - 1
    assert result["lifecycle"]["state"] == "active"
    assert "turnOpen" not in result["lifecycle"]  # bookkeeping is not shown
    assert (result["stats"]["turns"], result["stats"]["failedModelCalls"]) == (2, 1)
    assert "pendingTools" not in result["stats"] and "requestStart" not in result["stats"]
    usage = result["usage"]
    assert (usage["messages"], usage["failedAttempts"]) == (3, 1)
    assert usage["total"]["inputTokens"] == 400 and usage["total"]["outputTokens"] == 80  # 3 messages + 1 attempt
    assert "route" not in usage
    assert result["cost"] is None
    assert result["title"] == "please read a.txt" and result["titleSource"] == "prompt"


def test_stats_text_says_how_to_configure_prices(store, dshpy_cli):
    with_failed_attempt(store)
    out = dshpy_cli("sessions", "stats", "demo").stdout
    assert "session demo" in out
    assert "active" in out and "2 turns" in out and "(1 failed)" in out
    assert "deepseek/deepseek-chat" in out and "400" in out
    assert "no prices configured" in out and "config.toml" in out and "DSHPY_PRICES" in out


def test_stats_prices_from_config_toml(store, dshpy_cli, tmp_path):
    with_failed_attempt(store)
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(
        '[prices."deepseek-chat"]\ninput = 2.0\ncache_read = 0.5\noutput = 10.0\n', encoding="utf-8"
    )
    cost = stats_json(dshpy_cli)["cost"]
    assert cost["total"] == pytest.approx((400 * 2.0 + 80 * 10.0) / 1_000_000)  # the failed attempt is billed
    assert cost["complete"] is True and cost["unpriced"] == []
    assert cost["sources"] == [str(home / "config.toml")]
    out = dshpy_cli("sessions", "stats", "demo").stdout
    assert "$0.001600" in out and "no prices configured" not in out


def test_stats_prices_from_the_environment_override_the_file_per_model(store, dshpy_cli, tmp_path, monkeypatch):
    with_failed_attempt(store)
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text('[prices."deepseek-chat"]\ninput = 2.0\noutput = 10.0\n', encoding="utf-8")
    monkeypatch.setenv("DSHPY_PRICES", '{"deepseek/deepseek-chat": {"input": 1, "output": 1}}')
    cost = stats_json(dshpy_cli)["cost"]
    assert cost["total"] == pytest.approx(480 / 1_000_000)  # provider/model beats the bare model name
    assert cost["sources"] == [str(home / "config.toml"), "$DSHPY_PRICES"]


def test_stats_marks_models_without_a_price(store, dshpy_cli, monkeypatch):
    with_failed_attempt(store)
    monkeypatch.setenv("DSHPY_PRICES", '{"deepseek-reasoner": {"input": 1, "output": 1}}')
    cost = stats_json(dshpy_cli)["cost"]
    assert cost["complete"] is False and cost["unpriced"] == ["deepseek-chat"] and cost["total"] == 0
    assert "no price" in dshpy_cli("sessions", "stats", "demo").stdout


@pytest.mark.parametrize(
    ("prices", "message"),
    [
        ('{"deepseek-chat": {"input": 1}}', "lacks output"),
        ('{"deepseek-chat": {"input": -1, "output": 1}}', "non-negative number"),
        ('{"deepseek-chat": {"input": 1, "output": 1, "bogus": 2}}', "unknown field 'bogus'"),
        ("[1, 2]", "prices must be a table"),
        ("{nope", "not a JSON object"),
    ],
)
def test_malformed_prices_exit_1(store, dshpy_cli, monkeypatch, prices, message):
    with_failed_attempt(store)
    monkeypatch.setenv("DSHPY_PRICES", prices)
    assert message in dshpy_cli("sessions", "stats", "demo", code=1).stderr


def test_malformed_config_toml_exits_1(store, dshpy_cli, tmp_path):
    with_failed_attempt(store)
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "config.toml").write_text("[prices\n", encoding="utf-8")
    assert "not valid TOML" in dshpy_cli("sessions", "stats", "demo", code=1).stderr


def test_stats_of_an_unknown_session_exits_1(store, dshpy_cli):
    build_session(store, "demo")
    assert "not found" in dshpy_cli("sessions", "stats", "nope", code=1).stderr
    assert "Error" in dshpy_cli("sessions", "stats", "../x", code=1).stderr


# -- pause / resume / archive -------------------------------------------------------------


def lifecycle(store: dshpy.BaseStore, session_id: str = "demo") -> str:
    return store.projections(session_id, ["lifecycle"])["values"]["lifecycle"]["state"]


def test_pause_and_resume(store, dshpy_cli):
    build_session(store, "demo")
    assert dshpy_cli("sessions", "pause", "demo", "--reason", "lunch").stdout.strip() == "demo: active → paused"
    assert lifecycle(store) == "paused"
    assert store.projections("demo", ["lifecycle"])["values"]["lifecycle"]["reason"] == "lunch"
    assert dshpy_cli("sessions", "pause", "demo").stdout.strip() == "demo: already paused"  # idempotent, exit 0

    session = store.open("demo")
    with pytest.raises(dshpy.LifecycleError, match="resume it first"):
        session.append("turn/start", {"turn": 3})
    session.close()

    result = json.loads(dshpy_cli("sessions", "resume", "demo", "--json").stdout)
    assert (result["from"], result["to"]) == ("paused", "active")
    assert [event["data"] for event in result["appended"]] == [{"state": "active"}]
    assert result["appended"][0]["type"] == SESSION_STATE_TYPE and result["appended"][0]["ignorable"] is True
    assert lifecycle(store) == "active"


def test_archive_completes_an_active_session_first(store, dshpy_cli):
    build_session(store, "demo")
    before = store.stat("demo").event_count
    result = json.loads(dshpy_cli("sessions", "archive", "demo", "--json").stdout)
    assert (result["from"], result["to"]) == ("active", "archived")
    assert [event["data"]["state"] for event in result["appended"]] == ["completed", "archived"]
    assert store.stat("demo").event_count == before + 2
    session = store.open("demo")
    assert state_of(session, LIFECYCLE).state == "archived"
    with pytest.raises(dshpy.SessionArchivedError):
        session.append("todo/write", {"todos": []})
    session.close()
    assert dshpy_cli("sessions", "archive", "demo").stdout.strip() == "demo: already archived"
    assert store.stat("demo").event_count == before + 2


def test_archive_of_a_completed_session_appends_only_the_archive(store, dshpy_cli):
    build_session(store, "demo")
    session = store.open("demo")
    dshpy.set_lifecycle(session, "completed")
    session.close()
    out = dshpy_cli("sessions", "archive", "demo", "--reason", "done with it").stdout
    assert out.strip() == "demo: completed → archived"
    assert store.projections("demo", ["lifecycle"])["values"]["lifecycle"]["reason"] == "done with it"


def test_archive_a_crashed_session_closes_its_turn_first(store, dshpy_cli):
    build_session(store, "demo", open_turn=True)
    assert dshpy_cli("sessions", "archive", "demo").stdout.strip() == "demo: active → completed → archived"
    events = list(store.read("demo"))
    assert [e.type for e in events[-3:]] == ["turn/end", SESSION_STATE_TYPE, SESSION_STATE_TYPE]


@pytest.mark.parametrize(
    ("setup", "command", "message"),
    [
        ("archived", "pause", "archived"),
        ("archived", "resume", "archived"),
        ("created", "archive", "never ran"),
        ("created", "pause", "illegal session lifecycle transition created → paused"),
        ("created", "resume", "not paused"),
        ("completed", "pause", "illegal session lifecycle transition completed → paused"),
    ],
)
def test_illegal_transitions_exit_1_and_append_nothing(store, dshpy_cli, setup, command, message):
    if setup == "created":
        store.create(session_id="demo").close()
    else:
        build_session(store, "demo")
        session = store.open("demo")
        if setup in ("completed", "archived"):
            dshpy.set_lifecycle(session, "completed")
        if setup == "archived":
            dshpy.set_lifecycle(session, "archived")
        session.close()
    before = store.stat("demo").event_count
    result = dshpy_cli("sessions", command, "demo", code=1)
    assert message in result.stderr and result.stderr.startswith("Error: ")
    assert store.stat("demo").event_count == before


def test_lifecycle_commands_on_unknown_sessions_exit_1(store, dshpy_cli):
    build_session(store, "demo")
    for command in ("archive", "pause", "resume"):
        assert "not found" in dshpy_cli("sessions", command, "nope", code=1).stderr


def test_list_shows_the_lifecycle_state(store, dshpy_cli):
    build_session(store, "a")
    build_session(store, "b")
    dshpy_cli("sessions", "pause", "b")
    out = dshpy_cli("sessions", "list").stdout
    rows = {line.split()[0]: line for line in out.splitlines()[1:]}
    assert " paused " in rows["b"] and " active " in rows["a"]
    listed = {row["id"]: row["lifecycle"] for row in json.loads(dshpy_cli("sessions", "list", "--json").stdout)}
    assert listed == {"a": "active", "b": "paused"}
