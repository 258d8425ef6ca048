"""``dshpy serve`` and ``dshpy-runtime`` create a fresh home private to the user (0700), like everything under it."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from server_support import server_env


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


CREATE = b'{"jsonrpc":"2.0","id":1,"method":"session.create","params":{"sessionId":"s"}}\n'


def _run(argv: list[str], env: dict[str, str], stdin: bytes = b"") -> None:
    """Run a server under the usual umask (022), feeding it ``stdin`` then end of input."""
    done = subprocess.run(
        argv, check=False, input=stdin, capture_output=True, env=env, timeout=60, preexec_fn=lambda: os.umask(0o022)
    )
    assert done.returncode == 0, done.stderr.decode()


@pytest.mark.parametrize("store", ["default", "jsonl"])
def test_serve_creates_a_fresh_home_at_0700(tmp_path: Path, store: str) -> None:
    home = tmp_path / "fresh" / "home"
    args = [] if store == "default" else ["--store", f"jsonl:///{home / 'sessions'}"]
    _run([sys.executable, "-m", "dshpy", *args, "serve", "--stdio"], server_env(home), CREATE)
    assert _mode(home) == 0o700
    for path in home.rglob("*"):
        assert _mode(path) & 0o077 == 0, f"{path} is {oct(_mode(path))}"


def test_runtime_creates_its_home_under_dsh_home_at_0700(tmp_path: Path) -> None:
    env = server_env(tmp_path / "unused")
    del env["DSHPY_HOME"]
    env["DSH_HOME"] = str(tmp_path / "dsh")
    _run([sys.executable, "-c", "from dshpy.server.main import main; main([])"], env)
    assert _mode(tmp_path / "dsh" / "dshpy") == 0o700
