"""Jobs as dsh has them: work a tool started, logged as ``job/registered`` … ``job/settled``.

In dsh every ``bash`` command runs as a job of the session that asked for it. A
foreground call registers the job, waits for it, and the record leaves with the
call's result; a ``run_in_background`` call returns the job id at once and the
model collects the output later (``job_output``), stops it (``job_kill``) or lists
its jobs (``job_list``), and is told when one finishes that it has not collected
(:mod:`dshpy.agent.builtin.job_tools`).

The log keeps the lifecycle, dsh's shapes and order::

    job/registered {jobId, owner, kind, label, startedAt, toolCall?: {callId, rootCallId}}
    job/settled    {…the same, finishedAt, status, cause, producerReported, detail?}

``jobId`` is ``<kind>-<16 hex digits>``; ``owner`` the session id; ``status``
``completed``, ``killed`` or ``failed``; ``cause`` ``producer`` (the work ended by
itself), ``kill`` (someone asked it to stop) or ``teardown`` (the agent closed
under it); ``detail`` for ``bash`` is ``exit code: N`` or ``signal: NAME``, with a
kill's reason after ``; ``. Neither event is model-visible.

The output a job produces is kept in a ring (:data:`RETAIN_BYTES` while it runs,
:data:`SETTLED_RETAIN_BYTES` once it settled and was read); each read returns what
came since the previous one and says when bytes fell out unread. At most
:data:`MAX_ACTIVE_JOBS` run at once per session, dsh's limit.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from dshpy.errors import DshError
from dshpy.log.records import job_registered_data, job_settled_data
from dshpy.log.session import Session

__all__ = [
    "MAX_ACTIVE_JOBS",
    "RETAIN_BYTES",
    "SETTLED_RETAIN_BYTES",
    "Job",
    "JobError",
    "JobRead",
    "JobRegistry",
    "JobStatus",
    "SettleCause",
    "jobs_of",
    "render_delta",
    "status_line",
]

log = logging.getLogger("dshpy.agent.jobs")

JobStatus = Literal["running", "stopping", "completed", "killed", "failed"]
SettleCause = Literal["producer", "kill", "teardown"]
TERMINAL: frozenset[str] = frozenset({"completed", "killed", "failed"})
MAX_ACTIVE_JOBS = 10
RETAIN_BYTES = 256 * 1024
SETTLED_RETAIN_BYTES = 16 * 1024


class JobError(DshError):
    """A job request that cannot be served: an unknown id, too many running jobs, removing a running one."""


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class OutputRing:
    """A job's output chunks (``stdout`` / ``stderr``) by byte offset, keeping only the newest bytes."""

    def __init__(self) -> None:
        self.chunks: list[tuple[int, str, str]] = []  # (offset, channel, text)
        self.total = 0
        self.earliest = 0
        self._held = 0

    def append(self, channel: str, text: str, retain: int) -> None:
        size = len(text.encode())
        if not size:
            return
        self.chunks.append((self.total, channel, text))
        self.total += size
        self._held += size
        self.trim(retain)

    def trim(self, retain: int) -> None:
        while self.chunks and self._held > retain:
            offset, _channel, text = self.chunks.pop(0)
            size = len(text.encode())
            self._held -= size
            self.earliest = offset + size

    def read_from(self, offset: int) -> tuple[list[tuple[str, str]], bool]:
        """The chunks at or after ``offset`` and whether bytes before them were lost unread."""
        return [(channel, text) for start, channel, text in self.chunks if start >= offset], offset < self.earliest


def render_delta(chunks: list[tuple[str, str]], lossy: bool) -> str:
    """stdout in order, then all stderr under one ``[stderr]`` line, then the loss notice (dsh's rendering)."""
    out = "".join(text for channel, text in chunks if channel != "stderr")
    err = "".join(text for channel, text in chunks if channel == "stderr")
    body = out + (("\n" if out and not out.endswith("\n") else "") + f"[stderr]\n{err}" if err else "")
    if not lossy:
        return body
    notice = "[some output was dropped from memory; full output: (unavailable)]"
    separator = "\n" if body and not body.endswith("\n") else ""
    return f"{body}{separator}{notice}"


