"""``dshpy run`` with the built-in tools: a real process runs ``bash``, flags choose tools and permissions.

The end-to-end test is a real ``dshpy run`` process against the scripted model over
HTTP: the model calls ``bash`` with ``echo hi`` and the next request carries the
result ``hi\\n``. The approval prompt is exercised on a pseudo-terminal, as a user
would see it.
"""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time

import pytest
from test_run_chat import session_id_of, stored

import dshpy
from dshpy.testing.fake_model import FakeModelServer, Reply

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX processes and terminals")


def _env(server: FakeModelServer, home) -> dict[str, str]:
    env = {**os.environ, "DEEPSEEK_API_KEY": "test-key", "DEEPSEEK_BASE_URL": server.base_url}
    env["DSHPY_HOME"] = str(home)
    for name in ("DSHPY_STORE", "DEEPSEEK_MODEL", "DSH_PERMISSION_MODE", "DSHPY_ALLOW_UNSANDBOXED_SHELL"):
        env.pop(name, None)
    return env


def test_dshpy_run_process_runs_bash_and_the_model_gets_hi(tmp_path):
    url = f"sqlite:///{tmp_path}/run.db"
    workspace = tmp_path / "ws"
    workspace.mkdir()
    script = [
        Reply.tool_calls(("bash", json.dumps({"description": "Say hi", "command": "echo hi"}), "call_1")),
        Reply.text("The command said hi."),
    ]
    with FakeModelServer(script) as server:
        completed = subprocess.run(
            [sys.executable, "-m", "dshpy", "--store", url, "run", "Run echo hi", "--allow-unsandboxed-shell"],
            cwd=workspace,
            env=_env(server, tmp_path / "home"),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        requests = server.requests
    assert completed.returncode == 0, completed.stderr
    assert "The command said hi." in completed.stdout
    tools = [tool["function"]["name"] for tool in requests[0]["tools"]]
    assert tools == [
        *("read", "write", "edit", "glob", "grep", "bash"),
        *("job_output", "job_list", "job_kill"),  # the all set has dsh's job tools beside bash
        "todo_write",
    ]
    assert requests[1]["messages"][-1] == {"role": "tool", "tool_call_id": "call_1", "content": "hi\n"}
    session = stored(url, session_id_of(completed))
    assert [(e.type, dict(e.data)) for e in session.events[:3]] == [
        ("permission/preset", {"preset": "workspace-write"}),
        ("sandbox/mode", {"mode": "workspace-write"}),
        ("approval/policy", {"policy": "ask"}),
    ]
    [call] = [e for e in session.events if e.type == "tool/call"]
    [result] = [e for e in session.events if e.type == "tool/result"]
    assert (call.data["name"], result.source_event_seqs) == ("bash", (call.seq,))
    assert result.data["message"]["content"] == [{"type": "text", "text": "hi\n"}]
    assert result.data["meta"]["cwd"] == str(workspace)


@pytest.fixture
def model(monkeypatch):
    with FakeModelServer(default=Reply.text("Done.")) as server:
        monkeypatch.setenv("DEEPSEEK_API_KEY", "test-key")
        monkeypatch.setenv("DEEPSEEK_BASE_URL", server.base_url)
        for name in ("DEEPSEEK_MODEL", "DSH_PERMISSION_MODE", "DSHPY_ALLOW_UNSANDBOXED_SHELL"):
            monkeypatch.delenv(name, raising=False)
        yield server


def _names(request) -> list[str]:
    return [tool["function"]["name"] for tool in request.get("tools", [])]


def test_flags_profile_and_environment_choose_tools_and_permissions(dshpy_cli, model, store_url, tmp_path, monkeypatch):
    first = session_id_of(dshpy_cli("run", "hi", "--tools", "read", "--permissions", "read-only"))
    assert _names(model.requests[0]) == ["read", "glob", "grep", "todo_write"]
    assert [dict(e.data) for e in stored(store_url, first).events[:3]] == [
        {"preset": "read-only"},
        {"mode": "read-only"},
        {"policy": "ask"},
    ]
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text('[profiles.default]\ntools = "bash,read"\npermissions = "danger-full-access"\n')
    second = session_id_of(dshpy_cli("run", "hi"))
    assert _names(model.requests[1]) == ["read", "bash"]
    assert dict(stored(store_url, second).events[2].data) == {"policy": "never"}
    monkeypatch.setenv("DSH_PERMISSION_MODE", "read-only")
    (home / "config.toml").write_text("")
    third = session_id_of(dshpy_cli("run", "hi", "--approval", "never"))
    assert [dict(e.data) for e in stored(store_url, third).events[:3]] == [
        {"preset": "read-only"},
        {"mode": "read-only"},
        {"policy": "never"},
    ]
    none = session_id_of(dshpy_cli("run", "hi", "--tools", "none"))
    assert _names(model.requests[3]) == [] and stored(store_url, none).events[0].type == "agent/inbox/spliced"


def test_bad_tool_and_permission_settings_are_named(dshpy_cli, model, monkeypatch):
    assert "unknown tool set 'bogus'" in dshpy_cli("run", "hi", "--tools", "bogus", code=1).stderr
    assert "'full'" in dshpy_cli("run", "hi", "--permissions", "full", code=1).stderr
    monkeypatch.setenv("DSH_PERMISSION_MODE", "everything")
    stderr = dshpy_cli("run", "hi", code=1).stderr
    assert "DSH_PERMISSION_MODE" in stderr and "workspace-write" in stderr
    assert model.requests == []  # refused before any model request


def _read_until(fd: int, text: str, seen: bytearray, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while text.encode() not in seen:
        assert time.monotonic() < deadline, f"never saw {text!r} in {bytes(seen)!r}"
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            try:
                seen += os.read(fd, 4096)
            except OSError:
                break


def test_run_asks_on_the_terminal(tmp_path):
    """The user says yes at the prompt (a no is the agent-level asked+denied test)."""
    url = f"sqlite:///{tmp_path}/run.db"
    workspace = tmp_path / "ws"
    workspace.mkdir()
    target = tmp_path / "beside.txt"
    arguments = {
        "file_path": str(target),
        "content": "approved\n",
        "sandbox_permissions": "danger-full-access",
        "justification": "You asked for a file beside the workspace.",
    }
    script = [Reply.tool_calls(("write", json.dumps(arguments), "call_1")), Reply.text("Finished.")]
    with FakeModelServer(script) as server:
        leader, follower = pty.openpty()
        process = subprocess.Popen(
            [sys.executable, "-m", "dshpy", "--store", url, "run", "write beside"],
            cwd=workspace,
            env=_env(server, tmp_path / "home"),
            stdin=follower,
            stdout=follower,
            stderr=follower,
        )
        os.close(follower)
        seen = bytearray()
        try:
            _read_until(leader, "Allow once? [y/N]", seen)
            assert b"write asks for danger-full-access access:" in seen and str(target).encode() in seen
            assert b"You asked for a file beside the workspace." in seen
            os.write(leader, b"y\r")
            _read_until(leader, "session: ", seen)
            assert process.wait(30) == 0, bytes(seen)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
            os.close(leader)
    assert target.read_text() == "approved\n"
    session_id = bytes(seen).decode(errors="replace").rsplit("session: ", 1)[1].split()[0]
    store = dshpy.open_store(url)
    try:
        outcomes = [e.data["outcome"] for e in store.inspect(session_id).events if e.type == "approval/decided"]
    finally:
        store.close()
    assert outcomes == ["allowed-once"]
