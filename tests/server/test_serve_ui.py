"""``dshpy serve --http`` serves the web UI on its own port, behind the JSON-RPC endpoint's token, Host and Origin
checks, over real HTTP to a real server process."""

from __future__ import annotations

import http.client
import json
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from server_support import http_server

TOKEN = "s3cret-token"


def request(
    url: str, path: str, *, token: str | None = TOKEN, headers: dict[str, str] | None = None, body: Any = None
) -> tuple[int, dict[str, str], bytes]:
    parts = urlsplit(url)
    sent = dict(headers or {})
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    method = "GET"
    data = None
    if body is not None:
        method, data = "POST", json.dumps(body).encode()
        sent["Content-Type"] = "application/json"
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        connection.request(method, path, body=data, headers=sent)
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


def test_serve_http_serves_the_ui_behind_the_same_guard(tmp_path: Path) -> None:
    with http_server(tmp_path, None, "--token", TOKEN) as (url, process):
        assert process.stderr is not None
        announced = process.stderr.readline().decode()
        assert "web UI: " in announced and "/ui/#token=<token>" in announced and TOKEN not in announced
        created = {"jsonrpc": "2.0", "id": 1, "method": "session.create", "params": {"cwd": "/srv/served"}}
        status, _headers, body = request(url, "/rpc", body=created)
        assert status == 200, body
        session_id = json.loads(body)["result"]["id"]

        status, headers, page = request(url, "/ui/", token=None)  # the page holds no data: no token needed
        assert status == 200 and headers["content-type"].startswith("text/html") and b"app.js" in page
        assert "default-src 'self'" in headers["content-security-policy"]
        for token in (None, "wrong"):
            status, headers, _body = request(url, "/ui/api/sessions", token=token)
            assert status == 401 and headers["www-authenticate"] == "Bearer"
        status, _headers, body = request(url, "/ui/api/sessions")
        assert status == 200
        assert [(row["id"], row["cwd"]) for row in json.loads(body)["sessions"]] == [(session_id, "/srv/served")]
        status, _headers, body = request(url, f"/ui/api/sessions/{session_id}")
        assert status == 200 and json.loads(body)["id"] == session_id
        status, _headers, body = request(url, "/ui/api/sessions", headers={"Origin": "http://evil.example"})
        assert status == 403 and "cross-origin" in json.loads(body)["error"]
        status, _headers, _body = request(url, "/ui/", token=None, headers={"Host": "attacker.example"})
        assert status == 403
        status, _headers, _body = request(url, "/rpc", token=None, body=created)
        assert status == 401  # the JSON-RPC endpoint is guarded as before

        parts = urlsplit(url)
        live = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
        try:
            bearer = {"Authorization": f"Bearer {TOKEN}"}
            live.request("GET", f"/ui/api/sessions/{session_id}/live?from=0", headers=bearer)
            response = live.getresponse()
            assert response.status == 200 and response.getheader("content-type") == "text/event-stream"
            assert response.readline() == b"event: ready\n"
        finally:
            live.close()


def test_no_ui_leaves_it_out(tmp_path: Path) -> None:
    with http_server(tmp_path, None, "--no-ui") as (url, _process):
        status, _headers, _body = request(url, "/ui/", token=None)
        assert status == 404
        status, _headers, body = request(url, "/health", token=None)
        assert status == 200 and json.loads(body) == {"ok": True}