@dataclass(eq=False)
class Job:
    """One job's record (owned by its registry; read it, do not change it)."""

    id: str
    kind: str
    label: str
    owner: str
    started_at: int
    tool_call: dict[str, str] | None
    cancel: Callable[[str | None], None]
    status: JobStatus = "running"
    detail: str | None = None
    finished_at: int | None = None
    ring: OutputRing = field(default_factory=OutputRing)
    model_cursor: int = 0
    kill_reason: str | None = None
    settle_cause: SettleCause | None = None
    background: bool = False
    """Started to run on after its call returned (its settlement is announced to the model)."""
    announce: bool = True
    """Whether a settlement by itself is announced (the model killing it turns this off)."""
    awaiting: int = 0
    settled: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    def registered_data(self) -> dict[str, Any]:
        return job_registered_data(self.id, self.owner, self.kind, self.label, self.started_at, self.tool_call)

    def view(self) -> dict[str, Any]:
        """What the model may see of the job (dsh's public projection)."""
        view: dict[str, Any] = {"id": self.id, "kind": self.kind, "label": self.label, "status": self.status}
        if self.detail is not None:
            view["detail"] = self.detail
        view["startedAt"] = self.started_at
        if self.finished_at is not None:
            view["finishedAt"] = self.finished_at
        return view


def status_line(view: dict[str, Any]) -> str:
    """``[status: completed, exit code: 0]`` (dsh's status line)."""
    detail = view.get("detail")
    return f"[status: {view['status']}, {detail}]" if detail is not None else f"[status: {view['status']}]"


@dataclass(frozen=True, slots=True)
class JobRead:
    """One consuming read: the output since the previous read, rendered, and the job as it stands."""

    text: str
    job: dict[str, Any]


SettledListener = Callable[[Job, SettleCause, bool], Any]
"""Called after a job settled: the job, why, and whether a waiter was released (it carries the outcome)."""


