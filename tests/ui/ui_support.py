"""Helpers for the web UI tests: a real ``UiServer`` on a loopback port, in a background event loop."""

from __future__ import annotations

import asyncio
import http.client
import json
import threading
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from dshpy.storage.contract import SessionStore
from dshpy.testing.showcase import Showcase
from dshpy.ui import UiServer

HOSTILE = '<script>window.__xss = 1</script><img src=x onerror="window.__xss = 2; alert(1)"> & <b>bold?</b>'


@dataclass
class Running:
    server: UiServer
    store: SessionStore
    showcase: Showcase
    hostile_id: str

    @property
    def port(self) -> int:
        return self.server.http.port

    @property
    def token(self) -> str:
        assert self.server.token is not None
        return self.server.token

    def request(
        self,
        path: str,
        *,
        token: str | None = "default",
        headers: dict[str, str] | None = None,
        method: str = "GET",
        body: bytes | None = None,
    ) -> tuple[int, dict[str, str], bytes]:
        """One HTTP request on a fresh connection; ``token="default"`` sends the server's token."""
        sent = dict(headers or {})
        if token == "default":
            token = self.token
        if token is not None:
            sent["Authorization"] = f"Bearer {token}"
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            connection.request(method, path, body=body, headers=sent)
            response = connection.getresponse()
            return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
        finally:
            connection.close()

    def json(self, path: str) -> Any:
        status, _headers, body = self.request(path)
        assert status == 200, body
        return json.loads(body)


def start_ui(store: SessionStore) -> tuple[UiServer, asyncio.AbstractEventLoop, threading.Thread]:
    server = UiServer(store, port=0)
    loop = asyncio.new_event_loop()
    started = threading.Event()

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(server.start())
        started.set()
        loop.run_until_complete(server.http.runtime.closed.wait())

    thread = threading.Thread(target=run, name="ui-server", daemon=True)
    thread.start()
    assert started.wait(30), "the UI server did not start"
    return server, loop, thread


def stop_ui(server: UiServer, loop: asyncio.AbstractEventLoop, thread: threading.Thread) -> None:
    asyncio.run_coroutine_threadsafe(server.stop(), loop).result(30)
    thread.join(30)
    loop.close()


def page_url(running: Running) -> str:
    parts = urlsplit(running.server.url)
    return f"http://127.0.0.1:{running.port}{parts.path}#{parts.fragment}"
