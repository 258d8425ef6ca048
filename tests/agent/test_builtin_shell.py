"""bash as a real subprocess: output and markers, working directory, head+tail cap, timeout kill, the sandbox."""

from __future__ import annotations

import os
import shutil
import sys
import time

import pytest
from builtin_support import Bench, text

from dshpy.agent.permissions import Permissions

pytestmark = pytest.mark.skipif(sys.platform == "win32" or shutil.which("bash") is None, reason="needs bash")
BWRAP = shutil.which("bwrap")


def _bwrap_works() -> bool:
    if BWRAP is None:
        return False
    import subprocess

    argv = [BWRAP, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid", "true"]
    return subprocess.run(argv, check=False, capture_output=True).returncode == 0


needs_bwrap = pytest.mark.skipif(not _bwrap_works(), reason="bubblewrap is not installed or cannot run here")


def unconfined(tmp_path, **options):
    return Bench(tmp_path, Permissions("danger-full-access"), **options)


def test_echo_returns_exactly_its_output(tmp_path):
    outcome = unconfined(tmp_path).call("bash", description="Say hi", command="echo hi")
    assert text(outcome) == "hi\n" and not outcome.is_error
    assert outcome.meta["exitCode"] == 0 and outcome.meta["sandbox"] == {
        "mode": "danger-full-access",
        "confinement": "none",
    }
    assert outcome.meta["cwd"] == str(tmp_path / "ws")  # dsh's bash meta key
    assert text(unconfined(tmp_path).call("bash", command="echo hi")) == "hi\n"  # no description: still runs


def test_stderr_and_exit_code_markers(tmp_path):
    outcome = unconfined(tmp_path).call("bash", description="Fail", command="echo out; echo err >&2; exit 3")
    assert text(outcome) == "out\n[stderr]\nerr\n[exit code: 3]"
    assert not outcome.is_error  # a failing command is an answer, not a tool error (dsh)
    silent = unconfined(tmp_path).call("bash", description="Nothing", command="true")
    assert text(silent) == "(no output)"


def test_workdir_defaults_to_the_workspace_and_resolves_relative_paths(tmp_path):
    bench = unconfined(tmp_path)
    (bench.root / "sub").mkdir()
    assert text(bench.call("bash", description="Where", command="pwd")) == f"{bench.root}\n"
    assert text(bench.call("bash", description="Where", command="pwd", workdir="sub")) == f"{bench.root / 'sub'}\n"
    missing = bench.call("bash", description="Where", command="pwd", workdir="nope")
    assert missing.error["code"] == "FS_NOT_DIRECTORY"


def test_output_is_capped_to_head_and_tail(tmp_path):
    bench = unconfined(tmp_path, max_output=1000)
    outcome = bench.call("bash", description="Count", command="seq 1 20000")
    shown = text(outcome)
    assert shown.startswith("1\n2\n3\n") and shown.rstrip().endswith("19999\n20000")
    assert "bytes of output cut here" in shown and len(shown) < 1200
    full = sum(len(f"{i}\n") for i in range(1, 20001))
    assert outcome.meta["truncatedBytes"] == full - 1000


def test_timeout_kills_the_whole_process_group(tmp_path):
    bench = unconfined(tmp_path)
    pidfile = bench.root / "child.pid"
    started = time.monotonic()
    outcome = bench.call(
        "bash", description="Hang", command=f"sleep 60 & echo $! > {pidfile}; echo started; wait", timeoutMs=500
    )
    elapsed = time.monotonic() - started
    assert elapsed < 10
    assert text(outcome).startswith("started\n") and "[timed out after 500ms]" in text(outcome)
    assert "[killed by signal: SIGKILL]" in text(outcome) and outcome.meta["timedOut"] is True
    child = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"the background child {child} outlived the timeout")


def test_a_background_child_holding_the_output_does_not_hang_the_call(tmp_path):
    started = time.monotonic()
    outcome = unconfined(tmp_path).call("bash", description="Detach", command="sleep 30 & echo done")
    assert text(outcome) == "done\n" and time.monotonic() - started < 10


def test_without_bubblewrap_a_sandboxed_command_is_refused_not_run(tmp_path):
    bench = Bench(tmp_path, Permissions("workspace-write"), bwrap=None)
    marker = bench.root / "ran"
    refused = bench.call("bash", description="Touch", command=f"touch {marker}")
    assert refused.is_error and refused.error == {"name": "SandboxUnavailableError", "code": "SANDBOX_UNAVAILABLE"}
    assert "bubblewrap" in text(refused) and "--allow-unsandboxed-shell" in text(refused)
    assert not marker.exists()
    opted_out = Bench(tmp_path, Permissions("workspace-write", unsandboxed_shell=True), bwrap=None)
    outcome = opted_out.call("bash", description="Touch", command=f"touch {marker} && echo ok")
    assert text(outcome) == "ok\n" and marker.exists() and outcome.meta["sandbox"]["confinement"] == "none"


@needs_bwrap
def test_workspace_write_sandbox_confines_writes_to_the_workspace(tmp_path):
    bench = Bench(tmp_path, Permissions("workspace-write"))
    outside = tmp_path / "outside"  # the host's /tmp: the sandbox has its own
    outside.mkdir()
    outcome = bench.call(
        "bash",
        description="Write thrice",
        command=f"echo in > inside.txt && echo ok; echo out > {outside}/escape.txt; touch /usr/escape",
    )
    assert outcome.meta["sandbox"] == {"mode": "workspace-write", "confinement": "bwrap"}
    shown = text(outcome)
    assert shown.startswith("ok\n[stderr]\n") and "No such file or directory" in shown
    assert "Read-only file system" in shown and shown.endswith("[exit code: 1]")
    assert (bench.root / "inside.txt").read_text() == "in\n"
    assert not (outside / "escape.txt").exists() and not os.path.exists("/usr/escape")
    scratch = bench.call("bash", description="Scratch", command="echo s > /tmp/scratch && cat /tmp/scratch")
    assert text(scratch) == "s\n"


@needs_bwrap
def test_read_only_sandbox_writes_nothing(tmp_path):
    bench = Bench(tmp_path, Permissions("read-only"))
    outcome = bench.call("bash", description="Try", command="cat /etc/hostname >/dev/null && echo read; touch x")
    assert text(outcome).startswith("read\n") and "Read-only file system" in text(outcome)
    assert not (bench.root / "x").exists()
