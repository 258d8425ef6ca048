"""``dshpy run --provider deepseek-official`` (the Messages API) and ``--system-file``."""

from __future__ import annotations

import pytest
from cli_support import stored

from dshpy.agent.system_prompt import DEFAULT_SYSTEM_PROMPT
from dshpy.testing.fake_model import FakeModelServer, Reply


@pytest.fixture
def model(monkeypatch):
    with FakeModelServer(default=Reply.text("Default answer.")) as server:
        monkeypatch.setenv("DEEPSEEK_API_KEY", "test-key")
        monkeypatch.setenv("DEEPSEEK_BASE_URL", server.base_url)
        monkeypatch.delenv("DEEPSEEK_MODEL", raising=False)
        monkeypatch.delenv("DSHPY_PROVIDER", raising=False)
        yield server


def _session(store_url, result):
    line = next(line for line in result.stderr.splitlines() if line.startswith("session: "))
    return stored(store_url, line.removeprefix("session: "))  # loaded whole: the store is closed before it is read


def test_run_on_the_messages_api_with_a_system_file(dshpy_cli, model, store_url, tmp_path):
    prompt_file = tmp_path / "system.md"
    prompt_file.write_text("Answer in one word.")
    model.add(Reply.text("Four.", reasoning="2+2", signature="sig-cli"))
    result = dshpy_cli("run", "What is 2+2?", "--provider", "deepseek-official", "--system-file", str(prompt_file))
    assert result.stdout == "Four.\n"
    request, headers = model.requests[0], model.request_headers[0]
    assert (request["model"], request["system"], headers["x-api-key"]) == (
        "deepseek-v4-flash",
        "Answer in one word.",
        "test-key",
    )
    session = _session(store_url, result)
    answer = next(e for e in session.events if e.type == "assistant/message")
    assert answer.data["message"]["source"]["replayState"]["blocks"][0]["signature"] == "sig-cli"


def test_a_new_session_gets_dshpys_default_prompt(dshpy_cli, model, store_url):
    result = dshpy_cli("run", "hi")
    assert model.requests[0]["messages"][0] == {"role": "system", "content": DEFAULT_SYSTEM_PROMPT}
    assert _session(store_url, result).derive_messages()[0].text == DEFAULT_SYSTEM_PROMPT


def test_an_unreadable_system_file_is_named(dshpy_cli, model, tmp_path):
    missing = tmp_path / "nope.md"
    result = dshpy_cli("run", "hi", "--system-file", str(missing), code=1)
    assert f"system prompt file {missing} does not exist" in result.stderr
    assert model.requests == []


def test_the_profiles_system_prompt_applies_and_the_flag_wins(dshpy_cli, model, tmp_path):
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text('[profiles.default]\nsystem = "From the profile."\n')
    dshpy_cli("run", "hi")
    dshpy_cli("run", "hi", "--system", "From the flag.")
    first, second = model.requests
    assert first["messages"][0] == {"role": "system", "content": "From the profile."}
    assert second["messages"][0] == {"role": "system", "content": "From the flag."}
