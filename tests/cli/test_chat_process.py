"""``dshpy chat`` as a real process on a pipe: Ctrl-C (SIGINT) cancels the running answer, not the REPL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

import dshpy
from dshpy.testing.fake_model import FakeModelServer, Reply

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


class Output:
    """Collects a pipe's bytes in a thread, so the test can wait for text to appear."""

    def __init__(self, stream) -> None:
        self.data = b""
        self._stream = stream
        self._thread = threading.Thread(target=self._pump, daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        while chunk := os.read(self._stream.fileno(), 4096):
            self.data += chunk

    def wait_for(self, text: str, *, count: int = 1, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while self.data.decode(errors="replace").count(text) < count:
            assert time.monotonic() < deadline, f"never saw {text!r} x{count} in {self.data!r}"
            time.sleep(0.01)

    def text(self) -> str:
        self._thread.join(10)
        self._stream.close()
        return self.data.decode()


def test_ctrl_c_cancels_the_turn_and_the_repl_goes_on(tmp_path):
    url = f"sqlite:///{tmp_path}/chat.db"
    script = [Reply.text("Counting slowly: one two three", pieces=6).stall(3), Reply.text("Second answer.")]
    with FakeModelServer(script) as server:
        env = {**os.environ, "DEEPSEEK_API_KEY": "test-key", "DEEPSEEK_BASE_URL": server.base_url}
        env.pop("DSHPY_STORE", None)
        process = subprocess.Popen(
            [sys.executable, "-m", "dshpy", "--store", url, "chat"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        out, err = Output(process.stdout), Output(process.stderr)
        try:
            out.wait_for("you> ")
            process.stdin.write(b"count\n")
            process.stdin.flush()
            server.wait_for_requests(1)
            time.sleep(0.5)  # the answer is streaming; the server holds the rest back after three chunks
            assert "Count" not in out.data.decode()  # a pipe gets a try's text only once the log keeps it
            process.send_signal(signal.SIGINT)
            err.wait_for("cancelled")
            out.wait_for("Count")  # kept as the interrupted answer, so now printed
            out.wait_for("you> ", count=2)
            process.stdin.write(b"again\n/exit\n")
            process.stdin.flush()
            process.stdin.close()
            assert process.wait(30) == 0, err.text()
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
            if not process.stdin.closed:
                process.stdin.close()
            stdout, stderr = out.text(), err.text()
    assert "Second answer." in stdout
    assert "Traceback" not in stderr
    session_id = stderr.strip().splitlines()[-1].removeprefix("session: ")
    store = dshpy.open_store(url)
    session = store.inspect(session_id)
    ends = [e.data["reason"] for e in session.events if e.type == "turn/end"]
    assert ends == [{"kind": "aborted", "reason": {"kind": "user"}}, {"kind": "completed"}]
    partial = next(e for e in session.events if e.type == "assistant/message")
    assert partial.data["interrupted"] is True
    assert partial.data["message"]["content"][0]["text"].startswith("Count")
    store.close()


def test_ctrl_c_during_run_logs_an_aborted_turn_and_exits_130(tmp_path):
    url = f"sqlite:///{tmp_path}/run.db"
    with FakeModelServer([Reply.text("Streaming a long answer", pieces=6).stall(2)]) as server:
        env = {**os.environ, "DEEPSEEK_API_KEY": "test-key", "DEEPSEEK_BASE_URL": server.base_url}
        env.pop("DSHPY_STORE", None)
        process = subprocess.Popen(
            [sys.executable, "-m", "dshpy", "--store", url, "run", "talk"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
        out, err = Output(process.stdout), Output(process.stderr)
        try:
            server.wait_for_requests(1)
            time.sleep(0.5)  # two chunks sent, then the server holds the rest back
            process.send_signal(signal.SIGINT)
            assert process.wait(30) == 130
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
            stdout, stderr = out.text(), err.text()
    assert stdout.startswith("Stre")  # the partial answer the log keeps (interrupted), printed once it is kept
    assert "interrupted: the turn was logged as aborted" in stderr and "Traceback" not in stderr
    store = dshpy.open_store(url)
    (info,) = store.list()
    session = store.inspect(info.id)
    assert session.events[-1].data["reason"] == {"kind": "aborted", "reason": {"kind": "user"}}
    assert session.pending_count == 0  # nothing left for repair: the abort was flushed
    store.close()
