"""``dshpy ui``: dshpy's HTTP server (JSON-RPC, events, health) with the web UI mounted under ``/ui/``.

The UI is served by the same :class:`~dshpy.server.http.HttpServer` (uvicorn, the
same :class:`~dshpy.server.http_guard.RequestGuard`), on loopback only. A token is
always set (the given one, else a fresh random one): any local user could otherwise
read every session through the port. It travels in the URL's fragment
(``/ui/#token=…``), which browsers never send to the server or in a Referer.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable
from dataclasses import dataclass

from dshpy.server.http import HttpServer
from dshpy.server.http_guard import is_loopback
from dshpy.server.limits import ServerLimits
from dshpy.server.methods import Runtime
from dshpy.storage.contract import SessionStore

from .data import CostEstimate, UiData
from .routes import UI_PREFIX, mount_ui

__all__ = ["LIVE_IDLE_SECONDS", "UiServer", "ui_url"]

LIVE_IDLE_SECONDS = 10.0
"""How long the UI's server keeps a session it forked (or was prompted through JSON-RPC) open for writing once
idle: briefly, so that its writer lease does not keep an agent started afterwards from continuing it."""


def ui_url(host: str, port: int, token: str) -> str:
    """The address to open: the page, with the token in the fragment."""
    name = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return f"http://{name}:{port}{UI_PREFIX}/#token={token}"


@dataclass
class UiServer:
    """The UI and the JSON-RPC endpoint over ``store`` on ``host``:``port`` (0: any free port)."""

    store: SessionStore
    host: str = "127.0.0.1"
    port: int = 8766
    token: str | None = None
    cost: CostEstimate | None = None

    def __post_init__(self) -> None:
        if not is_loopback(self.host):
            raise ValueError(f"dshpy ui serves loopback only, not {self.host!r} (use 127.0.0.1, ::1 or localhost)")
        self.token = self.token or secrets.token_urlsafe(24)
        runtime = Runtime(self.store, limits=ServerLimits(idle_seconds=LIVE_IDLE_SECONDS))
        self.http = HttpServer(runtime, host=self.host, port=self.port, token=self.token)
        self.data = UiData(self.store, cost=self.cost)
        self.http.app, self._stop_live = mount_ui(self.http.app, self.data, self.http.guard, runtime.streams)

    @property
    def url(self) -> str:
        """The page's address with the token (the real port once started)."""
        assert self.token is not None
        return ui_url(self.host, self.http.port, self.token)

    async def start(self) -> None:
        """Bind and serve in the background (:attr:`url` then names the real port)."""
        await self.http.start()
        self.data.warm()

    async def stop(self) -> None:
        """End the live views (their follows stop within one poll), then the server."""
        self._stop_live()
        await asyncio.sleep(0.05)
        await self.http.stop()

    async def serve(self, ready: Callable[[UiServer], None] | None = None) -> None:
        """Serve until cancelled (Ctrl-C)."""
        await self.start()
        try:
            if ready is not None:
                ready(self)
            await self.http.runtime.closed.wait()
        finally:
            await self.stop()
