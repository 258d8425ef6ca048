"""``dshpy-runtime`` with the built-in tools: dsh's permission rows from the SDK's patches, a bash turn over stdio."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from server_support import StdioServer, server_env
from test_dsh_patches import _write

from dshpy.server.dsh_patches import PatchError
from dshpy.server.dsh_permission_patches import PatchedPermissions, permissions_from_patches
from dshpy.testing.fake_model import FakeModelServer, Reply


def test_permission_rows_of_the_patches(tmp_path: Path) -> None:
    first = _write(
        tmp_path,
        "a.yml",
        "- id: sandbox-policy\n  config:\n    mode: read-only\n    workspaceRoot: /srv\n"
        "- id: approval\n  config:\n    policy: never\n",
    )
    second = _write(tmp_path, "b.json", '[{"id": "sandbox-policy", "config": {"mode": "danger-full-access"}}]')
    assert permissions_from_patches([first]) == PatchedPermissions("read-only", "never")
    assert permissions_from_patches([first, second]) == PatchedPermissions("danger-full-access", "never")
    assert permissions_from_patches([second], env={}) == PatchedPermissions("danger-full-access", "ask")
    danger = {"DSH_PERMISSION_MODE": "danger-full-access"}
    assert permissions_from_patches([second], env=danger) == PatchedPermissions("danger-full-access", "never")
    assert permissions_from_patches([]) == PatchedPermissions()
    bad = _write(tmp_path, "c.yml", "- id: approval\n  config:\n    policy: sometimes\n")
    with pytest.raises(PatchError, match=r"c\.yml: approval policy must be one of ask, never, not 'sometimes'"):
        permissions_from_patches([bad])


def test_runtime_runs_bash_under_the_patched_preset(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    patch = _write(tmp_path, "perm.yml", "- id: sandbox-policy\n  config:\n    mode: danger-full-access\n")
    script = [
        Reply.tool_calls(("bash", json.dumps({"description": "Say hi", "command": "echo hi"}), "toolu_1")),
        Reply.text("It said hi."),
    ]
    with FakeModelServer(script) as model:
        process = subprocess.Popen(
            [sys.executable, "-c", "from dshpy.server.main import main; main()", "--patch", str(patch)],
            cwd=workspace,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=server_env(tmp_path / "home", model.base_url),
        )
        server = StdioServer(process)
        try:
            server.call(1, "initialize", {"cwd": str(workspace), "provider": "deepseek-official", "model": "m"})
            prompt = {"sessionId": "s-tools", "contentBlocks": [{"type": "text", "text": "say hi"}]}
            assert "result" in server.call(2, "session/prompt", prompt)
            assert server.call(3, "session/wait", {"sessionId": "s-tools"})["result"] == {}
            assert server.call(4, "shutdown")["result"] == {}
            assert process.wait(20) == 0
            stderr = process.stderr.read().decode() if process.stderr else ""
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
            for stream in (process.stdin, process.stdout, process.stderr):
                if stream is not None:
                    stream.close()
        requests = model.requests
    assert "sandbox-policy" not in stderr  # a row dshpy follows is not reported as ignored
    events = [n["params"]["event"] for n in server.notifications if n["method"] == "session.event"]
    policy = [
        (e["type"], e["data"]) for e in events if e["type"] in ("permission/preset", "sandbox/mode", "approval/policy")
    ]
    assert policy == [
        ("permission/preset", {"preset": "danger-full-access"}),
        ("sandbox/mode", {"mode": "danger-full-access"}),
        ("approval/policy", {"policy": "ask"}),  # dsh derives it from $DSH_PERMISSION_MODE, unset here
    ]
    assert [e["seq"] for e in events[:3]] == [0, 1, 2]
    [result] = [e for e in events if e["type"] == "tool/result"]
    assert result["data"]["message"]["content"] == [{"type": "text", "text": "hi\n"}]
    # dshpy-runtime speaks the Messages API, as dsh does for the SDK's default provider
    assert requests[1]["messages"][-1] == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_1",
                "content": [{"type": "text", "text": "hi\n"}],
                "is_error": False,
            }
        ],
    }
    assert "bash" in [tool["name"] for tool in requests[0]["tools"]]
