"""``sessions search``, the filtered and paged ``sessions list``, and ``index status|rebuild``."""

from __future__ import annotations

import json

import pytest
from cli_support import build_session

from dshpy.cli.search import since_option_value


@pytest.fixture
def sessions(store):
    build_session(store, "alpha", title="Reading a.txt", prompt="connection refused when dialing the database")
    build_session(store, "beta", prompt="parse_config fails on an empty file")
    store.fork("alpha", child_id="child").close()
    return store


def test_search_prints_hits_with_their_session_seq_and_snippet(sessions, dshpy_cli):
    out = dshpy_cli("sessions", "search", "connection refused").stdout

    lines = [line.split() for line in out.splitlines()[1:]]
    assert {(line[0], line[1]) for line in lines} == {("alpha", "5"), ("child", "5")}
    assert "connection refused when dialing the database" in out


def test_search_json_is_the_page_and_its_cursor_continues(sessions, dshpy_cli):
    first = json.loads(dshpy_cli("sessions", "search", "a.txt", "--limit", "1", "--json").stdout)
    assert len(first["hits"]) == 1 and first["nextCursor"]
    second = json.loads(
        dshpy_cli("sessions", "search", "a.txt", "--limit", "1", "--cursor", first["nextCursor"], "--json").stdout
    )
    assert len(second["hits"]) == 1
    assert (second["hits"][0]["sessionId"], second["hits"][0]["seq"]) != (
        first["hits"][0]["sessionId"],
        first["hits"][0]["seq"],
    )
    hit = json.loads(dshpy_cli("sessions", "search", "parse config", "--json").stdout)["hits"][0]
    assert hit["sessionId"] == "beta"
    assert hit["snippet"]["text"][slice(*hit["snippet"]["highlights"][0])] == "parse_config"


def test_search_narrows_by_session_type_cwd_and_operators(sessions, dshpy_cli):
    def found(*args: str) -> set[str]:
        page = json.loads(dshpy_cli("sessions", "search", *args, "--json").stdout)
        return {hit["sessionId"] for hit in page["hits"]}

    assert found("connection refused", "--session", "child") == {"child"}
    assert found("connection refused", "--type", "tool/result") == set()
    assert found("connection refused", "--cwd", "/elsewhere") == set()
    assert found("connection OR parse", "--operators") == {"alpha", "child", "beta"}
    assert found("connection OR parse") == set()  # a literal phrase unless --operators
    assert found("connection", "--since", "1h") == {"alpha", "child"}
    assert found("connection", "--since", "2999-01-01T00:00:00Z") == set()


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["   "], "SESSION_QUERY_INVALID_QUERY"),
        (["x" * (1 << 20)], "SESSION_QUERY_INVALID_QUERY"),
        (["x", "--cursor", "garbage"], "SESSION_QUERY_INVALID_CURSOR"),
        (["x", "--limit", "0"], "SESSION_QUERY_INVALID_LIMIT"),
        (["x", "--since", "2024-01-01T00:00:00"], "SESSION_QUERY_INVALID_FILTER"),
        (["x", "--session", "missing"], "SESSION_QUERY_SESSION_NOT_FOUND"),
    ],
)
def test_search_refuses_bad_input_with_exit_1_and_the_code(sessions, dshpy_cli, args, code):
    result = dshpy_cli("sessions", "search", *args, code=1)

    assert result.stderr.startswith("Error: ") and code in result.stderr
    assert len(result.stderr.splitlines()) == 1 and len(result.stderr) < 400  # a 1 MB query is not echoed back


def test_search_refuses_a_stale_cursor(sessions, dshpy_cli):
    cursor = json.loads(dshpy_cli("sessions", "search", "a.txt", "--limit", "1", "--json").stdout)["nextCursor"]
    dshpy_cli("index", "rebuild")

    result = dshpy_cli("sessions", "search", "a.txt", "--limit", "1", "--cursor", cursor, code=1)

    assert "SESSION_QUERY_STALE_CURSOR" in result.stderr


def test_list_filters_page_with_a_cursor(sessions, dshpy_cli):
    page = json.loads(dshpy_cli("sessions", "list", "--cwd", "/srv/app", "--limit", "2", "--json").stdout)
    assert [s["id"] for s in page["sessions"]] == ["child", "beta"]  # newest created first
    rest = json.loads(
        dshpy_cli("sessions", "list", "--cwd", "/srv/app", "--cursor", page["nextCursor"], "--json").stdout
    )
    assert [s["id"] for s in rest["sessions"]] == ["alpha"] and rest["nextCursor"] is None

    forks = json.loads(dshpy_cli("sessions", "list", "--parent", "alpha", "--json").stdout)
    assert [s["id"] for s in forks["sessions"]] == ["child"]
    created = json.loads(dshpy_cli("sessions", "list", "--state", "created", "--json").stdout)
    assert [s["id"] for s in created["sessions"]] == ["child"]
    assert json.loads(dshpy_cli("sessions", "list", "--since", "2999-01-01T00:00:00Z", "--json").stdout) == {
        "sessions": [],
        "nextCursor": None,
    }


def test_filtered_list_table_and_unfiltered_json_unchanged(sessions, dshpy_cli):
    table = dshpy_cli("sessions", "list", "--parent", "alpha").stdout
    assert table.splitlines()[0].split()[:3] == ["id", "created", "cwd"]
    assert table.splitlines()[1].split()[0] == "child"
    assert isinstance(json.loads(dshpy_cli("sessions", "list", "--json").stdout), list)


@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["--state", "bogus"], "SESSION_QUERY_INVALID_FILTER"),
        (["--cwd", "/x", "--cursor", "garbage"], "SESSION_QUERY_INVALID_CURSOR"),
        (["--since", "yesterday"], "SESSION_QUERY_INVALID_FILTER"),
    ],
)
def test_list_refuses_bad_filters(sessions, dshpy_cli, args, code):
    assert code in dshpy_cli("sessions", "list", *args, code=1).stderr


def test_index_status_and_rebuild(sessions, dshpy_cli):
    status = json.loads(dshpy_cli("index", "status", "--json").stdout)
    assert status["kind"] == "sqlite-fts5" and status["documents"] > 0 and status["pending"] == 0
    rebuilt = json.loads(dshpy_cli("index", "rebuild", "--json").stdout)
    assert rebuilt["documents"] == status["documents"] and rebuilt["generation"] == status["generation"] + 1
    assert "documents" in dshpy_cli("index", "status").stdout


def test_since_takes_spans_back_from_now_or_passes_a_time_through():
    assert since_option_value("2h", now_ms=10_000_000) == 10_000_000 - 7_200_000
    assert since_option_value("7d", now_ms=10**12) == 10**12 - 7 * 86_400_000
    assert since_option_value("2024-01-01T00:00:00Z") == "2024-01-01T00:00:00Z"
    assert since_option_value(None) is None
