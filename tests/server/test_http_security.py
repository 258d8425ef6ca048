"""The HTTP transport: token checks, the bind rule, the size limit."""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

from server_support import http_server, server_env

LIST = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "session.list"}).encode()


def _post(url: str, body: bytes, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    try:
        connection.request("POST", "/rpc", body, {"Content-Type": "application/json", **(headers or {})})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def test_token_missing_wrong_right(tmp_path: Path) -> None:
    with http_server(tmp_path, None, "--token", "s3cret") as (url, _process):
        assert _post(url, LIST)[0] == 401
        assert _post(url, LIST, {"Authorization": "Bearer wrong"})[0] == 401
        assert _post(url, LIST, {"Authorization": "Basic s3cret"})[0] == 401
        status, body = _post(url, LIST, {"Authorization": "Bearer s3cret"})
        assert status == 200 and json.loads(body)["result"] == {"sessions": []}


def test_size_limit_and_bad_frames_over_http(tmp_path: Path) -> None:
    with http_server(tmp_path, None, "--max-request-bytes", "2048") as (url, _process):
        status, _ = _post(url, b"x" * 5000)
        assert status == 413
        status, body = _post(url, b"{nope")
        assert status == 200 and json.loads(body)["error"]["code"] == -32700
        assert _post(url, LIST, {"Host": "evil.example:80"})[0] == 403
        assert json.loads(_post(url, LIST)[1])["result"] == {"sessions": []}


def test_non_loopback_bind_without_token_refuses_to_start(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "dshpy", "serve", "--http", "--host", "0.0.0.0", "--port", "0"],
        env=server_env(tmp_path),
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert result.returncode != 0
    assert b"without a token" in result.stderr
