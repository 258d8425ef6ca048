"""``job_output``, ``job_list``, ``job_kill``: the model's hands on its background jobs (dsh's ``tool-jobs``).

* ``job_output {job_id, wait?, timeout_ms?}`` — the output since the previous read
  (stdout, then ``[stderr]`` and stderr), or ``(no new output)``, and a status line
  ``[status: running]`` / ``[status: completed, exit code: 0]``. ``wait: true``
  blocks until the job settles or ``timeout_ms`` (default 30 s, at most 10 min)
  passes; a timed-out wait leaves the job running.
* ``job_list`` — one line per job, ``<id> [<kind>] <status> — <label>``.
* ``job_kill {job_id, reason?}`` — asks a running job to stop (it settles
  ``killed``, the reason joining its detail).

**Completion notices.** A background job that settles by itself, and that no
``job_output`` wait was collecting, is announced to the model: a ``user/message``
with source ``{kind: "tool-jobs", form: "notice", summary}`` queued for the agent's
next step (:func:`deliver_completions`), e.g. ``background job bash-… (bash: make)
finished [status: completed, exit code: 0]. Read its output with job_output.`` Jobs
the model killed and jobs stopped because the agent closed are not announced. dsh
also starts a turn for a notice when the agent is idle; dshpy queues it for the
next turn instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dshpy.log.session import Session

from ..jobs import Job, JobError, JobRegistry, SettleCause, jobs_of, status_line
from ..tools import Tool, ToolContext, ToolOutput
from . import schemas

__all__ = [
    "DEFAULT_WAIT_MS",
    "MAX_WAIT_MS",
    "NOTICE_SOURCE_KIND",
    "completion_notice",
    "deliver_completions",
    "job_tools",
]

DEFAULT_WAIT_MS = 30_000
MAX_WAIT_MS = 600_000
NOTICE_SOURCE_KIND = "tool-jobs"
_SUMMARY_CHARS = 200


def _registry(context: ToolContext | None) -> JobRegistry | None:
    session = context.session if context is not None else None
    return jobs_of(session) if isinstance(session, Session) else None


def _job_error(error: JobError | str) -> ToolOutput:
    return ToolOutput(f"Error: {error}", error={"name": "JobError", "code": "JOB_NOT_FOUND"})


def _no_registry() -> ToolOutput:
    return ToolOutput("Error: background jobs need a session", error={"name": "JobError", "code": "JOBS_UNAVAILABLE"})


def job_tools() -> list[Tool]:
    """The three job tools, over the session's :class:`~dshpy.agent.jobs.JobRegistry`."""

    async def job_output(
        context: ToolContext, job_id: str, wait: bool = False, timeout_ms: float | None = None
    ) -> ToolOutput:
        registry = _registry(context)
        if registry is None:
            return _no_registry()
        if not job_id:
            return ToolOutput('Error: invalid job_id: expected a non-empty string, got ""', error=_INPUT)
        try:
            if wait:
                limit = min(DEFAULT_WAIT_MS if timeout_ms is None else timeout_ms, MAX_WAIT_MS)
                if limit <= 0:
                    text = f"Error: invalid timeout_ms: expected a positive number, got {timeout_ms}"
                    return ToolOutput(text, error=_INPUT)
                await registry.wait(job_id, limit / 1000)
            read = registry.read(job_id)
        except JobError as error:
            return _job_error(error)
        body = read.text or "(no new output)"
        return ToolOutput(f"{body}{'' if body.endswith(chr(10)) else chr(10)}{status_line(read.job)}")

    async def job_list(context: ToolContext) -> ToolOutput:
        registry = _registry(context)
        if registry is None:
            return _no_registry()
        jobs = [job.view() for job in registry.list()]
        if not jobs:
            return ToolOutput("(no background jobs)")
        return ToolOutput("\n".join(f"{j['id']} [{j['kind']}] {j['status']} — {j['label']}" for j in jobs))

    async def job_kill(context: ToolContext, job_id: str, reason: str | None = None) -> ToolOutput:
        registry = _registry(context)
        if registry is None:
            return _no_registry()
        try:
            outcome = registry.kill(job_id, reason)
            view = registry.get(job_id).view()
        except JobError as error:
            return _job_error(error)
        if outcome == "already-finished":
            return ToolOutput(f"job {job_id} had already finished {status_line(view)}")
        registry.get(job_id).announce = False  # the model stopped it: no notice follows
        return ToolOutput(f"requested cancellation of job {job_id}")

    return [
        schemas.dsh_tool(job_output, schemas.JOB_OUTPUT, timeout=MAX_WAIT_MS / 1000 + 30),
        schemas.dsh_tool(job_list, schemas.JOB_LIST),
        schemas.dsh_tool(job_kill, schemas.JOB_KILL),
    ]


_INPUT = {"name": "ToolInputError", "code": "INVALID_TOOL_INPUT"}


def completion_notice(job: Job) -> dict[str, Any]:
    """The ``user/message`` content and source announcing a settled job (dsh's wording)."""
    view = job.view()
    status = status_line(view)
    summary = f"{job.kind} {job.label} {status}"
    if len(summary) > _SUMMARY_CHARS:
        summary = summary[: _SUMMARY_CHARS - 1] + "…"
    return {
        "role": "user",
        "content": [
            {
                "type": "text",
                "text": f"background job {job.id} ({job.kind}: {job.label}) finished {status}. "
                "Read its output with job_output.",
            }
        ],
        "source": {"kind": NOTICE_SOURCE_KIND, "form": "notice", "summary": summary},
    }


def deliver_completions(session: Session, inject: Callable[[dict[str, Any]], Any]) -> Callable[[], None]:
    """Announce each background job of ``session`` that finishes uncollected through ``inject``; returns the undo.

    One deliverer per session: the newest (the session's current agent) replaces an
    older one, so a replaced agent never queues a notice nobody will claim.
    """
    registry = jobs_of(session)

    def settled(job: Job, cause: SettleCause, awaited: bool) -> None:
        # a foreground call carries its outcome in its result; a collected or killed job needs no notice
        if job.background and job.announce and not awaited and cause != "teardown":
            inject(completion_notice(job))

    return registry.announce_with(settled)
