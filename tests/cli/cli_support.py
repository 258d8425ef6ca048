"""Helpers shared by the command-line tests (imported by name: tests/ has no packages)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

import dshpy
from dshpy.cli import cli
from dshpy.testing.builders import TurnScript


def make_runner() -> CliRunner:
    """A runner that keeps stderr apart from stdout (click 8.1 needs asking, 8.2+ always does)."""
    try:
        return CliRunner(mix_stderr=False)
    except TypeError:
        return CliRunner()


def build_session(
    store: dshpy.BaseStore,
    session_id: str = "demo",
    *,
    turns: int = 2,
    title: str | None = None,
    open_turn: bool = False,
    prompt: str = "please read a.txt",
) -> dshpy.Session:
    """A session of ``turns`` completed turns (tool calls included); optionally a title and an unclosed turn."""
    session = store.create(session_id=session_id, cwd="/srv/app")
    script = TurnScript(session)
    for index in range(turns):
        script.turn(
            prompt if index == 0 else f"follow-up {index}", steps=2, system="You are terse." if index == 0 else None
        )
        if index == 0 and title is not None:
            session.append("session/title", {"title": title, "messageSeqs": [], "source": {"kind": "user"}})
    if open_turn:
        script.turn("crashed here", steps=2, close=False)
    session.flush()
    session.close()
    return session


def run_cli(runner: CliRunner, args: list[str], *, code: int = 0, obj: Any = None, stdin: str | None = None) -> Result:
    """Invoke the CLI in-process and check the exit code; an unexpected Python exception fails the test."""
    result = runner.invoke(cli, args, obj=obj, input=stdin)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(
            f"dshpy {' '.join(args)} raised {result.exception!r}\n{result.output}"
        ) from result.exception
    assert result.exit_code == code, (
        f"exit {result.exit_code} != {code}\nstdout: {result.stdout}\nstderr: {result.stderr}"
    )
    assert "Traceback" not in result.stderr
    return result


def corrupt_event(db_path: Path, session_id: str, seq: int, body: bytes = b"{not json") -> None:
    """Damage one stored event row in place, as a bad disk or a foreign writer would."""
    with sqlite3.connect(db_path) as db:
        db.execute("UPDATE events SET body = ? WHERE session_id = ? AND seq = ?", (body, session_id, seq))
    db.close()


def model_environment(monkeypatch: Any, server: Any) -> None:
    """Point ``run``/``chat`` at ``server`` (a FakeModelServer) with a key and the default model."""
    monkeypatch.setenv("DEEPSEEK_API_KEY", "test-key")
    monkeypatch.setenv("DEEPSEEK_BASE_URL", server.base_url)
    monkeypatch.delenv("DEEPSEEK_MODEL", raising=False)


def stored(store_url: str, session_id: str) -> dshpy.Session:
    """The session as stored (a read-only view: nothing is repaired or written), every event loaded.

    Built from the whole stored log rather than by ``inspect``: a view ``inspect`` resumed from the session's
    resume point reads its older events through the store, which this helper closes before returning.
    """
    store = dshpy.open_store(store_url)
    try:
        events = list(store.read(session_id))
        header = store.stat(session_id).header
    finally:
        store.close()
    closers = dshpy.interrupted_turn_closers(events)
    return dshpy.Session(header, [*events, *closers], flushed=len(events), read_only=True)


def session_id_of(result: Result) -> str:
    """The id a ``run``/``chat`` printed on its ``session: ID`` line (stderr)."""
    line = next(line for line in result.stderr.splitlines() if line.startswith("session: "))
    return line.removeprefix("session: ")
