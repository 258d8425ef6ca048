"""End to end: the installed ``dshpy`` console script and ``python -m dshpy`` in real subprocesses."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cli_support import build_session

import dshpy


def dshpy_command() -> list[str]:
    """The console script installed beside this interpreter (``.venv/bin/dshpy``)."""
    script = Path(sys.executable).with_name("dshpy")
    found = str(script) if script.exists() else shutil.which("dshpy")
    if found is None:
        pytest.skip("the dshpy console script is not installed (pip install -e .)")
    return [found]


def run(command: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DSHPY_HOME": str(tmp_path / "home"), "NO_COLOR": "1"}
    env.pop("DSHPY_STORE", None)
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=60, check=False)


def test_console_script_lists_and_shows_a_session(tmp_path):
    url = f"sqlite:///{tmp_path / 'sessions.db'}"
    with dshpy.open_store(url) as store:
        build_session(store, "e2e-session", title="End to end")

    listed = run([*dshpy_command(), "--store", url, "sessions", "list", "--json"], tmp_path)
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    assert [(row["id"], row["turns"], row["title"]) for row in rows] == [("e2e-session", 2, "End to end")]

    shown = run([sys.executable, "-m", "dshpy", "--store", url, "sessions", "show", "e2e-session"], tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "session e2e-session" in shown.stdout
    assert "please read a.txt" in shown.stdout
    assert "→ read_file" in shown.stdout
    assert "\x1b[" not in shown.stdout  # no colours when piped


def test_console_script_failure_is_one_line_and_exit_code(tmp_path):
    url = f"sqlite:///{tmp_path / 'absent.db'}"
    missing = run([*dshpy_command(), "--store", url, "sessions", "show", "nope"], tmp_path)
    assert missing.returncode == 1
    (line,) = missing.stderr.strip().splitlines()
    assert line.startswith(f"Error: no store at {tmp_path / 'absent.db'}")
    assert not (tmp_path / "absent.db").exists()

    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"\0garbage" * 512)
    corrupt = run([*dshpy_command(), "--store", f"sqlite:///{garbage}", "sessions", "list"], tmp_path)
    assert corrupt.returncode == 2
    assert "Traceback" not in corrupt.stderr and len(corrupt.stderr.strip().splitlines()) == 1
