"""Failures: one line on stderr, exit 1 for user errors, exit 2 for damaged or newer data, never a traceback."""

from __future__ import annotations

import sqlite3

import pytest
from cli_support import build_session, corrupt_event, run_cli

from dshpy.cli.app import EXIT_DATA, EXIT_USER
from dshpy.storage.checksum import session_row_crc

READ_COMMANDS = [["list"], ["show", "demo"], ["log", "demo"], ["export", "demo"]]
ID_COMMANDS = [
    ["show"],
    ["log"],
    ["fork"],
    ["repair"],
    ["export"],
    ["delete", "--yes"],
]


def one_line_error(result) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: ")
    return lines[0]


@pytest.mark.parametrize("command", ID_COMMANDS, ids=lambda c: c[0])
@pytest.mark.parametrize("bad_id", ["../x", ".", "a/../b", "/abs", "x" * 200, "", "nul\x00"])
def test_bad_ids_are_refused_before_the_store_is_touched(runner, db_path, command, bad_id):
    result = run_cli(runner, ["--store", f"sqlite:///{db_path}", "sessions", command[0], bad_id, *command[1:]], code=1)
    assert "invalid session id" in one_line_error(result)
    assert not db_path.exists()


def test_bad_new_id_on_import(store, dshpy_cli, tmp_path):
    build_session(store, "demo", turns=1)
    path = tmp_path / "demo.json"
    dshpy_cli("sessions", "export", "demo", "-o", str(path))
    assert "invalid session id" in one_line_error(dshpy_cli("sessions", "import", str(path), "--id", "../up", code=1))


@pytest.mark.parametrize("command", ID_COMMANDS, ids=lambda c: c[0])
def test_unknown_session(store, dshpy_cli, command):
    build_session(store, "demo", turns=1)
    message = one_line_error(dshpy_cli("sessions", command[0], "ghost", *command[1:], code=EXIT_USER))
    assert "ghost" in message and "not found" in message


@pytest.mark.parametrize("command", [*READ_COMMANDS, ["fork", "demo"], ["repair", "demo"], ["delete", "demo", "--yes"]])
def test_missing_store_is_not_created(runner, tmp_path, command):
    path = tmp_path / "nowhere" / "sessions.db"
    result = run_cli(runner, ["--store", f"sqlite:///{path}", "sessions", *command], code=EXIT_USER)
    assert f"no store at {path}" in one_line_error(result)
    assert not path.exists() and not path.parent.exists()


def test_missing_default_store(runner, tmp_path):
    result = run_cli(runner, ["sessions", "list"], code=EXIT_USER)
    assert "no store at" in one_line_error(result)
    assert str(tmp_path / "home") in result.stderr  # $DSHPY_HOME, set by the autouse fixture


def test_not_a_database(runner, db_path):
    db_path.write_bytes(b"this is not a database\n" * 200)
    for command in READ_COMMANDS:
        result = run_cli(runner, ["--store", f"sqlite:///{db_path}", "sessions", *command], code=EXIT_DATA)
        one_line_error(result)


def test_database_written_by_a_newer_dshpy(store, store_url, runner, db_path):
    build_session(store, "demo", turns=1)
    store.close()
    with sqlite3.connect(db_path) as db:
        db.execute("PRAGMA user_version = 99")
    db.close()
    result = run_cli(runner, ["--store", store_url, "sessions", "list"], code=EXIT_DATA)
    assert "newer" in one_line_error(result)


def test_session_in_a_newer_format(store, dshpy_cli, db_path):
    build_session(store, "demo", turns=1)
    with sqlite3.connect(db_path) as db:  # as a newer dshpy would store it: the row's checksum matches
        db.create_function("row_crc", 7, session_row_crc)
        db.execute("UPDATE sessions SET header = json_set(header, '$.version', 9) WHERE id = 'demo'")
        db.execute(
            "UPDATE sessions SET crc = row_crc(id, header, created_at, cwd, parent_session, base_id, base_count)"
        )
    db.close()
    for command in (["show", "demo"], ["export", "demo"], ["repair", "demo"], ["fork", "demo"]):
        assert "upgrade" in one_line_error(dshpy_cli("sessions", *command, code=EXIT_DATA))


def test_damaged_event(store, dshpy_cli, db_path):
    build_session(store, "demo", turns=1)
    build_session(store, "fine", turns=1)
    turn_start = next(e.seq for e in store.read("demo") if e.type == "turn/start")
    corrupt_event(db_path, "demo", turn_start)

    for command in (["show", "demo"], ["log", "demo"], ["export", "demo"], ["repair", "demo"]):
        assert "damaged" in one_line_error(dshpy_cli("sessions", *command, code=EXIT_DATA))

    listed = dshpy_cli("sessions", "list")  # the cache is current: list reads no events, so it cannot notice
    assert "fine" in listed.stdout and "demo" in listed.stdout and "unreadable" not in listed.stdout

    with sqlite3.connect(db_path) as db:  # without cache rows, list folds the logs and meets the damage
        db.execute("DELETE FROM projection_cache")
    db.close()
    listed = dshpy_cli("sessions", "list")  # one bad session does not hide the others
    assert "fine" in listed.stdout and "unreadable" in listed.stdout
    assert "1 session(s) could not be read" in listed.stderr


def test_foreign_sqlite_database_is_left_alone(runner, db_path):
    with sqlite3.connect(db_path) as db:
        db.execute("CREATE TABLE notes (body TEXT)")
    db.close()
    result = run_cli(runner, ["--store", f"sqlite:///{db_path}", "sessions", "list"], code=EXIT_USER)
    assert "not a dshpy session database" in one_line_error(result)


def test_bad_store_url(runner):
    assert "no store backend" in one_line_error(run_cli(runner, ["--store", "nosuch://x", "sessions", "list"], code=1))
    assert "invalid store URL" in one_line_error(run_cli(runner, ["--store", "sqlite:///", "sessions", "list"], code=1))


def test_usage_errors_exit_1_not_2(runner, store_url):
    result = run_cli(runner, ["--store", store_url, "sessions", "log", "demo", "--from", "-1"], code=EXIT_USER)
    assert "Usage:" in result.stderr and "--from" in result.stderr
    result = run_cli(runner, ["sessions", "frobnicate"], code=EXIT_USER)
    assert "No such command" in result.stderr
    result = run_cli(runner, ["--bogus"], code=EXIT_USER)
    assert "No such option" in result.stderr


def test_help_and_version(runner):
    result = run_cli(runner, ["--help"])
    assert "sessions" in result.stdout and "Exit codes" in result.stdout
    help_text = run_cli(runner, ["sessions", "--help"]).stdout
    for command in ("list", "show", "log", "fork", "repair", "export", "import", "delete"):
        assert command in help_text
        assert "--store" in run_cli(runner, ["sessions", command, "--help"]).stdout
    assert "dshpy" in run_cli(runner, ["--version"]).stdout
