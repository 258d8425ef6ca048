"""Starting ``dshpy serve`` as a child process for tests."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pytest

    from dshpy.server.methods import Runtime
    from dshpy.testing.fake_model import FakeModelServer


def server_env(home: Path, base_url: str | None = None, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DSHPY_", "DEEPSEEK_"))}
    env["DSHPY_HOME"] = str(home)
    env["DEEPSEEK_API_KEY"] = "test-key"
    if base_url is not None:
        env["DEEPSEEK_BASE_URL"] = base_url
    env.update(extra or {})
    return env


def use_fake_model(monkeypatch: pytest.MonkeyPatch, server: FakeModelServer) -> None:
    """Point an in-process runtime's model settings at ``server``, with no user config to interfere."""
    monkeypatch.setenv("DEEPSEEK_API_KEY", "test-key")
    monkeypatch.setenv("DEEPSEEK_BASE_URL", server.base_url)
    monkeypatch.delenv("DEEPSEEK_MODEL", raising=False)
    monkeypatch.setenv("DSHPY_HOME", "/nonexistent-dshpy-home")


async def rpc(runtime: Runtime, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """The whole JSON-RPC reply of an in-process runtime to one request."""
    frame = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
    answer = await runtime.handle_frame(frame, None)
    assert answer is not None
    reply: dict[str, Any] = json.loads(answer)
    return reply


class StdioServer:
    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process
        self.notifications: list[dict[str, Any]] = []

    def write(self, data: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def frame(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line, "server closed stdout"
        return json.loads(line)

    def response(self, request_id: Any) -> dict[str, Any]:
        while True:
            frame = self.frame()
            if "method" in frame:
                self.notifications.append(frame)
            elif frame.get("id") == request_id:
                return frame

    def call(self, request_id: Any, method: str, params: Any = None) -> dict[str, Any]:
        frame: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            frame["params"] = params
        self.write(json.dumps(frame).encode() + b"\n")
        return self.response(request_id)


@contextmanager
def stdio_server(home: Path, base_url: str | None = None, *args: str) -> Iterator[StdioServer]:
    process = subprocess.Popen(
        [sys.executable, "-m", "dshpy", "serve", "--stdio", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=server_env(home, base_url),
    )
    try:
        yield StdioServer(process)
    finally:
        if process.stdin is not None:
            with contextlib.suppress(BrokenPipeError):
                process.stdin.close()
        if process.poll() is None:
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


@contextmanager
def http_server(home: Path, base_url: str | None = None, *args: str) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    process = subprocess.Popen(
        [sys.executable, "-m", "dshpy", "serve", "--http", "--port", "0", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=server_env(home, base_url),
    )
    try:
        assert process.stderr is not None
        deadline = time.monotonic() + 20
        url = None
        while time.monotonic() < deadline:
            line = process.stderr.readline().decode()
            match = re.search(r"serving (http://\S+)", line)
            if match:
                url = match.group(1)
                break
            if not line and process.poll() is not None:
                break
        assert url is not None, "the HTTP server did not start"
        yield url, process
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if process.stderr is not None:
            process.stderr.close()
