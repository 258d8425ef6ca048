"""``dshpy migrate`` and ``dshpy sessions log --follow`` (SQLite always; PostgreSQL with DSH_TEST_POSTGRES_DSN)."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time

import pytest
from cli_support import run_cli

import dshpy
from dshpy.storage.sqlite import SCHEMA_MIGRATIONS
from dshpy.testing.builders import TurnScript


def test_migrate_sqlite_creates_and_reports(runner, tmp_path):
    url = f"sqlite:///{tmp_path / 'new.db'}"
    result = run_cli(runner, ["--store", url, "migrate"])
    assert f"schema is at version {len(SCHEMA_MIGRATIONS)}" in result.stdout
    assert (tmp_path / "new.db").exists()
    result = run_cli(runner, ["migrate", "--store", url, "--json"])
    assert json.loads(result.stdout)["schemaVersion"] == len(SCHEMA_MIGRATIONS)


def test_migrate_memory_has_nothing_to_do(runner):
    result = run_cli(runner, ["--store", "memory:", "migrate", "--json"])
    assert json.loads(result.stdout) == {
        "store": "memory:",
        "schemaVersion": None,
        "latestSchemaVersion": None,
        "applied": None,
    }


def test_migrate_postgres_applies_once(runner, postgres_url):
    from dshpy.storage.postgres_schema import MIGRATIONS

    first = run_cli(runner, ["--store", postgres_url, "migrate", "--json"])
    assert json.loads(first.stdout)["applied"] == [m.version for m in MIGRATIONS]
    again = run_cli(runner, ["--store", postgres_url, "migrate"])
    assert f"schema is at version {len(MIGRATIONS)}, nothing to do" in again.stdout


def test_migrate_refuses_a_bad_schema_name(runner, postgres_dsn):
    result = run_cli(runner, ["--store", f"{postgres_dsn}?schema=pg_nope", "migrate"], code=1)
    assert "reserved by PostgreSQL" in result.stderr


class LineReader:
    """Complete lines from a pipe as they arrive, with a timeout (no Python-side buffering to hide them)."""

    def __init__(self, pipe) -> None:
        self.fd = pipe.fileno()
        self.pending = b""

    def read(self, count: int, timeout: float = 20.0) -> list[str]:
        lines: list[bytes] = []
        deadline = time.monotonic() + timeout
        while len(lines) < count and time.monotonic() < deadline:
            if b"\n" in self.pending:
                line, self.pending = self.pending.split(b"\n", 1)
                lines.append(line)
                continue
            if select.select([self.fd], [], [], 0.1)[0]:
                chunk = os.read(self.fd, 65536)
                if not chunk:
                    break
                self.pending += chunk
        return [line.decode() for line in lines]


@pytest.fixture(params=["sqlite", "postgres"])
def follow_url(request, tmp_path):
    if request.param == "postgres":
        return request.getfixturevalue("postgres_url")
    return f"sqlite:///{tmp_path / 'follow.db'}"


def test_log_follow_prints_new_events_until_ctrl_c(follow_url, tmp_path):
    store = dshpy.open_store(follow_url)
    session = store.create(session_id="followed")
    TurnScript(session).turn("before")
    session.flush()
    before = len(session.events)
    env = {**os.environ, "DSHPY_HOME": str(tmp_path / "home"), "NO_COLOR": "1"}
    command = [sys.executable, "-m", "dshpy", "--store", follow_url, "sessions", "log", "followed", "--follow"]
    process = subprocess.Popen([*command, "--json", "--type", "turn/*"], stdout=subprocess.PIPE, env=env)
    lines = LineReader(process.stdout)
    try:
        assert [json.loads(line)["type"] for line in lines.read(2)] == ["turn/start", "turn/end"]
        TurnScript(session).turn("while following")
        session.flush()
        followed = [json.loads(line) for line in lines.read(2)]
        assert [(e["type"], e["seq"]) for e in followed] == [
            (e.type, e.seq) for e in session.events[before:] if e.type.startswith("turn/")
        ]
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=10) == 0  # Ctrl-C is the normal way out
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        assert process.stdout is not None
        process.stdout.close()
    session.close()
    store.close()
