"""Model time limits and base URLs from every place settings come from (issue #11, item 14).

``dshpy run`` flags, a profile in ``$DSHPY_HOME/config.toml``, ``DEEPSEEK_BASE_URL``,
``dshpy serve`` and the SDK's ``HarnessClient``: each in a real subprocess, against
the scripted model server, with limits small enough to expire in the test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import dshpy
from dshpy.testing.fake_model import FakeModelServer, Reply


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


def environment(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DSHPY_", "DEEPSEEK_"))}
    env.update(DSHPY_HOME=str(home), DEEPSEEK_API_KEY="test-key", **extra)
    return env


def dshpy_command(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "dshpy", *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, check=False)


def attempt_failures(store_url: str, session_id: str) -> list[dict]:
    store = dshpy.open_store(store_url)
    try:  # read while the store is open: a resumed view reads its older events on demand
        events = list(store.inspect(session_id).events)
    finally:
        store.close()
    return [e.data["stream"][-1]["chunk"]["reason"]["failure"] for e in events if e.type == "assistant/attempt"]


def write_profile(home: Path, body: str) -> None:
    (home / "config.toml").write_text(body, encoding="utf-8")


def test_run_flags_set_the_model_timeouts(home: Path, tmp_path: Path):
    store_url = f"sqlite:///{tmp_path / 's.db'}"
    with FakeModelServer([Reply.hang(), Reply.text("ok")]) as server:
        url = server.base_url
        flags = ["--connect-timeout", "5", "--read-timeout", "0.3", "--total-timeout", "60"]
        result = dshpy_command(
            "--store", store_url, "run", "hi", "--base-url", url, *flags, "--json", env=environment(home)
        )
    assert result.returncode == 0, result.stderr
    output = json.loads(result.stdout)
    assert output["text"] == "ok"
    [failure] = attempt_failures(store_url, output["sessionId"])
    assert failure == {
        "message": f"the model server at {url} sent nothing for longer than the read timeout (0.3 s)",
        "code": "TIMEOUT",
    }


def test_a_profile_sets_the_base_url_and_timeouts_and_a_flag_overrides_it(home: Path, tmp_path: Path):
    store_url = f"sqlite:///{tmp_path / 's.db'}"
    with FakeModelServer([Reply.hang(), Reply.text("one"), Reply.hang(), Reply.text("two")]) as server:
        url = server.base_url
        write_profile(home, f'[profiles.fast]\nbase_url = "{url}"\nread_timeout = 0.3\ntotal_timeout = 30\n')
        env = environment(home)
        first = dshpy_command("--store", store_url, "run", "hi", "--profile", "fast", "--json", env=env)
        second = dshpy_command(
            "--store", store_url, "run", "hi", "--profile", "fast", "--read-timeout", "0.4", "--json", env=env
        )
    assert first.returncode == 0, first.stderr
    assert second.returncode == 0, second.stderr
    [one] = attempt_failures(store_url, json.loads(first.stdout)["sessionId"])
    [two] = attempt_failures(store_url, json.loads(second.stdout)["sessionId"])
    assert one["message"].endswith("the read timeout (0.3 s)") and url in one["message"]
    assert two["message"].endswith("the read timeout (0.4 s)")


@pytest.mark.parametrize("where", ["flag", "environment", "profile"])
def test_a_malformed_base_url_fails_at_once_without_a_request_or_a_session(home: Path, tmp_path: Path, where: str):
    store = tmp_path / "s.db"
    with FakeModelServer(default=Reply.text("never")) as server:
        bad = f"127.0.0.1:{server.port}"  # no scheme
        env = environment(home)
        args = ["--store", f"sqlite:///{store}", "run", "hi"]
        if where == "flag":
            args += ["--base-url", bad]
        elif where == "environment":
            env["DEEPSEEK_BASE_URL"] = bad
        else:
            write_profile(home, f'[profiles.bad]\nbase_url = "{bad}"\n')
            args += ["--profile", "bad"]
        started = time.monotonic()
        result = dshpy_command(*args, env=env)
        elapsed = time.monotonic() - started
        assert server.requests == []
    assert result.returncode == 1
    assert f"malformed model base URL '{bad}': it must start with http:// or https://" in result.stderr
    if where == "environment":
        assert "(from DEEPSEEK_BASE_URL)" in result.stderr
    if where == "profile":
        assert "profile 'bad': base_url:" in result.stderr
    assert "Traceback" not in result.stderr
    assert not store.exists()  # no session was started
    assert elapsed < 20


def test_bad_timeout_values_are_refused_with_the_setting_named(home: Path):
    flag = dshpy_command("run", "hi", "--read-timeout", "0", env=environment(home))
    assert flag.returncode == 1 and "--read-timeout" in flag.stderr and "not in the range x>0" in flag.stderr
    write_profile(home, '[profiles.slow]\nconnect_timeout = "soon"\n')
    profile = dshpy_command("run", "hi", "--profile", "slow", env=environment(home))
    assert profile.returncode == 1
    assert "profile 'slow': connect_timeout must be a positive number of seconds, not 'soon'" in profile.stderr


def test_serve_refuses_a_malformed_base_url_at_start(home: Path):
    result = subprocess.run(
        [sys.executable, "-m", "dshpy", "serve", "--base-url", "http://127.0.0.1:99999"],
        env=environment(home),
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert result.returncode == 1
    assert "malformed model base URL 'http://127.0.0.1:99999': the port must be a number" in result.stderr


def _timed_out_then_answered(client: dshpy.HarnessClient, url: str, seconds: str) -> None:
    session = client.create_session()
    response = client.send_message(session.id, "ping")
    assert response.content == "pong"
    [attempt] = client.events(session.id, types=["assistant/attempt"])
    failure = attempt["data"]["stream"][-1]["chunk"]["reason"]["failure"]
    assert failure == {
        "message": f"the model server at {url} sent nothing for longer than the read timeout ({seconds})",
        "code": "TIMEOUT",
    }


def test_the_sdk_sets_the_servers_model_timeouts_by_argument_and_by_profile(home: Path):
    with FakeModelServer([Reply.hang(), Reply.text("pong"), Reply.hang(), Reply.text("pong")]) as server:
        url = server.base_url
        env = environment(home, DEEPSEEK_BASE_URL=url)
        with dshpy.HarnessClient(env=env, read_timeout=0.3, total_timeout=60, timeout=30) as client:
            _timed_out_then_answered(client, url, "0.3 s")
        write_profile(home, "[profiles.agent]\nread_timeout = 0.4\n")
        with dshpy.HarnessClient("agent", env=env, timeout=30) as client:
            _timed_out_then_answered(client, url, "0.4 s")
