"""The UI's HTTP surface over real loopback HTTP: the guard, the headers, and what each JSON endpoint answers."""

from __future__ import annotations

import http.client
import json
import threading
import time
from typing import Any

import pytest
from ui_support import HOSTILE, Running

from dshpy.testing.builders import TurnScript
from dshpy.testing.showcase import ANSWER, SUMMARY, TOOL_ERROR

API = "/ui/api/sessions"


def test_page_and_assets_load_without_token_and_carry_the_csp(running: Running) -> None:
    for path, kind in (
        ("/ui/", "text/html"),
        ("/ui/assets/app.js", "text/javascript"),
        ("/ui/assets/app.css", "text/css"),
    ):
        status, headers, body = running.request(path, token=None)
        assert status == 200, path
        assert headers["content-type"].startswith(kind)
        assert "default-src 'self'" in headers["content-security-policy"]
        assert headers["x-content-type-options"] == "nosniff"
        assert body
    status, _headers, body = running.request("/ui/assets/../../server/http.py", token=None)
    assert status == 404


def test_the_page_never_parses_session_data_as_html() -> None:
    from importlib import resources

    script = resources.files("dshpy.ui").joinpath("assets", "app.js").read_text()
    page = resources.files("dshpy.ui").joinpath("assets", "index.html").read_text()
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
        assert sink not in script, sink
    assert "<script>" not in page  # no inline script: the CSP would refuse it anyway
    assert "http://" not in page and "https://" not in page  # no CDN


@pytest.mark.parametrize("token", [None, "wrong-token", ""])
def test_api_refuses_a_missing_or_wrong_token(running: Running, token: str | None) -> None:
    status, headers, body = running.request(API, token=token)
    assert status == 401
    assert headers["www-authenticate"] == "Bearer"
    assert json.loads(body) == {"error": "missing or wrong bearer token"}
    status, _headers, _body = running.request(f"{API}/{running.showcase.session_id}/live", token=token)
    assert status == 401


def test_json_rpc_on_the_same_port_is_guarded_too(running: Running) -> None:
    frame = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "session.list", "params": {}}).encode()
    kind = {"Content-Type": "application/json"}
    status, _h, _b = running.request("/rpc", token=None, method="POST", body=frame, headers=kind)
    assert status == 401
    status, _h, body = running.request("/rpc", method="POST", body=frame, headers=kind)
    assert status == 200 and "result" in json.loads(body)


def test_cross_origin_requests_are_refused_even_with_the_token(running: Running) -> None:
    evil = {"Origin": "http://evil.example"}
    for path, token in ((API, "default"), ("/ui/", None), ("/ui/assets/app.js", None)):
        status, _headers, body = running.request(path, token=token, headers=evil)
        assert status == 403, path
        assert "cross-origin" in json.loads(body)["error"]
    status, _h, _b = running.request(API, headers={"Sec-Fetch-Site": "cross-site"})
    assert status == 403
    own = {"Origin": f"http://127.0.0.1:{running.port}"}
    status, _h, _b = running.request(API, headers=own)
    assert status == 200


def test_a_rebound_host_name_cannot_fetch_the_page(running: Running) -> None:
    status, _h, body = running.request("/ui/", token=None, headers={"Host": "attacker.example"})
    assert status == 403
    assert "Host" in json.loads(body)["error"]


def test_list_nests_forks_under_their_parent_and_escapes_nothing_itself(running: Running) -> None:
    page = running.json(API)
    ids = [row["id"] for row in page["sessions"]]
    assert running.showcase.fork_id not in ids  # nested, not top-level
    parent = next(row for row in page["sessions"] if row["id"] == running.showcase.session_id)
    assert [child["id"] for child in parent["children"]] == [running.showcase.fork_id]
    assert parent["turns"] == 2
    assert parent["lastOutcome"] == "completed"
    assert parent["tokens"]["cacheReadTokens"] == 256
    hostile = next(row for row in page["sessions"] if row["id"] == running.hostile_id)
    assert HOSTILE.startswith(hostile["title"].rstrip("…"))  # raw text (shortened); the page renders it as text
    assert hostile["cwd"] == "/tmp/<hostile>"


def test_list_filters_pages_and_searches(running: Running) -> None:
    only = running.json(f"{API}?title=config.toml")
    assert {row["id"] for row in only["sessions"]} == {running.showcase.session_id, running.showcase.fork_id}
    first = running.json(f"{API}?limit=1")
    assert len(first["sessions"]) == 1 and first["nextCursor"]
    second = running.json(f"{API}?limit=1&cursor={first['nextCursor']}")
    assert second["sessions"][0]["id"] != first["sessions"][0]["id"]
    found = running.json(f"{API}?q=ENOENT")
    assert running.showcase.session_id in [row["id"] for row in found["sessions"]]
    assert any(hit["seq"] == 7 for row in found["sessions"] for hit in row["hits"])


