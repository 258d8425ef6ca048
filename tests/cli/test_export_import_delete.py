"""``sessions export``, ``sessions import`` and ``sessions delete``."""

from __future__ import annotations

import io
import json

import orjson
from cli_support import build_session, run_cli
from rich.console import Console

from dshpy.cli import render
from dshpy.cli.app import AppState


def test_export_to_stdout_is_the_store_document(store, dshpy_cli):
    build_session(store, "demo")
    document = json.loads(dshpy_cli("sessions", "export", "demo").stdout)
    expected = store.export("demo")
    del document["exportedAt"], expected["exportedAt"]
    assert document == json.loads(orjson.dumps(expected))


def test_export_to_a_file_then_import_under_a_new_id(store, dshpy_cli, tmp_path):
    build_session(store, "demo", title="T")
    target = tmp_path / "out" / "demo.json"
    target.parent.mkdir()

    out = dshpy_cli("sessions", "export", "demo", "-o", str(target)).stdout
    assert f"to {target}" in out
    assert not [p for p in target.parent.iterdir() if p.name != "demo.json"]  # no temporary left behind

    exists = dshpy_cli("sessions", "import", str(target), code=1)
    assert exists.stderr.startswith('Error: session "')

    info = json.loads(dshpy_cli("sessions", "import", str(target), "--id", "copy", "--json").stdout)
    assert info["id"] == "copy"
    assert info["eventCount"] == store.stat("demo").event_count
    assert [e.to_wire() for e in store.read("copy")] == [e.to_wire() for e in store.read("demo")]


def test_export_json_result_with_output_file(store, dshpy_cli, tmp_path):
    build_session(store, "demo", turns=1)
    target = tmp_path / "demo.json"
    result = json.loads(dshpy_cli("sessions", "export", "demo", "-o", str(target), "--json").stdout)
    document = json.loads(target.read_bytes())
    assert result == {
        "id": "demo",
        "path": str(target),
        "eventCount": len(document["events"]),
        "bytes": target.stat().st_size,
        "eventsSha256": document["eventsSha256"],
    }


def test_import_from_stdin_into_a_new_store(store, runner, tmp_path):
    build_session(store, "demo", turns=1)
    document = orjson.dumps(store.export("demo")).decode()
    fresh = tmp_path / "new" / "fresh.db"  # import may create the store

    result = run_cli(runner, ["--store", f"sqlite:///{fresh}", "sessions", "import", "-"], stdin=document)
    assert result.stdout.strip() == "demo"
    assert fresh.exists()


def test_import_refuses_tampered_or_foreign_documents(store, dshpy_cli, tmp_path):
    build_session(store, "demo", turns=1)
    document = store.export("demo")
    document["events"][3]["data"]["turn"] = 7
    tampered = tmp_path / "tampered.json"
    tampered.write_bytes(orjson.dumps(document))
    not_json = tmp_path / "notes.txt"
    not_json.write_text("hello")
    wrong = tmp_path / "wrong.json"
    wrong.write_text('{"format": "something-else"}')
    newer = store.export("demo")
    newer["header"]["version"] = 99
    future = tmp_path / "future.json"
    future.write_bytes(orjson.dumps(newer))

    for path in (tampered, not_json, wrong, future):
        result = dshpy_cli("sessions", "import", str(path), "--id", "other", code=2)
        assert result.stderr.startswith("Error: ")
        assert len(result.stderr.strip().splitlines()) == 1
    assert not store.exists("other")
    missing = dshpy_cli("sessions", "import", str(tmp_path / "absent.json"), code=1)
    assert "cannot read" in missing.stderr


def test_export_and_import_show_progress_only_on_stderr(store, dshpy_cli, monkeypatch, tmp_path):
    build_session(store, "demo", turns=1)
    monkeypatch.setattr(render, "PROGRESS_MIN_EVENTS", 1)
    monkeypatch.setattr(render, "PROGRESS_MIN_BYTES", 1)
    buffer = io.StringIO()
    state = AppState(err_console=Console(file=buffer, force_terminal=True, width=80))

    exported = dshpy_cli("sessions", "export", "demo", obj=state).stdout
    assert json.loads(exported)["header"]["id"] == "demo"  # stdout holds the document only
    assert "reading" in buffer.getvalue()

    path = tmp_path / "demo.json"
    path.write_text(exported)
    buffer.truncate(0)
    state = AppState(err_console=Console(file=buffer, force_terminal=True, width=80))
    imported = dshpy_cli("sessions", "import", str(path), "--id", "again", "--json", obj=state).stdout
    assert json.loads(imported)["id"] == "again"
    assert "verifying" in buffer.getvalue()


def test_progress_is_shown_only_on_a_terminal_for_large_work():
    terminal = Console(file=io.StringIO(), force_terminal=True)
    pipe = Console(file=io.StringIO())
    assert render.show_progress(terminal, 10_000, 5_000)
    assert not render.show_progress(terminal, 10, 5_000)
    assert not render.show_progress(pipe, 10_000, 5_000)


def test_delete_asks_and_honours_the_answer(store, dshpy_cli):
    build_session(store, "demo", turns=1)

    declined = dshpy_cli("sessions", "delete", "demo", stdin="n\n", code=1)
    assert "not deleted" in declined.stderr
    assert store.exists("demo")

    no_answer = dshpy_cli("sessions", "delete", "demo", code=1)  # end of input is a no
    assert "not deleted" in no_answer.stderr
    assert store.exists("demo")

    accepted = dshpy_cli("sessions", "delete", "demo", stdin="y\n")
    assert "deleted demo" in accepted.stdout
    assert not store.exists("demo")


def test_delete_with_forks_needs_detach(store, dshpy_cli):
    build_session(store, "demo", turns=1)
    store.fork("demo", child_id="kid").close()
    child_events = [e.to_wire() for e in store.read("kid")]

    refused = dshpy_cli("sessions", "delete", "demo", "--yes", code=1)
    assert "--detach-forks" in refused.stderr and "kid" in refused.stderr
    assert store.exists("demo")

    result = json.loads(dshpy_cli("sessions", "delete", "demo", "--yes", "--detach-forks", "--json").stdout)
    assert result == {"id": "demo", "deleted": True, "forks": ["kid"]}
    assert not store.exists("demo")
    assert [e.to_wire() for e in store.read("kid")] == child_events
