"""bash as dsh's jobs: job/registered … job/settled around every command, run_in_background and the job tools.

Real subprocesses in a real session; background work runs on the test's own event loop.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from builtin_support import Bench, text

import dshpy
from dshpy.agent import Agent, ToolContext, ToolOutcome
from dshpy.agent.builtin import builtin_tools
from dshpy.agent.builtin.job_tools import deliver_completions
from dshpy.agent.jobs import JobError, JobRegistry, jobs_of
from dshpy.agent.permissions import Permissions
from dshpy.llm import AnthropicClient, ModelConfig
from dshpy.testing.fake_model import FakeModelServer, Reply

pytestmark = pytest.mark.skipif(sys.platform == "win32" or shutil.which("bash") is None, reason="needs bash")

DSH_SCENARIO_JOBS = Path(__file__).parents[1] / "fixtures" / "sdk_notifications" / "dsh-0.2.1rc2.json"


def unconfined(tmp_path: Path) -> Bench:
    return Bench(tmp_path, Permissions("danger-full-access"))


class Calls:
    """Call the built-in tools as the agent would, all on one event loop (background jobs outlive a call)."""

    def __init__(self, bench: Bench) -> None:
        self.bench = bench
        self.count = 0

    async def __call__(self, name: str, **arguments: Any) -> ToolOutcome:
        self.count += 1
        context = ToolContext(None, self.bench.session, f"call-{self.count}", 1, 1)
        return await self.bench.tools[name].invoke(json.dumps(arguments), context, timeout=60)


def data_of(bench: Bench, kind: str) -> list[dict[str, Any]]:
    return [dshpy.thaw(event.data) for event in bench.events(kind)]


def test_a_foreground_command_runs_as_a_job_settled_before_its_result(tmp_path):
    bench = unconfined(tmp_path)
    outcome = bench.call("bash", description="Fail", command="echo out; exit 3")
    assert text(outcome) == "out\n[exit code: 3]"
    registered, settled = data_of(bench, "job/registered"), data_of(bench, "job/settled")
    assert len(registered) == len(settled) == 1
    job_id = registered[0]["jobId"]
    assert job_id.startswith("bash-") and len(job_id) == len("bash-") + 16
    assert registered[0] == {
        "jobId": job_id,
        "owner": bench.session.id,
        "kind": "bash",
        "label": "echo out; exit 3",
        "startedAt": registered[0]["startedAt"],
        "toolCall": {"callId": "call-1", "rootCallId": "call-1"},
    }
    assert list(settled[0]) == [*registered[0], "finishedAt", "status", "cause", "producerReported", "detail"]
    assert settled[0]["startedAt"] <= settled[0]["finishedAt"]
    outcome_fields = (settled[0]["status"], settled[0]["cause"], settled[0]["detail"])
    assert outcome_fields == ("completed", "producer", "exit code: 3")
    assert settled[0]["producerReported"] is True
    assert jobs_of(bench.session).list() == []  # a foreground job leaves with its result


def test_a_timed_out_command_settles_killed_with_the_reason(tmp_path):
    bench = unconfined(tmp_path)
    outcome = bench.call("bash", description="Hang", command="sleep 30", timeoutMs=200)
    assert text(outcome).endswith("[timed out after 200ms]\n[killed by signal: SIGKILL]")
    (settled,) = data_of(bench, "job/settled")
    assert (settled["status"], settled["detail"]) == ("killed", "signal: SIGKILL; timed out after 200ms")


def test_a_refused_command_starts_no_job(tmp_path):
    bench = Bench(tmp_path, Permissions("workspace-write"), bwrap=None)  # no sandbox, no opt-out: refused
    assert bench.call("bash", description="Touch", command="touch x").is_error
    assert bench.events("job/registered") == [] and bench.events("job/settled") == []


def test_run_in_background_returns_at_once_and_job_output_collects_it(tmp_path):
    bench = unconfined(tmp_path)
    call = Calls(bench)
    gate = tmp_path / "gate"

    async def scenario() -> None:
        started = await call(
            "bash",
            description="Work",
            command=f"echo first; echo oops >&2; while [ ! -e {gate} ]; do sleep 0.02; done; echo last",
            run_in_background=True,
        )
        assert not started.is_error and started.meta == {"cwd": str(bench.root)}
        job_id = text(started).removeprefix("started background job ")
        assert job_id.startswith("bash-")
        assert data_of(bench, "job/settled") == []  # still running after the call returned
        listed = text(await call("job_list"))
        assert listed == f"{job_id} [bash] running — {data_of(bench, 'job/registered')[0]['label']}"
        running = text(await call("job_output", job_id=job_id, wait=True, timeout_ms=100))  # times out: running
        assert running.endswith("[status: running]")
        gate.touch()
        done = text(await call("job_output", job_id=job_id, wait=True, timeout_ms=10_000))
        seen = running + done
        assert "first\n" in seen and "[stderr]\noops\n" in seen and "last\n" in done
        assert done.endswith("[status: completed, exit code: 0]")
        again = text(await call("job_output", job_id=job_id))
        assert again == "(no new output)\n[status: completed, exit code: 0]"
        unknown = await call("job_output", job_id="bash-0000000000000000")
        assert unknown.is_error and text(unknown) == "Error: unknown job bash-0000000000000000"
        assert unknown.error == {"name": "JobError", "code": "JOB_NOT_FOUND"}

    asyncio.run(scenario())
    (settled,) = data_of(bench, "job/settled")
    assert (settled["status"], settled["cause"], settled["detail"]) == ("completed", "producer", "exit code: 0")


def test_job_kill_stops_a_background_job_and_says_when_it_had_finished(tmp_path):
    bench = unconfined(tmp_path)
    call = Calls(bench)

    async def scenario() -> str:
        started = await call("bash", description="Sleep", command="sleep 30", run_in_background=True)
        job_id = text(started).removeprefix("started background job ")
        assert text(await call("job_kill", job_id=job_id, reason="not needed")) == (
            f"requested cancellation of job {job_id}"
        )
        await jobs_of(bench.session).wait(job_id, 10)
        finished = text(await call("job_kill", job_id=job_id))
        assert finished == f"job {job_id} had already finished [status: killed, signal: SIGKILL; not needed]"
        return job_id

    job_id = asyncio.run(scenario())
    (settled,) = data_of(bench, "job/settled")
    assert settled["jobId"] == job_id
    assert (settled["status"], settled["cause"], settled["detail"]) == ("killed", "kill", "signal: SIGKILL; not needed")


def test_the_registry_caps_running_jobs_and_keeps_only_recent_output(tmp_path):
    session = dshpy.open_store("memory:").create()
    registry = JobRegistry(session, max_active=1, retain_bytes=10)
    job = registry.start("bash", "a", cancel=lambda _reason: None)
    with pytest.raises(JobError, match="background job limit reached"):
        registry.start("bash", "b", cancel=lambda _reason: None)
    registry.output(job, "stdout", "0123456789")
    registry.output(job, "stdout", "abcdef")
    read = registry.read(job.id)  # the first chunk fell out of the ring unread
    assert read.text == "abcdef\n[some output was dropped from memory; full output: (unavailable)]"
    registry.settle(job, "failed", "it broke")
    registry.output(job, "stdout", "late")  # after settlement: dropped
    assert registry.read(job.id).text == ""
    with pytest.raises(JobError, match="still running"):
        registry.remove(registry.start("bash", "c", cancel=lambda _reason: None).id)
    assert [e.type for e in session.events] == ["job/registered", "job/settled", "job/registered"]
    assert dshpy.thaw(session.events[1].data)["detail"] == "it broke"


def test_a_job_that_finishes_uncollected_is_announced_and_the_agent_stops_the_rest(tmp_path):
    (tmp_path / "ws").mkdir()
    session = dshpy.open_store("memory:").create(cwd=str(tmp_path / "ws"))
    gate = tmp_path / "gate"  # the quick job finishes once turn 1 is over, so its notice waits for turn 2
    command = f"while [ ! -e {gate} ]; do sleep 0.02; done; echo built"
    quick = json.dumps({"description": "Quick", "command": command, "run_in_background": True})
    slow = json.dumps({"description": "Slow", "command": "sleep 30", "run_in_background": True})
    script = [
        Reply.tool_calls(("bash", quick, "toolu_1"), ("bash", slow, "toolu_2")),
        Reply.text("Started both."),
        Reply.text("Saw the notice."),
    ]

    async def scenario() -> None:
        with FakeModelServer(script) as server:
            config = ModelConfig.from_env(base_url=server.base_url, api_key="k", provider="deepseek-official", env={})
            async with AnthropicClient(config) as client:
                tools = builtin_tools("bash,job_output", permissions=Permissions("danger-full-access"))
                async with Agent(session, client, tools=tools) as agent:
                    await agent.run("Build it.")
                    registry = jobs_of(session)
                    quick_job = next(j for j in registry.list() if j.label == command)
                    gate.touch()
                    await asyncio.wait_for(quick_job.settled.wait(), 10)  # watch, not collect (a wait would)
                    await agent.run("Anything new?")
                    notices = [
                        m for m in server.requests[2]["messages"] for b in m["content"] if "background job" in str(b)
                    ]
                    assert notices, "the notice reached the model"

    asyncio.run(scenario())
    notes = [e for e in session.events if e.type == "user/message" and e.data["source"]["kind"] == "tool-jobs"]
    assert len(notes) == 1
    note = dshpy.thaw(notes[0].data)
    job_id = dshpy.thaw(session.events[[e.type for e in session.events].index("job/registered")].data)["jobId"]
    assert note["content"] == [
        {
            "type": "text",
            "text": f"background job {job_id} (bash: {command}) finished [status: completed, exit code: 0]. "
            "Read its output with job_output.",
        }
    ]
    assert note["source"] == {
        "kind": "tool-jobs",
        "form": "notice",
        "summary": f"bash {command} [status: completed, exit code: 0]",
    }
    kinds = [f"{e.type}:{e.data['source']['kind']}" if e.type == "user/message" else e.type for e in session.events]
    assert kinds[kinds.index("job/settled") :] == [
        "job/settled",  # after turn 1: the quick job, uncollected
        "agent/inbox/spliced",  # its notice, queued for the next step
        "agent/inbox/spliced",
        "turn/start",
        "agent/inbox/spliced",
        "agent/inbox/spliced",  # turn 2's first step claims it after the prompt
        "step/start",
        "user/message:user",
        "user/message:tool-jobs",
        "assistant/message",
        "step/end",
        "turn/end",
        "job/settled",  # the slow job, stopped when the agent closed
    ]
    settled = [dshpy.thaw(e.data) for e in session.events if e.type == "job/settled"]
    assert [(s["label"], s["status"], s["cause"]) for s in settled] == [
        (command, "completed", "producer"),
        ("sleep 30", "killed", "teardown"),  # closing the agent stopped it; not announced
    ]
    assert json.loads(DSH_SCENARIO_JOBS.read_text())["runs"][1].count("job/settled") == 1  # dsh settles bash too


def test_only_the_sessions_newest_agent_is_told_and_not_about_killed_or_foreground_jobs():
    session = dshpy.open_store("memory:").create()
    registry = jobs_of(session)
    old: list[dict[str, Any]] = []
    new: list[dict[str, Any]] = []
    deliver_completions(session, old.append)
    undo = deliver_completions(session, new.append)  # a new agent (the model changed): it alone gets notices
    tool_call = {"callId": "c1", "rootCallId": "c1"}
    background = registry.start("bash", "make", cancel=lambda _r: None, tool_call=tool_call, background=True)
    registry.settle(background, "completed", "exit code: 0")
    foreground = registry.start("bash", "ls", cancel=lambda _r: None, tool_call=tool_call)
    registry.settle(foreground, "completed", "exit code: 0")
    killed = registry.start("bash", "sleep 9", cancel=lambda _r: None, tool_call=tool_call, background=True)
    killed.announce = False  # what job_kill does
    registry.settle(killed, "killed", "signal: SIGKILL")
    assert old == [] and [n["source"]["summary"] for n in new] == ["bash make [status: completed, exit code: 0]"]
    undo()
    again = registry.start("bash", "make", cancel=lambda _r: None, tool_call=tool_call, background=True)
    registry.settle(again, "completed", "exit code: 0")
    assert len(new) == 1


def test_at_the_job_limit_a_foreground_command_still_runs_and_a_background_one_is_refused(tmp_path):
    bench = unconfined(tmp_path)
    registry = jobs_of(bench.session)
    for n in range(registry.max_active):
        registry.start("bash", f"busy {n}", cancel=lambda _r: None, background=True)
    assert text(bench.call("bash", description="Say", command="echo still")) == "still\n"
    assert len(bench.events("job/registered")) == registry.max_active  # it ran without a job, as dsh does
    refused = bench.call("bash", description="More", command="sleep 1", run_in_background=True)
    assert refused.is_error and refused.error == {"name": "JobError", "code": "JOB_LIMIT"}
    assert "background job limit reached for this owner (limit: 10)" in text(refused)


def test_without_the_job_tools_bash_offers_no_background_and_refuses_one(tmp_path):
    bench = Bench(tmp_path, Permissions("danger-full-access"), tools="bash")
    assert "run_in_background" not in bench.tools["bash"].schema()["parameters"]["properties"]
    refused = bench.call("bash", description="Bg", command="echo x", run_in_background=True)
    assert refused.is_error and refused.error == {"name": "FsError", "code": "JOBS_UNAVAILABLE"}
    assert "no job tools to collect it" in text(refused)
    assert bench.events("job/registered") == []
