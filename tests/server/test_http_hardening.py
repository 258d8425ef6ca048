"""The HTTP server against hostile clients: web pages (Origin, Content-Type, shutdown), slowloris, connection floods.

Real server processes on loopback, a real HTTP client (httpx) and raw sockets.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import socket
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx2
from server_support import http_server


def _rpc(url: str, method: str, params: Any = None, headers: dict[str, str] | None = None) -> httpx2.Response:
    frame: dict[str, Any] = {"jsonrpc": "2.0", "id": 1, "method": method}
    if params is not None:
        frame["params"] = params
    all_headers = {"Content-Type": "application/json", **(headers or {})}
    return httpx2.post(url + "/rpc", content=json.dumps(frame).encode(), headers=all_headers, timeout=10)


def _sessions(url: str, headers: dict[str, str] | None = None) -> list[str]:
    response = _rpc(url, "session.list", headers=headers)
    assert response.status_code == 200, response.text
    return [s["id"] for s in response.json()["result"]["sessions"]]


EVIL = "https://evil.example"


def test_a_web_page_cannot_drive_the_server(tmp_path: Path) -> None:
    """The issue's attack: text/plain POSTs with a foreign Origin created, deleted and shut down. Now: nothing."""
    with http_server(tmp_path, None) as (url, process):
        assert _rpc(url, "session.create", {"sessionId": "kept"}).status_code == 200
        plain = {"Origin": EVIL, "Content-Type": "text/plain"}
        for method, params in (
            ("session.create", {"sessionId": "evil"}),
            ("session.delete", {"sessionId": "kept"}),
            ("shutdown", None),
        ):
            response = _rpc(url, method, params, plain)
            assert response.status_code == 403, (method, response.status_code, response.text)
            assert "cross-origin" in response.json()["error"]
            assert _rpc(url, method, params, {"Origin": EVIL}).status_code == 403  # JSON does not help
        assert _rpc(url, "session.create", {"sessionId": "evil"}, {"Origin": "null"}).status_code == 403
        # no Origin, but the browser says the request is cross-site (e.g. a no-cors fetch)
        assert _rpc(url, "session.create", {"sessionId": "evil"}, {"Sec-Fetch-Site": "cross-site"}).status_code == 403
        assert httpx2.get(url + "/events", headers={"Origin": EVIL}, timeout=10).status_code == 403
        # a simple (preflight-free) form post without Origin still needs JSON
        response = _rpc(url, "session.create", {"sessionId": "evil"}, {"Content-Type": "text/plain"})
        assert response.status_code == 415 and "application/json" in response.json()["error"]
        assert _rpc(url, "session.list", None, {"Content-Type": "application/x-www-form-urlencoded"}).status_code == 415
        assert process.poll() is None
        assert _sessions(url) == ["kept"]
        # the server's own origin (a page it serves) is allowed
        own = {"Origin": url, "Sec-Fetch-Site": "same-origin"}
        assert _rpc(url, "session.create", {"sessionId": "mine"}, own).status_code == 200
        assert sorted(_sessions(url)) == ["kept", "mine"]

    with http_server(tmp_path, None, "--allowed-origin", "https://ui.example") as (url, _process):
        assert _rpc(url, "session.list", None, {"Origin": "https://ui.example"}).status_code == 200
        assert _rpc(url, "session.list", None, {"Origin": EVIL}).status_code == 403


def test_shutdown_over_http_is_refused_unless_allowed(tmp_path: Path) -> None:
    with http_server(tmp_path, None) as (url, process):
        response = _rpc(url, "shutdown")
        assert response.status_code == 200
        error = response.json()["error"]
        assert error["code"] == -32601 and "--allow-http-shutdown" in error["message"]
        escaped = b'{"jsonrpc":"2.0","id":2,"method":"shut\\u0064own"}'  # the same method, spelled differently
        response = httpx2.post(url + "/rpc", content=escaped, headers={"Content-Type": "application/json"})
        assert response.json()["error"]["code"] == -32601
        time.sleep(0.3)
        assert process.poll() is None and _sessions(url) == []
    with http_server(tmp_path, None, "--allow-http-shutdown") as (url, process):
        assert _rpc(url, "shutdown").json()["result"] == {}
        assert process.wait(10) == 0


def _connect(url: str) -> socket.socket:
    parts = urlsplit(url)
    sock = socket.create_connection((parts.hostname, parts.port), timeout=5)
    sock.setblocking(False)
    return sock


