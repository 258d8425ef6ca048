"""A dsh user's old sessions through the command line: ``--store dsh:``, list, show, run, ``sessions upgrade``.

The store is dsh's own root layout (``$DSH_HOME/sessions``, zstd, as the runtime lays
it out) holding rc.8 logs (format v0) and one session of every later generation
(tests/fixtures/dsh_old). This is what a new user would try first (issue #16).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from cli_support import make_runner, run_cli
from click.testing import Result

import dshpy
from dshpy.testing.fake_model import FakeModelServer, Reply

PARENT = "96cf59c9-b347-48b9-b234-a5200913ad05"
CHILD = "ada8966c-9fa3-441b-8721-37ff1e795e6a"


@pytest.fixture
def dsh_home(dsh_old_root: Callable[..., Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A harness home whose session root mixes generations v0 (fork family), v1, v2, v3 and v4."""
    home = tmp_path / "dsh-home"
    sessions = home / "sessions"
    for family, version in (("subagent-fork", 0), ("retry", 1), ("cancel", 2), ("error-finish", 3), ("goal", 4)):
        for path in dsh_old_root(family, "zstd", version).iterdir():
            target = sessions / path.name
            target.mkdir(parents=True, exist_ok=True)
            for session_dir in path.iterdir():
                session_dir.rename(target / session_dir.name)
    monkeypatch.setenv("DSH_HOME", str(home))
    monkeypatch.delenv("DSHPY_STORE", raising=False)
    return home


def dshpy_cli(*args: str, code: int = 0) -> Result:
    return run_cli(make_runner(), ["--store", "dsh:", *args], code=code)


def test_list_shows_every_generation_with_its_stored_version(dsh_home: Path) -> None:
    listed = json.loads(dshpy_cli("sessions", "list", "--json").stdout)
    versions = {row["id"]: row.get("storedVersion", 4) for row in listed}
    assert versions == {PARENT: 0, CHILD: 0, "retry": 1, "cancel": 2, "error-finish": 3, "goal": 4}
    assert all(
        row.get("formatStatus", "current") == ("current" if versions[row["id"]] == 4 else "migration-required")
        for row in listed
    )
    table = dshpy_cli("sessions", "list")
    assert "(v0)" in table.stdout and "(v3)" in table.stdout
    assert "sessions upgrade --all" in table.stderr


def test_show_reads_an_old_session_and_writes_nothing(dsh_home: Path) -> None:
    before = sorted(str(p) for p in dsh_home.rglob("*"))
    shown = dshpy_cli("sessions", "show", PARENT)
    assert "MARMALADE" in shown.stdout
    assert "v4  (stored as v0, read through dsh's upgrade)" in shown.stdout
    log = dshpy_cli("sessions", "log", "retry", "--json")
    assert "assistant/attempt" in log.stdout or "assistant/message" in log.stdout
    assert sorted(str(p) for p in dsh_home.rglob("*")) == before


def test_upgrade_one_all_and_dry_run(dsh_home: Path) -> None:
    before = sorted(str(p) for p in dsh_home.rglob("*"))
    dry = json.loads(dshpy_cli("sessions", "upgrade", "--all", "--dry-run", "--json").stdout)
    assert sorted(item["id"] for item in dry["upgraded"]) == sorted([PARENT, CHILD, "retry", "cancel", "error-finish"])
    assert not any(item["written"] for item in dry["upgraded"]) and dry["refused"] == []
    assert sorted(str(p) for p in dsh_home.rglob("*")) == before
    one = dshpy_cli("sessions", "upgrade", "retry")
    assert "retry: v1 → v4" in one.stdout and "kept session.v1.jsonl.zstd" in one.stdout
    assert "already stored as v4" in dshpy_cli("sessions", "upgrade", "retry").stdout
    rest = json.loads(dshpy_cli("sessions", "upgrade", "--all", "--json").stdout)
    assert sorted(item["id"] for item in rest["upgraded"]) == sorted([PARENT, CHILD, "cancel", "error-finish"])
    assert "nothing to upgrade" in dshpy_cli("sessions", "upgrade", "--all").stdout
    listed = json.loads(dshpy_cli("sessions", "list", "--json").stdout)
    assert all("storedVersion" not in row for row in listed)
    for old in ("session.jsonl.zstd", "session.v1.jsonl.zstd", "session.v2.jsonl.zstd", "session.v3.jsonl.zstd"):
        assert list(dsh_home.rglob(old))  # every old generation is kept


def test_upgrade_usage_and_refusals(dsh_home: Path, dsh_old_root: Callable[..., Path]) -> None:
    dshpy_cli("sessions", "upgrade", code=1)
    dshpy_cli("sessions", "upgrade", "retry", "--all", code=1)
    assert "not found" in dshpy_cli("sessions", "upgrade", "nope", code=1).stderr
    for path in dsh_old_root("steering", "zstd").iterdir():
        (dsh_home / "sessions" / path.name).mkdir(exist_ok=True)
        for session_dir in path.iterdir():
            session_dir.rename(dsh_home / "sessions" / path.name / session_dir.name)
    refused = dshpy_cli("sessions", "upgrade", "steering", code=2)
    assert "surface before first step" in refused.stderr and "remains unchanged" in refused.stderr
    everything = dshpy_cli("sessions", "upgrade", "--all", code=2)
    assert "steering: not upgraded" in everything.stderr and "1 session(s) could not be upgraded" in everything.stderr
    assert list((dsh_home / "sessions").rglob("session.v4.jsonl.zstd"))


def test_run_continues_an_old_session_in_its_v4_file(dsh_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeModelServer(default=Reply.text("Still MARMALADE.")) as server:
        monkeypatch.setenv("DEEPSEEK_API_KEY", "test-key")
        monkeypatch.setenv("DEEPSEEK_BASE_URL", server.base_url)
        result = dshpy_cli("run", "What was the codeword?", "--session", PARENT)
        assert result.stdout == "Still MARMALADE.\n"
        sent = server.requests[0]["messages"]
    assert any("MARMALADE" in json.dumps(message) for message in sent[:-1])  # the old history reached the model
    (session_dir,) = (dsh_home / "sessions").glob(f"*/{PARENT}")
    assert (session_dir / "session.jsonl.zstd").exists() and (session_dir / "session.v4.jsonl.zstd").exists()
    store = dshpy.open_store("dsh:")
    assert store.stat(PARENT).stored_version == 4
    events = list(store.read(PARENT))
    assert events[-1].type == "turn/end" and events[-1].data["reason"] == {"kind": "completed"}
    dshpy.validate(events)


def test_the_dsh_store_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSH_HOME", str(tmp_path / "h"))
    assert "no store at" in dshpy_cli("sessions", "list", code=1).stderr
    (tmp_path / "h" / "sessions").mkdir(parents=True)
    assert "no sessions" in dshpy_cli("sessions", "list").stdout
    store = dshpy.open_store(f"dsh:///{tmp_path / 'other'}?compression=none")
    assert store.url == f"jsonl:///{tmp_path / 'other' / 'sessions'}?compression=none"
    monkeypatch.delenv("DSH_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert dshpy.open_store("dsh:").url == f"jsonl:///{tmp_path / '.dsh' / 'sessions'}?compression=zstd"
    with pytest.raises(dshpy.StoreError, match="unknown dsh store option"):
        dshpy.open_store("dsh:?colour=red")