class JobRegistry:
    """The jobs of one session, in the process that runs its agent."""

    def __init__(
        self,
        session: Session,
        *,
        max_active: int = MAX_ACTIVE_JOBS,
        retain_bytes: int = RETAIN_BYTES,
        settled_retain_bytes: int = SETTLED_RETAIN_BYTES,
    ) -> None:
        self.session = session
        self.max_active = max_active
        self.retain_bytes = retain_bytes
        self.settled_retain_bytes = settled_retain_bytes
        self._jobs: dict[str, Job] = {}
        self._listeners: list[SettledListener] = []
        self._announcer: SettledListener | None = None

    # -- producers ----------------------------------------------------------------

    def start(
        self,
        kind: str,
        label: str,
        *,
        cancel: Callable[[str | None], None],
        tool_call: dict[str, str] | None = None,
        background: bool = False,
    ) -> Job:
        """Register a job (``job/registered``); ``cancel(reason)`` must make the work end soon."""
        if not kind or not label:
            raise JobError("a job needs a non-empty kind and label")
        active = sum(1 for job in self._jobs.values() if not job.terminal)
        if active >= self.max_active:
            raise JobError(
                f"background job limit reached for this owner (limit: {self.max_active}); use job_kill to stop an "
                "unneeded job, wait for it to finish, then retry"
            )
        while (job_id := f"{kind}-{uuid.uuid4().hex[:16]}") in self._jobs:
            pass
        job = Job(job_id, kind, label, self.session.id, _now_ms(), dict(tool_call) if tool_call else None, cancel)
        job.background = background
        self._jobs[job_id] = job
        self._record("job/registered", job.registered_data())
        return job

    def output(self, job: Job, channel: str, text: str) -> None:
        """Add output to a running job's ring (dropped once it settled)."""
        if not job.terminal:
            job.ring.append(channel, text, self.retain_bytes)

    def settle(
        self,
        job: Job,
        status: Literal["completed", "killed", "failed"],
        detail: str | None = None,
        *,
        cause: SettleCause | None = None,
        producer_reported: bool = True,
    ) -> None:
        """Record how the job ended (``job/settled``; the first settlement wins) and wake its waiters."""
        if job.terminal:
            return
        if status == "killed" and job.kill_reason is not None:
            detail = f"{detail}; {job.kill_reason}" if detail is not None else job.kill_reason
        job.status = status
        job.detail = detail
        job.finished_at = _now_ms()
        why: SettleCause = cause or job.settle_cause or "producer"
        self._record(
            "job/settled",
            job_settled_data(
                job.registered_data(),
                finished_at=job.finished_at,
                status=status,
                cause=why,
                producer_reported=producer_reported,
                detail=detail,
            ),
        )
        job.ring.trim(max(self.settled_retain_bytes, job.ring.total - job.model_cursor))
        awaited = job.awaiting > 0
        job.settled.set()
        listeners = [*self._listeners, *([self._announcer] if self._announcer is not None else [])]
        for listener in listeners:
            try:
                listener(job, why, awaited)
            except Exception:
                log.exception("a job settlement listener failed for %s", job.id)

    def _record(self, kind: str, data: dict[str, Any]) -> None:
        try:
            self.session.append(kind, data)
        except Exception as error:  # a closed or read-only session: the job still runs and settles
            log.warning("jobs: could not record %s for session %s: %s", kind, self.session.id, error)

    # -- consumers ----------------------------------------------------------------

    def on_settled(self, listener: SettledListener) -> Callable[[], None]:
        """Call ``listener`` after each settlement; returns the unsubscribe function."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def announce_with(self, listener: SettledListener) -> Callable[[], None]:
        """Make ``listener`` the one that tells the model about settlements (replacing the previous one)."""
        self._announcer = listener

        def undo() -> None:
            if self._announcer is listener:
                self._announcer = None

        return undo

    def get(self, job_id: str) -> Job:
        job = self._jobs.get(job_id)
        if job is None:
            raise JobError(f"unknown job {job_id}")
        return job

    def list(self) -> list[Job]:
        return list(self._jobs.values())

    def read(self, job_id: str) -> JobRead:
        """The output since the previous read (consuming it) and the job's public view."""
        job = self.get(job_id)
        chunks, lossy = job.ring.read_from(job.model_cursor)
        job.model_cursor = job.ring.total
        if job.terminal:
            job.ring.trim(self.settled_retain_bytes)
        return JobRead(render_delta(chunks, lossy), job.view())

    def kill(self, job_id: str, reason: str | None = None) -> Literal["requested", "already-finished"]:
        """Ask a running job to stop (it settles ``killed`` with cause ``kill``)."""
        job = self.get(job_id)
        if job.terminal:
            return "already-finished"
        if reason is not None:
            job.kill_reason = reason
        job.settle_cause = "kill"
        job.status = "stopping"
        job.cancel(reason)
        return "requested"

    async def wait(self, job_id: str, timeout: float) -> Job:
        """Wait until the job settles or ``timeout`` seconds pass (it keeps running then)."""
        if timeout <= 0:
            raise JobError(f"invalid wait timeout: expected a positive number of milliseconds, got {timeout * 1000}")
        job = self.get(job_id)
        if job.terminal:
            return job
        job.awaiting += 1
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(job.settled.wait(), timeout)
        finally:
            job.awaiting -= 1
        return job

    def remove(self, job_id: str) -> None:
        """Forget a settled job (a foreground call's job leaves with its result)."""
        job = self.get(job_id)
        if not job.terminal:
            raise JobError(f"job {job_id} is still {job.status}; kill it and wait for settlement before removing it")
        del self._jobs[job_id]

    async def close(self, timeout: float = 5.0) -> None:
        """Stop every running job (cause ``teardown``) and wait for them to settle."""
        running = [job for job in self._jobs.values() if not job.terminal]
        for job in running:
            job.settle_cause = "teardown"
            job.status = "stopping"
            try:
                job.cancel("owner disposed")
            except Exception as error:
                self.settle(
                    job,
                    "failed",
                    f"cancel threw during teardown; work may be orphaned: {error}",
                    cause="teardown",
                    producer_reported=False,
                )
        for job in running:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(job.settled.wait(), timeout)
        self._jobs.clear()


_REGISTRIES: weakref.WeakKeyDictionary[Session, JobRegistry] = weakref.WeakKeyDictionary()


def jobs_of(session: Session) -> JobRegistry:
    """The job registry of ``session`` in this process (made on first use)."""
    registry = _REGISTRIES.get(session)
    if registry is None:
        registry = _REGISTRIES[session] = JobRegistry(session)
    return registry
