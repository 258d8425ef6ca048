"""``bash``: one command in a fresh ``bash -c``, confined by the session's sandbox, timed and capped.

**Sandbox.** Under ``read-only`` and ``workspace-write`` the command runs inside
bubblewrap (``bwrap``): the whole filesystem is mounted read-only with a private,
empty ``/tmp``, and under ``workspace-write`` the workspace is mounted writable
again, so a write elsewhere fails (``Read-only file system``, or no such directory
under the host's ``/tmp``, which the command does not see). Without ``bwrap`` on ``PATH``
such a command is refused — never run unconfined behind the user's back — unless
the user opted out (``Permissions.unsandboxed_shell``); under ``ask`` the model may
retry with ``sandbox_permissions: danger-full-access``, which asks the user.
``danger-full-access`` runs commands unconfined.

**Time.** ``timeoutMs`` (default :data:`DEFAULT_TIMEOUT_MS`, capped at the
configured maximum) bounds a command; at expiry its whole process group is killed
and the result ends ``[timed out after Nms]``. A command that leaves a background
child holding its output open is given a moment after it exits, then that
straggler is killed too.

**Jobs** (:mod:`dshpy.agent.jobs`). As in dsh, every command runs as a job of the
session: ``job/registered`` when it starts, ``job/settled`` when it ends (``exit
code: N`` or ``signal: NAME``), both before the call's ``tool/result``.
``run_in_background: true`` (offered when the job tools are in the tool set)
returns ``started background job <id>`` at once, with no timeout; the command's
output is read with ``job_output``, it is stopped with ``job_kill``, and when it
finishes the model is told in the session (:mod:`dshpy.agent.builtin.job_tools`).

**Output.** stdout, then ``[stderr]`` and stderr, then dsh's status markers
(``[exit code: N]``, ``[killed by signal: NAME]``): a non-zero exit is the
command's answer, not a tool error. Each stream keeps at most ``max_output``
bytes — its head and its tail, with a marker saying how much was cut between
them — however much the command prints.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import logging
import os
import shutil
import signal
import time
from typing import Literal

from dshpy.log.session import Session

from ..jobs import Job, JobError, JobRegistry, jobs_of
from ..tools import Tool, ToolContext, ToolOutput
from . import schemas
from .workspace import Grant, Workspace, fs_error

__all__ = ["DEFAULT_MAX_OUTPUT", "DEFAULT_TIMEOUT_MS", "MAX_TIMEOUT_MS", "CappedOutput", "bwrap_argv", "shell_tool"]

log = logging.getLogger("dshpy.agent.builtin.shell")

DEFAULT_TIMEOUT_MS = 60_000
"""dsh's bash default (its ``bash-sandbox`` row)."""
MAX_TIMEOUT_MS = 600_000
DEFAULT_MAX_OUTPUT = 30_000
_DRAIN_SECONDS = 1.0

Mode = Literal["workspace-write", "danger-full-access"]


class CappedOutput:
    """A stream's bytes, keeping the first and last ``limit / 2`` bytes and counting what fell between."""

    def __init__(self, limit: int) -> None:
        self.head_limit = limit // 2
        self.tail_limit = limit - self.head_limit
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def add(self, data: bytes) -> None:
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if not data:
            return
        self.tail += data
        excess = len(self.tail) - self.tail_limit
        if excess > 0:
            self.dropped += excess
            del self.tail[:excess]

    def text(self) -> str:
        head = self.head.decode("utf-8", "replace")
        tail = self.tail.decode("utf-8", "replace")
        if not self.dropped:
            return head + tail
        return f"{head}\n[... {self.dropped} bytes of output cut here; narrow the command to see them ...]\n{tail}"