def _closed_by_server(sock: socket.socket) -> bool:
    """True once the server has closed ``sock`` (EOF or reset); reads and drops whatever it answered first."""
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return True
    except BlockingIOError:
        return False
    except OSError:
        return True


def test_slowloris_is_closed_after_the_head_timeout_even_before_authentication(tmp_path: Path) -> None:
    head = b"POST /rpc HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer tok\r\nX-Padding: " + b"a" * 200
    args = ("--token", "tok", "--head-timeout", "2", "--body-timeout", "3")
    with http_server(tmp_path, None, *args) as (url, _process):
        socks = [_connect(url) for _ in range(40)]
        opened = time.monotonic()
        closed_after: dict[int, float] = {}
        served: list[float] = []
        sent = 0
        while len(closed_after) < len(socks) and time.monotonic() - opened < 8:
            for index, sock in enumerate(socks):  # one header byte a second on every socket
                if index not in closed_after:
                    with contextlib.suppress(OSError):
                        sock.send(head[sent : sent + 1])
            sent += 1
            tick = time.monotonic()
            while time.monotonic() - tick < 1.0:
                readable, _, _ = select.select([s for i, s in enumerate(socks) if i not in closed_after], [], [], 0.1)
                for sock in readable:
                    if _closed_by_server(sock):
                        closed_after[socks.index(sock)] = time.monotonic() - opened
            started = time.monotonic()  # a normal client is served meanwhile
            assert _sessions(url, {"Authorization": "Bearer tok"}) == []
            served.append(time.monotonic() - started)
        for sock in socks:
            sock.close()
        assert len(closed_after) == len(socks), f"{len(socks) - len(closed_after)} slowloris sockets still open"
        assert min(closed_after.values()) > 1.5 and max(closed_after.values()) < 4.5, closed_after
        assert max(served) < 2.0, served

        # a complete head, then a body trickled byte by byte: closed after the body timeout
        body_head = b"POST /rpc HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer tok\r\n"
        trickler = _connect(url)
        trickler.send(body_head + b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
        opened = time.monotonic()
        while not _closed_by_server(trickler) and time.monotonic() - opened < 8:
            with contextlib.suppress(OSError):
                trickler.send(b" ")
            time.sleep(0.25)
        assert 2.5 < time.monotonic() - opened < 5, "a trickled body was not cut off by --body-timeout"
        trickler.close()


def _fd_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_a_connection_flood_is_capped_and_a_normal_client_is_still_served(tmp_path: Path) -> None:
    args = ("--max-connections", "32", "--max-streams", "4", "--head-timeout", "30")
    with http_server(tmp_path, None, *args) as (url, process):
        assert _sessions(url) == []
        baseline = _fd_count(process.pid)
        flood = [_connect(url) for _ in range(300)]  # idle: connect and say nothing
        time.sleep(0.5)
        started = time.monotonic()
        assert _sessions(url) == []
        assert time.monotonic() - started < 2.0
        held = _fd_count(process.pid) - baseline
        assert held <= 32 + 2, f"the server holds {held} descriptors for 300 idle connections"
        time.sleep(0.2)
        evicted = sum(_closed_by_server(sock) for sock in flood)
        assert evicted >= 300 - 32
        for sock in flood:
            sock.close()

        # event streams are busy connections, never evicted: their own cap keeps room for requests
        with httpx2.Client(timeout=10) as client:
            streams = [client.send(client.build_request("GET", url + "/events"), stream=True) for _ in range(4)]
            assert all(stream.status_code == 200 for stream in streams)
            refused = client.get(url + "/events")
            assert refused.status_code == 503 and "event streams" in refused.json()["error"]
            assert _sessions(url) == []
            for stream in streams:
                stream.close()


def test_when_every_connection_is_busy_a_newcomer_is_refused_at_once(tmp_path: Path) -> None:
    with http_server(tmp_path, None, "--max-connections", "3", "--max-streams", "3") as (url, process):
        with httpx2.Client(timeout=10) as client:
            streams = [client.send(client.build_request("GET", url + "/events"), stream=True) for _ in range(3)]
            assert all(stream.status_code == 200 for stream in streams)
            started = time.monotonic()
            refused = httpx2.post(url + "/rpc", content=b"{}", headers={"Content-Type": "application/json"})
            assert refused.status_code == 503 and "too many open connections" in refused.json()["error"]
            assert time.monotonic() - started < 1.0
            streams[0].close()
            time.sleep(0.2)
            assert _sessions(url) == []  # a slot freed: served again
            for stream in streams[1:]:
                stream.close()
        assert process.poll() is None
