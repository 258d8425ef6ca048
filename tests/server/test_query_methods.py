"""``session.search`` and the filtered ``session.list``: results as the query service's pages, refusals with codes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest

import dshpy
from dshpy.server.methods import Runtime
from dshpy.testing.builders import TurnScript


@pytest.fixture
def store(tmp_path) -> Iterator[dshpy.BaseStore]:
    opened = dshpy.open_store(f"sqlite:///{tmp_path / 's.db'}")
    for sid, cwd, prompt in [
        ("alpha", "/srv/app", "connection refused when dialing the database"),
        ("beta", "/srv/app", "parse_config fails on an empty file"),
        ("gamma", "/srv/other", "connection refused again"),
    ]:
        with opened.create(session_id=sid, cwd=cwd) as session:
            TurnScript(session).turn(prompt)
    yield opened
    opened.close()


def _calls(store: dshpy.BaseStore, *calls: tuple[str, dict[str, Any] | None]) -> list[dict[str, Any]]:
    async def scenario() -> list[dict[str, Any]]:
        runtime = Runtime(store)
        replies = []
        for number, (method, params) in enumerate(calls):
            frame: dict[str, Any] = {"jsonrpc": "2.0", "id": number, "method": method}
            if params is not None:
                frame["params"] = params
            answer = await runtime.handle_frame(json.dumps(frame).encode(), None)
            assert answer is not None
            replies.append(json.loads(answer))
        await runtime.close()
        return replies

    return asyncio.run(scenario())


def _call(store: dshpy.BaseStore, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return _calls(store, (method, params))[0]


def test_search_answers_the_page_with_filters_in_camel_case(store):
    result = _call(store, "session.search", {"query": "connection refused"})["result"]
    assert {hit["sessionId"] for hit in result["hits"]} == {"alpha", "gamma"}
    assert result["nextCursor"] is None
    hit = result["hits"][0]
    assert set(hit) == {"sessionId", "seq", "type", "time", "score", "snippet"}

    scoped = _call(
        store, "session.search", {"query": "connection refused", "filters": {"cwd": "/srv/app", "excludeIds": ["x"]}}
    )
    assert [hit["sessionId"] for hit in scoped["result"]["hits"]] == ["alpha"]
    one = _call(store, "session.search", {"query": "connection", "sessionId": "gamma", "types": ["user/message"]})
    assert [hit["sessionId"] for hit in one["result"]["hits"]] == ["gamma"]
    either = _call(store, "session.search", {"query": "parse OR dialing", "operators": True})
    assert {hit["sessionId"] for hit in either["result"]["hits"]} == {"alpha", "beta"}


def test_search_pages_with_its_cursor(store):
    first = _call(store, "session.search", {"query": "connection", "limit": 1})["result"]
    second = _call(store, "session.search", {"query": "connection", "limit": 1, "cursor": first["nextCursor"]})
    assert first["hits"][0]["sessionId"] != second["result"]["hits"][0]["sessionId"]


@pytest.mark.parametrize(
    ("params", "code", "query_code"),
    [
        ({"query": ""}, -32602, "SESSION_QUERY_INVALID_QUERY"),
        ({"query": "a\x00b"}, -32602, "SESSION_QUERY_INVALID_QUERY"),
        ({"query": "x" * 500_000}, -32602, "SESSION_QUERY_INVALID_QUERY"),
        ({"query": 7}, -32602, "SESSION_QUERY_INVALID_QUERY"),
        ({"query": "x", "filters": {"colour": "red"}}, -32602, "SESSION_QUERY_INVALID_FILTER"),
        ({"query": "x", "cursor": "garbage"}, -32602, "SESSION_QUERY_INVALID_CURSOR"),
        ({"query": "x", "limit": 0}, -32602, "SESSION_QUERY_INVALID_LIMIT"),
        ({"query": "x", "since": "2024-01-01T00:00:00"}, -32602, "SESSION_QUERY_INVALID_FILTER"),
        ({"query": "x", "sessionId": "missing"}, -32001, "SESSION_QUERY_SESSION_NOT_FOUND"),
    ],
)
def test_search_refusals_carry_the_query_code(store, params, code, query_code):
    error = _call(store, "session.search", params)["error"]
    assert error["code"] == code
    assert error["data"] == {"code": query_code}
    assert len(error["message"]) < 400


def test_search_without_a_query_or_with_bad_params_names_the_field(store):
    assert _call(store, "session.search", {})["error"]["data"] == {"field": "query"}
    assert _call(store, "session.search", {"query": "x", "filters": []})["error"]["data"] == {"field": "filters"}
    assert _call(store, "session.search", {"query": "x", "sessionId": "../x"})["error"]["data"] == {
        "field": "sessionId"
    }


def test_a_one_megabyte_request_is_refused_before_it_is_read(store):
    error = _call(store, "session.search", {"query": "x" * (1 << 20)})["error"]
    assert error["code"] in (-32602, -32007)


def test_a_cursor_goes_stale_when_the_index_is_rebuilt(store):
    first = _call(store, "session.search", {"query": "connection", "limit": 1})["result"]
    dshpy.SessionQuery(store).rebuild_index()
    error = _call(store, "session.search", {"query": "connection", "limit": 1, "cursor": first["nextCursor"]})["error"]
    assert (error["code"], error["data"]) == (-32602, {"code": "SESSION_QUERY_STALE_CURSOR"})


def test_list_without_params_answers_as_before(store):
    result = _call(store, "session.list")["result"]
    assert set(result) == {"sessions"}
    assert {s["id"] for s in result["sessions"]} == {"alpha", "beta", "gamma"}
    assert "nextCursor" not in result and "title" not in result["sessions"][0]


def test_list_with_filters_pages_through_the_query_service(store):
    page = _call(store, "session.list", {"filters": {"cwd": "/srv/app"}, "limit": 1})["result"]
    assert [s["id"] for s in page["sessions"]] == ["beta"] and page["nextCursor"]
    assert page["sessions"][0]["state"] == "active" and page["sessions"][0]["turns"] == 1
    rest = _call(store, "session.list", {"filters": {"cwd": "/srv/app"}, "cursor": page["nextCursor"]})["result"]
    assert [s["id"] for s in rest["sessions"]] == ["alpha"] and rest["nextCursor"] is None
    oldest = _call(store, "session.list", {"descending": False, "limit": 1})["result"]
    assert [s["id"] for s in oldest["sessions"]] == ["alpha"]
    recent = _call(store, "session.list", {"filters": {"createdFrom": "2999-01-01T00:00:00Z"}})["result"]
    assert recent == {"sessions": [], "nextCursor": None}


@pytest.mark.parametrize(
    ("params", "query_code"),
    [
        ({"filters": {"colour": "red"}}, "SESSION_QUERY_INVALID_FILTER"),
        ({"filters": {"state": "bogus"}}, "SESSION_QUERY_INVALID_FILTER"),
        ({"sort": "size"}, "SESSION_QUERY_INVALID_SORT"),
        ({"limit": 0}, "SESSION_QUERY_INVALID_LIMIT"),
        ({"cursor": "garbage"}, "SESSION_QUERY_INVALID_CURSOR"),
    ],
)
def test_list_refusals_carry_the_query_code(store, params, query_code):
    error = _call(store, "session.list", params)["error"]
    assert (error["code"], error["data"]) == (-32602, {"code": query_code})