def bwrap_argv(bwrap: str, mode: str, workspace: str, workdir: str) -> list[str]:
    """The bubblewrap prefix confining a command to ``mode``.

    Everything is mounted read-only, ``/tmp`` is a fresh private tmpfs (scratch space
    that never reaches the host's ``/tmp``), then the workspace is mounted again —
    writable under ``workspace-write`` — and so is a working directory outside it
    (read-only), so both stay visible even when they live under ``/tmp``.
    """
    argv = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    argv += ["--unshare-pid", "--die-with-parent"]
    argv += ["--bind" if mode == "workspace-write" else "--ro-bind", workspace, workspace]
    if os.path.commonpath([workdir, workspace]) != workspace:
        argv += ["--ro-bind", workdir, workdir]
    return [*argv, "--chdir", workdir, "--"]


async def _pump(stream: asyncio.StreamReader, sink: CappedOutput) -> None:
    while chunk := await stream.read(65536):
        sink.add(chunk)


def _kill_group(process: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


async def _exited(process: asyncio.subprocess.Process, seconds: float) -> bool:
    """Whether the shell exits within ``seconds``.

    Polls ``returncode`` (set when the process exits) rather than awaiting
    ``wait()``, which also waits for the pipes to close: a background child holding
    them would otherwise keep the call waiting as long as it lives.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    pause = 0.001
    while process.returncode is None:
        left = deadline - loop.time()
        if left <= 0:
            return False
        await asyncio.sleep(min(pause, left))
        pause = min(pause * 2, 0.05)
    return True


def _render(stdout: str, stderr: str, markers: list[str]) -> str:
    body = stdout
    if stderr:
        if body and not body.endswith("\n"):
            body += "\n"
        body += f"[stderr]\n{stderr}"
    if not body:
        body = "(no output)"
    if not markers:
        return body
    if not body.endswith("\n"):
        body += "\n"
    return body + "\n".join(markers)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


def shell_tool(
    workspace: Workspace,
    *,
    bwrap: str | bool | None = True,
    max_output: int = DEFAULT_MAX_OUTPUT,
    max_timeout_ms: int = MAX_TIMEOUT_MS,
    shell: str = "bash",
    background: bool = True,
) -> Tool:
    """``bash`` in ``workspace``; ``bwrap``: True finds bubblewrap on PATH, a path uses it, None never confines.

    ``background``: advertise ``run_in_background`` — only with the job tools beside it
    (dsh's rule: a job the model cannot collect is not offered).
    """
    confiner = shutil.which("bwrap") if bwrap is True else (bwrap or None)

    async def bash(
        context: ToolContext,
        command: str,
        description: str = "",  # advertised as required (dsh's schema); a call without one still runs
        timeoutMs: float | None = None,
        workdir: str | None = None,
        run_in_background: bool = False,
        sandbox_permissions: Mode | None = None,
        justification: str | None = None,
    ) -> ToolOutput:
        if not command.strip():
            return fs_error("bash: the command is empty", "FS_INVALID_ARGUMENT", "ToolInputError")
        timeout_ms = int(DEFAULT_TIMEOUT_MS if timeoutMs is None else timeoutMs)
        if timeout_ms <= 0:
            return fs_error("bash: timeoutMs must be positive", "FS_INVALID_ARGUMENT", "ToolInputError")
        timeout_ms = min(timeout_ms, max_timeout_ms)
        root = workspace.cwd(context)
        cwd = workspace.resolve(context, workdir) if workdir else root
        if not os.path.isdir(cwd):
            return fs_error(f'bash: workdir "{cwd}" is not a directory', "FS_NOT_DIRECTORY")
        grant = await workspace.gate(
            context,
            tool="bash",
            path=None,
            detail=command,
            refused="",
            sandbox_permissions=sandbox_permissions,
            justification=justification,
            subject="command",
        )
        if not isinstance(grant, Grant):
            return grant
        argv = [shell, "-c", command]
        sandbox = "none"
        if grant.mode != "danger-full-access":
            if confiner is not None:
                argv = [*bwrap_argv(confiner, grant.mode, root, cwd), *argv]
                sandbox = "bwrap"
            elif not workspace.permissions.unsandboxed_shell:
                text = workspace.refusal(
                    "bash",
                    f"the {grant.mode} sandbox needs bubblewrap (bwrap), which is not installed, so the command was "
                    "not run. Install bubblewrap, or the user can opt out with --allow-unsandboxed-shell "
                    "(DSHPY_ALLOW_UNSANDBOXED_SHELL=1).",
                    grant.mode,
                    "command",
                )
                return ToolOutput(
                    f"Error: {text}", error={"name": "SandboxUnavailableError", "code": "SANDBOX_UNAVAILABLE"}
                )
        registry = jobs_of(context.session) if context is not None and isinstance(context.session, Session) else None
        job = _Launch(registry, command, context.call_id if context is not None else None)
        if run_in_background:
            if not background or registry is None:
                why = "no job tools to collect it" if not background else "no session to own the job"
                return fs_error(f"bash: run_in_background is not available here ({why})", "JOBS_UNAVAILABLE")
            return await _background(argv, cwd, job)
        return await _run(argv, cwd, timeout_ms, max_output, grant.mode, sandbox, job)

    schema = schemas.BASH if background else schemas.without(schemas.BASH, "run_in_background")
    return schemas.dsh_tool(bash, schema, timeout=max_timeout_ms / 1000 + 30)


class _Launch:
    """The job a command runs as (none without a session): registered just before the process starts."""

    def __init__(self, registry: JobRegistry | None, command: str, call_id: str | None) -> None:
        self.registry = registry
        self.command = command
        self.call_id = call_id
        self.job: Job | None = None
        self.process: asyncio.subprocess.Process | None = None

    def register(self, *, background: bool = False) -> Job | None:
        if self.registry is None:
            return None
        tool_call = None if self.call_id is None else {"callId": self.call_id, "rootCallId": self.call_id}
        self.job = self.registry.start(
            "bash", self.command, cancel=self._cancel, tool_call=tool_call, background=background
        )
        return self.job

    def _cancel(self, _reason: str | None) -> None:
        if self.process is not None:
            _kill_group(self.process)

    def settle(self, code: int | None, *, failed: str | None = None) -> None:
        """Settle the job from the shell's exit: ``exit code: N``, ``signal: NAME`` or a failure to start."""
        registry, job = self.registry, self.job
        if registry is None or job is None:
            return
        if failed is not None:
            registry.settle(job, "failed", failed)
        elif code is not None and code < 0:
            registry.settle(job, "killed", f"signal: {_signal_name(-code)}")
        else:
            registry.settle(job, "completed", f"exit code: {code or 0}")

    def forget(self) -> None:
        """A foreground call's job leaves with its result."""
        if self.registry is not None and self.job is not None and self.job.terminal:
            self.registry.remove(self.job.id)


async def _spawn(argv: list[str], cwd: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        *argv,
        cwd=cwd,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )


_BACKGROUND: set[asyncio.Task[None]] = set()
"""Running background pumps (held so they are not collected mid-run)."""


async def _background(argv: list[str], cwd: str, launch: _Launch) -> ToolOutput:
    try:
        job = launch.register(background=True)
    except JobError as error:
        return ToolOutput(f"Error: {error}", error={"name": "JobError", "code": "JOB_LIMIT"})
    assert job is not None and launch.registry is not None
    try:
        process = await _spawn(argv, cwd)
    except OSError as error:
        reason = f"bash: cannot start {argv[0]}: {error.strerror or error}"
        launch.settle(None, failed=reason)
        return fs_error(reason, "SPAWN_FAILED", "SpawnError")
    launch.process = process
    if job.status == "stopping":  # killed (or torn down) before the process existed
        _kill_group(process)
    task = asyncio.ensure_future(_pump_job(process, launch))
    _BACKGROUND.add(task)
    task.add_done_callback(_BACKGROUND.discard)
    return ToolOutput(f"started background job {job.id}", meta={"cwd": cwd})


async def _feed(stream: asyncio.StreamReader, launch: _Launch, channel: str) -> None:
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    assert launch.registry is not None and launch.job is not None
    while chunk := await stream.read(65536):
        launch.registry.output(launch.job, channel, decoder.decode(chunk))
    launch.registry.output(launch.job, channel, decoder.decode(b"", final=True))


async def _pump_job(process: asyncio.subprocess.Process, launch: _Launch) -> None:
    """A background command's life: its output into the job's ring, then its settlement."""
    assert process.stdout is not None and process.stderr is not None
    readers = asyncio.gather(_feed(process.stdout, launch, "stdout"), _feed(process.stderr, launch, "stderr"))
    try:
        await process.wait()
        try:
            await asyncio.wait_for(asyncio.shield(readers), _DRAIN_SECONDS)
        except TimeoutError:  # a grandchild still holds the output open
            _kill_group(process)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(readers), _DRAIN_SECONDS)
            readers.cancel()
    except BaseException:  # the event loop is shutting down under the job
        if launch.job is not None and launch.job.settle_cause is None:
            launch.job.settle_cause = "teardown"
        _kill_group(process)
        readers.cancel()
        with contextlib.suppress(BaseException):
            await readers
        with contextlib.suppress(BaseException):
            await process.wait()
        launch.settle(process.returncode if process.returncode is not None else -signal.SIGKILL)
        raise
    launch.settle(process.returncode)


async def _run(
    argv: list[str], cwd: str, timeout_ms: int, max_output: int, mode: str, sandbox: str, launch: _Launch
) -> ToolOutput:
    started = time.monotonic()
    try:
        job = launch.register()
    except JobError as error:  # dsh too runs the command anyway, only not as a job
        log.warning("bash: job registration refused, running in the foreground without a job: %s", error)
        job = None
    try:
        process = await _spawn(argv, cwd)
    except OSError as error:
        reason = f"bash: cannot start {argv[0]}: {error.strerror or error}"
        launch.settle(None, failed=reason)
        launch.forget()
        return fs_error(reason, "SPAWN_FAILED", "SpawnError")
    launch.process = process
    assert process.stdout is not None and process.stderr is not None
    out, err = CappedOutput(max_output), CappedOutput(max_output)
    readers = asyncio.gather(_pump(process.stdout, out), _pump(process.stderr, err))
    timed_out = False
    try:
        timed_out = not await _exited(process, timeout_ms / 1000)
        if timed_out:
            _kill_group(process)
        try:
            await asyncio.wait_for(asyncio.shield(readers), _DRAIN_SECONDS)
        except TimeoutError:  # a background child still holds the output open
            _kill_group(process)
            await asyncio.wait_for(asyncio.shield(readers), _DRAIN_SECONDS)
        await process.wait()
    except BaseException:
        _kill_group(process)
        readers.cancel()
        with contextlib.suppress(BaseException):
            await readers
        if job is not None and not job.terminal:  # the call was cancelled: the job was stopped on its account
            job.kill_reason, job.settle_cause = "tool call aborted", "kill"
            launch.settle(-signal.SIGKILL)
            launch.forget()
        raise
    code = process.returncode
    if timed_out and job is not None:
        job.kill_reason = f"timed out after {timeout_ms}ms"
    launch.settle(code)
    launch.forget()
    markers = []
    if timed_out:
        markers.append(f"[timed out after {timeout_ms}ms]")
    if code is not None and code < 0:
        markers.append(f"[killed by signal: {_signal_name(-code)}]")
    elif code:
        markers.append(f"[exit code: {code}]")
    meta = {
        "cwd": cwd,  # dsh's bash meta
        "exitCode": code,
        "timedOut": timed_out,
        "durationMs": round((time.monotonic() - started) * 1000),
        "sandbox": {"mode": mode, "confinement": sandbox},
        "truncatedBytes": out.dropped + err.dropped,
    }
    return ToolOutput(_render(out.text(), err.text(), markers), meta=meta)
