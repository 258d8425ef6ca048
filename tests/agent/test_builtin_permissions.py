"""Permission outcomes through the agent loop against a scripted model over HTTP: allowed, refused, asked.

Each test runs a real turn: the fake model calls a built-in tool, the agent runs it
under the session's preset, and the logged ``tool/result`` (and what the next
request shows the model) says what happened. Escalations ask an approver and leave
dsh's ``approval/asked`` / ``approval/decided`` pair in the turn.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

import dshpy
from dshpy.agent import Agent
from dshpy.agent.builtin import builtin_tools
from dshpy.agent.permissions import (
    PERMISSION_ENV,
    ApprovalRequest,
    PermissionConfigError,
    Permissions,
    record_permissions,
)
from dshpy.llm import ChatClient, ModelConfig
from dshpy.log.event_text import event_text
from dshpy.projections import TODOS, state_of
from dshpy.testing.fake_model import FakeModelServer, Reply

FIXTURE = (
    Path(__file__).resolve().parents[1]
    / "fixtures/dsh/sessions/plain/--tmp-dshpy-dsh-fixtures-workspace--/tool-turn/session.v4.jsonl"
)


class Run:
    """One turn of an agent with the built-in tools in ``root``, the model scripted to make ``calls``."""

    def __init__(self, root: Path, permissions: Permissions, calls: list[tuple[str, dict[str, Any]]], approver=None):
        self.asked: list[ApprovalRequest] = []

        def answering(request: ApprovalRequest):
            self.asked.append(request)
            return approver(request)

        script = [
            Reply.tool_calls(*((name, json.dumps(args), f"call_{i}") for i, (name, args) in enumerate(calls))),
            Reply.text("Done."),
        ]
        self.session = dshpy.open_store("memory:").create(cwd=str(root))

        async def scenario():
            with FakeModelServer(script) as server:
                config = ModelConfig.from_env(base_url=server.base_url, api_key="k", env={})
                async with ChatClient(config) as client:
                    tools = builtin_tools(permissions=permissions, approver=answering if approver else None)
                    agent = Agent(self.session, client, tools=tools)
                    record_permissions(self.session, permissions)
                    result = await agent.run("go")
                return result, server.requests

        self.result, self.requests = asyncio.run(scenario())

    def types(self) -> list[str]:
        return [e.type for e in self.session.events]

    def results(self) -> list[Any]:
        return [e for e in self.session.events if e.type == "tool/result"]

    def of(self, kind: str) -> list[Any]:
        return [e for e in self.session.events if e.type == kind]

    def shown_to_model(self) -> list[str]:
        return [m["content"] for m in self.requests[1]["messages"] if m["role"] == "tool"]


def escalated_write(path: Path) -> tuple[str, dict[str, Any]]:
    return (
        "write",
        {
            "file_path": str(path),
            "content": "wide\n",
            "sandbox_permissions": "danger-full-access",
            "justification": "The user asked for a file next to the workspace.",
        },
    )


@pytest.fixture
def root(tmp_path):
    (tmp_path / "ws").mkdir()
    return tmp_path / "ws"


def test_session_start_events_are_dshs(root):
    run = Run(root, Permissions("workspace-write"), [("read", {"file_path": "none.txt"})])
    head = [(e.seq, e.type, dict(e.data)) for e in run.session.events[:3]]
    dsh = [json.loads(line) for line in FIXTURE.read_text().splitlines()[1:4]]
    assert head == [(e["seq"], e["type"], e["data"]) for e in dsh]  # permission/preset, sandbox/mode, approval/policy
    assert run.session.events[3].type == "agent/inbox/spliced"  # no resume marker on a fresh session
    assert record_permissions(run.session, Permissions("workspace-write")) == []  # unchanged: nothing written
    changed = record_permissions(run.session, Permissions("danger-full-access"))
    assert [(e.type, dict(e.data)) for e in changed] == [
        ("permission/preset", {"preset": "danger-full-access"}),
        ("sandbox/mode", {"mode": "danger-full-access"}),
        ("approval/policy", {"policy": "never"}),
    ]


def test_allowed_write_inside_the_workspace(root):
    run = Run(root, Permissions("workspace-write"), [("write", {"file_path": "a.txt", "content": "hello\n"})])
    assert (root / "a.txt").read_text() == "hello\n"
    [result] = run.results()
    assert result.data["message"]["isError"] is False and "error" not in result.data
    assert run.shown_to_model()[0].startswith(f"Created {root / 'a.txt'}")
    assert not run.of("approval/asked") and run.result.kind == "completed"


def test_refused_by_the_preset_is_an_error_result_the_model_sees(root):
    run = Run(root, Permissions("read-only"), [("write", {"file_path": "a.txt", "content": "x"})])
    [result] = run.results()
    assert result.data["error"] == {"name": "FsError", "code": "FS_SANDBOX_DENIED"}
    assert result.data["message"]["isError"] is True
    assert "[sandbox: file access denied under read-only mode]" in run.shown_to_model()[0]
    assert not (root / "a.txt").exists() and not run.of("approval/asked")
    assert run.result.kind == "completed"  # the turn goes on: the model reads the refusal


def test_asked_and_approved(root):
    target = root.parent / "outside.txt"
    run = Run(root, Permissions("workspace-write"), [escalated_write(target)], approver=lambda r: "allowed-once")
    assert target.read_text() == "wide\n"
    [asked], [decided] = run.of("approval/asked"), run.of("approval/decided")
    assert dict(asked.data) == {
        "id": asked.data["id"],
        "toolName": "write",
        "callId": "call_0",
        "reason": "The user asked for a file next to the workspace.",
    }
    assert dict(decided.data) == {"id": asked.data["id"], "outcome": "allowed-once"}
    [request] = run.asked
    assert (request.mode, request.detail, request.call_id) == ("danger-full-access", str(target), "call_0")
    call_seq = run.of("tool/call")[0].seq
    assert call_seq < asked.seq < decided.seq < run.results()[0].seq  # the pair sits inside the call
    assert run.results()[0].data["message"]["isError"] is False


def test_asked_and_denied(root):
    target = root.parent / "outside.txt"
    run = Run(root, Permissions("workspace-write"), [escalated_write(target)], approver=lambda r: "rejected")
    assert not target.exists()
    assert [e.data["outcome"] for e in run.of("approval/decided")] == ["rejected"]
    [result] = run.results()
    assert result.data["error"] == {"name": "ToolDeniedError", "code": "TOOL_DENIED"}
    assert run.shown_to_model() == ['Error: the user rejected tool "write"']


def test_nobody_to_ask_fails_closed(root):
    target = root.parent / "outside.txt"
    run = Run(root, Permissions("workspace-write"), [escalated_write(target)])
    assert not target.exists()
    assert [e.data["outcome"] for e in run.of("approval/decided")] == ["unavailable"]
    assert "no approval channel is available" in run.shown_to_model()[0]


def test_policy_never_rejects_without_asking(root):
    target = root.parent / "outside.txt"
    run = Run(
        root, Permissions("workspace-write", "never"), [escalated_write(target)], approver=lambda r: "allowed-once"
    )
    assert not target.exists() and run.asked == []  # the approver was never consulted
    assert [e.data["outcome"] for e in run.of("approval/decided")] == ["rejected"]
    assert 'policy "never"' in run.shown_to_model()[0]
    refused = Run(root, Permissions("read-only", "never"), [("write", {"file_path": "a.txt", "content": "x"})])
    assert "escalation" not in refused.shown_to_model()[0]  # no hint when nobody may be asked


def test_escalation_needs_a_justification_and_a_wider_mode(root):
    target = root.parent / "outside.txt"
    name, args = escalated_write(target)
    args.pop("justification")
    narrow = {"file_path": "a.txt", "content": "x", "sandbox_permissions": "workspace-write", "justification": "j"}
    run = Run(
        root, Permissions("workspace-write"), [(name, args), ("write", narrow)], approver=lambda r: "allowed-once"
    )
    shown = run.shown_to_model()
    assert "needs a justification" in shown[0] and "is not wider than the current workspace-write mode" in shown[1]
    assert not run.of("approval/asked") and not target.exists()


def test_todo_write_logs_the_list(root):
    todos = [{"content": "Read the code", "status": "completed"}, {"content": "Fix it", "status": "in_progress"}]
    run = Run(root, Permissions(), [("todo_write", {"todos": todos})])
    [written] = run.of("todo/write")
    assert json.loads(json.dumps(written.data)) == {"todos": todos}
    assert run.of("tool/call")[0].seq < written.seq < run.results()[0].seq
    state = state_of(run.session, TODOS)
    assert [(t.content, t.status) for t in state.todos] == [("Read the code", "completed"), ("Fix it", "in_progress")]
    assert "[x] Read the code" in run.shown_to_model()[0] and "in_progress" in event_text(written)


def test_preset_from_dshs_environment_variable():
    assert Permissions.resolve(env={}).preset == "workspace-write"
    danger = Permissions.resolve(env={PERMISSION_ENV: "danger-full-access"})
    assert (danger.preset, danger.policy) == ("danger-full-access", "never")
    assert Permissions.resolve("read-only", env={PERMISSION_ENV: "danger-full-access"}).preset == "read-only"
    with pytest.raises(PermissionConfigError, match=r"DSH_PERMISSION_MODE.*'full'.*read-only, workspace-write"):
        Permissions.resolve(env={PERMISSION_ENV: "full"})
    with pytest.raises(PermissionConfigError, match=r"approval policy.*'auto'.*ask, never"):
        Permissions.resolve(approval="auto", env={})