def test_bad_parameters_get_a_clear_error(running: Running) -> None:
    cases = [
        (f"{API}?limit=abc", 400, "limit"),
        (f"{API}?state=sleeping", 400, "sleeping"),
        (f"{API}/{'x' * 200}", 400, "invalid session id"),
        (f"{API}/session-00000000000000000000000000000000", 404, "not found"),
        (f"{API}/{running.showcase.session_id}/events?from=-3", 400, "from"),
        (f"{API}/{running.showcase.session_id}/live?from=x", 400, "from"),
        ("/ui/api/nothing", 404, "no such endpoint"),
    ]
    for path, code, words in cases:
        status, _headers, body = running.request(path)
        assert status == code, (path, body)
        assert words in json.loads(body)["error"], path


def _walk(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for item in items:
        found.append(item)
        found.extend(_walk(item.get("shadowed", [])))
    return found


def test_transcript_puts_the_checkpoint_in_the_model_s_order_with_what_it_condensed(running: Running) -> None:
    page = running.json(f"{API}/{running.showcase.session_id}/transcript?tail=1")
    top = page["items"]
    assert [item["kind"] for item in top] == ["message", "checkpoint", "message"]
    assert top[0]["role"] == "system"
    checkpoint = top[1]
    assert checkpoint["replaces"] == [3, 18]
    assert checkpoint["summary"]["summary"][0]["text"] == SUMMARY
    inner = checkpoint["shadowed"]
    assert [item["seq"] for item in inner] == [3, 5, 7, 10, 11, 13, 18]
    assert [item["kind"] for item in inner][3:5] == ["attempt", "retry"]
    result = next(item for item in inner if item.get("role") == "tool")
    assert result["isError"] is True and result["content"][0]["text"] == TOOL_ERROR
    assert inner[3]["text"] == "The po"
    assert any(block.get("text") == ANSWER for block in inner[5]["content"])
    assert all(item["surface"] == "shadowed" for item in inner if item["kind"] == "message")


def test_timeline_pages_the_raw_log_and_filters_what_the_model_sees(running: Running) -> None:
    sid = running.showcase.session_id
    first = running.json(f"{API}/{sid}/events?limit=10")
    assert [e["event"]["seq"] for e in first["entries"]] == list(range(10))
    assert first["nextSeq"] == 10
    rest = running.json(f"{API}/{sid}/events?from=10&limit=100")
    assert rest["entries"][0]["event"]["seq"] == 10 and rest["nextSeq"] is None
    assert len(first["entries"]) + len(rest["entries"]) == first["eventCount"] == 26
    visible = running.json(f"{API}/{sid}/events?visible=1")
    assert [(e["event"]["seq"], e["surface"]) for e in visible["entries"]] == [
        (2, "current"),
        (19, "current"),
        (24, "current"),
    ]


def test_session_detail_has_the_fork_tree_with_boundaries_and_usage_per_turn(running: Running) -> None:
    sid, fork = running.showcase.session_id, running.showcase.fork_id
    child = running.json(f"{API}/{fork}")
    assert child["parentSession"] == sid
    assert [a["id"] for a in child["lineage"]["ancestors"]] == [sid]
    assert child["lineage"]["target"]["boundary"] == running.showcase.fork_boundary
    parent = running.json(f"{API}/{sid}")
    assert [d["session"]["id"] for d in parent["lineage"]["descendants"]] == [fork]
    usage = running.json(f"{API}/{sid}/usage")
    turn1, turn2 = usage["turns"]
    assert (turn1["inputTokens"], turn1["cacheReadTokens"], turn1["reasoningTokens"]) == (620, 256, 12)
    assert (turn1["calls"], turn1["failed"]) == (2, 1)  # the failed attempt's 100 input tokens are billed too
    assert (turn2["inputTokens"], turn2["outputTokens"], turn2["outcome"]) == (100, 20, "completed")
    assert len(usage["steps"]) == 3 and all(step["ms"] >= 0 for step in usage["steps"])


def _read_sse(response: http.client.HTTPResponse, wanted: int, deadline: float) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    while len(events) < wanted and time.monotonic() < deadline:
        line = response.readline()
        if line.startswith(b"data: ") and line.strip() != b"data: {}":
            events.append(json.loads(line[6:]))
    return events


def test_live_stream_delivers_a_new_turn_as_it_commits(running: Running) -> None:
    session = running.store.create(cwd="/srv/live")
    TurnScript(session).turn("first")
    session.flush()
    start = len(session.events)
    connection = http.client.HTTPConnection("127.0.0.1", running.port, timeout=30)
    try:
        connection.request(
            "GET", f"{API}/{session.id}/live?from={start}", headers={"Authorization": f"Bearer {running.token}"}
        )
        response = connection.getresponse()
        assert response.status == 200
        assert response.getheader("content-type", "").startswith("text/event-stream")
        assert response.readline() == b"event: ready\n"

        def write() -> None:
            time.sleep(0.3)
            TurnScript(session).turn("second, live")
            session.flush()

        writer = threading.Thread(target=write)
        writer.start()
        writer.join(20)
        expected = len(session.events) - start
        events = _read_sse(response, expected, time.monotonic() + 20)
    finally:
        connection.close()
        session.close()
    assert [e["seq"] for e in events] == list(range(start, start + expected))
    assert events[0]["type"] == "agent/inbox/spliced" and events[-1]["type"] == "turn/end"
    texts = [e["data"]["content"][0]["text"] for e in events if e["type"] == "user/message"]
    assert texts == ["second, live"]
