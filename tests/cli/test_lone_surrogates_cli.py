"""The CLI prints event data holding lone UTF-16 surrogates instead of crashing (real subprocesses).

Human output shows each lone surrogate backslash-escaped (``\\udcff``, the escape the
log holds); ``--json`` output carries it exactly, as ``JSON.stringify`` escapes it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import dshpy
from dshpy.core.json import loads
from dshpy.testing.builders import TurnScript
from dshpy.testing.fake_model import FakeModelServer, Reply

NAME = "report-\udcff.txt"
HALF = "cut \ud83d"


def run(
    args: list[str], tmp_path: Path, io_encoding: str | None, extra_env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "DSHPY_HOME": str(tmp_path / "home"), "NO_COLOR": "1", **(extra_env or {})}
    env.pop("DSHPY_STORE", None)
    if io_encoding is not None:
        env["PYTHONIOENCODING"] = io_encoding
    return subprocess.run([sys.executable, "-m", "dshpy", *args], capture_output=True, env=env, timeout=60, check=False)


def test_sessions_log_show_list_and_export_print_lone_surrogates(tmp_path: Path) -> None:
    io_encoding = "utf-8:strict"  # a UTF-8 terminal: what Python uses under en_US.UTF-8 (C.UTF-8 would escape)
    url = f"sqlite:///{tmp_path / 'sessions.db'}"
    with dshpy.open_store(url) as store:
        session = store.create(session_id="odd", cwd="/srv/\udcff")
        TurnScript(session).turn(f"open {NAME} then {HALF}", steps=1)
        session.append("todo/write", {"todos": [{"content": f"rename {NAME}", "status": "pending"}]})
        session.close()

    for args in (["sessions", "log", "odd"], ["sessions", "show", "odd"], ["sessions", "list"]):
        done = run(["--store", url, *args], tmp_path, io_encoding)
        assert done.returncode == 0, done.stderr.decode(errors="replace")
        assert b"Traceback" not in done.stderr
        assert b"\\udcff" in done.stdout  # escaped, never a raw (unencodable) surrogate
        if args[1] == "show":
            assert b"open report-\\udcff.txt then cut \\ud83d" in done.stdout

    logged = run(["--store", url, "sessions", "log", "odd", "--json"], tmp_path, io_encoding)
    assert logged.returncode == 0, logged.stderr.decode(errors="replace")
    assert b'"text":"open report-\\udcff.txt then cut \\ud83d"' in logged.stdout
    shown = run(["--store", url, "sessions", "show", "odd", "--json"], tmp_path, io_encoding)
    assert shown.returncode == 0, shown.stderr.decode(errors="replace")
    assert loads(shown.stdout)["session"]["cwd"] == "/srv/\udcff"

    exported = tmp_path / "odd.json"
    done = run(["--store", url, "sessions", "export", "odd", "-o", str(exported)], tmp_path, io_encoding)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    target = f"jsonl:///{tmp_path / 'copy'}"
    done = run(["--store", target, "sessions", "import", str(exported)], tmp_path, io_encoding)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    with dshpy.open_store(target) as copy:
        events = list(copy.read("odd"))
    assert events[-1].data["todos"][0]["content"] == f"rename {NAME}"


def test_run_prints_a_streamed_reply_holding_lone_surrogates(tmp_path: Path) -> None:
    """The model names a file whose name is not UTF-8: printed escaped, logged exactly.

    (Only a lone *low* surrogate here: joining emoji halves split across chunks is the stream's business.)"""
    url = f"sqlite:///{tmp_path / 'run.db'}"
    reply = f"Renamed {NAME} to report.txt."
    with FakeModelServer([Reply.text(reply)]) as server:
        env = {"DEEPSEEK_API_KEY": "test-key", "DEEPSEEK_BASE_URL": server.base_url}
        done = run(["--store", url, "run", "rename the report"], tmp_path, "utf-8:strict", env)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    assert b"Traceback" not in done.stderr
    assert done.stdout == b"Renamed report-\\udcff.txt to report.txt.\n"
    with dshpy.open_store(url) as store:
        [info] = store.list()
        answers = [e for e in store.read(info.id) if e.type == "assistant/message"]
    assert answers[-1].data["message"]["content"][-1]["text"] == reply


def test_run_sends_a_prompt_holding_a_non_utf8_file_name_to_the_model(tmp_path: Path) -> None:
    """A prompt naming a non-UTF-8 file (argv decodes byte 0xff to ``\\udcff``) reaches the model and the log.

    The request body escapes it as ``JSON.stringify`` would; before, the SDK's encoder raised
    ``UnicodeEncodeError`` and the run failed without asking the model."""
    url = f"sqlite:///{tmp_path / 'ask.db'}"
    prompt = f"rename {NAME}"
    with FakeModelServer([Reply.text("Done.")]) as server:
        env = {"DEEPSEEK_API_KEY": "test-key", "DEEPSEEK_BASE_URL": server.base_url}
        done = run(["--store", url, "run", prompt], tmp_path, "utf-8:strict", env)
        assert done.returncode == 0, done.stderr.decode(errors="replace")
        [request] = server.requests
        headers = server.request_headers[0]
    assert done.stdout == b"Done.\n"
    assert {key.lower(): value for key, value in headers.items()}["content-type"] == "application/json"
    sent = [m for m in request["messages"] if m["role"] == "user"]
    assert sent[-1]["content"] in (prompt, [{"type": "text", "text": prompt}])
    assert request["model"] and request["stream"] is True
    with dshpy.open_store(url) as store:
        [info] = store.list()
        users = [e for e in store.read(info.id) if e.type == "user/message"]
    assert users[-1].data["content"][-1]["text"] == prompt
