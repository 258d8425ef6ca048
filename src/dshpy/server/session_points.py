"""The store's session lifecycle points, relayed to clients as notifications under the seed's names.

* ``session/created`` ``{sessionId, how}`` — a live session entered service (``how``:
  ``created``, ``opened`` or ``forked``);
* ``session/flush`` ``{sessionId, fromSeq, toSeq}`` — events ``fromSeq`` … ``toSeq``
  are durable (sent after each flush);
* ``session/disposed`` ``{sessionId}`` — the session was closed and its writer released
  (an idle session this server closes for room, too; it reopens on demand).

They go to the peers subscribed to that session, like ``session.event``. The store
reports them in whichever thread did the work (the server opens and creates sessions
in worker threads); they are handed to the event loop, which alone talks to peers.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from typing import Any

from dshpy.storage.contract import SessionStore
from dshpy.storage.notices import SESSION_POINTS, SessionCreated, SessionDisposed, SessionFlushed

__all__ = ["SessionPointRelay", "notification_of"]

log = logging.getLogger("dshpy.server")

Publish = Callable[..., None]
"""``publish(method, params, *session_ids)``: the runtime's notification sender."""


def notification_of(payload: object) -> tuple[str, dict[str, Any]] | None:
    """The notification (method, params) for a store point's payload."""
    if isinstance(payload, SessionCreated):
        return "session/created", {"sessionId": payload.session.id, "how": payload.how}
    if isinstance(payload, SessionFlushed):
        params = {"sessionId": payload.session.id, "fromSeq": payload.first_seq, "toSeq": payload.last_seq}
        return "session/flush", params
    if isinstance(payload, SessionDisposed):
        return "session/disposed", {"sessionId": payload.session_id}
    return None


class SessionPointRelay:
    """Subscribes to one store's points for as long as the server runs (made inside its event loop)."""

    def __init__(self, store: SessionStore, publish: Publish) -> None:
        self._publish = publish
        try:
            self._loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:  # made outside a loop (tests): publish in whichever thread reports
            self._loop = None
        self._thread = threading.get_ident()
        self._stops = [store.on(name, self._relay) for name in SESSION_POINTS]

    def _relay(self, payload: object) -> None:
        notification = notification_of(payload)
        if notification is None:
            return
        method, params = notification
        loop = self._loop
        if loop is None or threading.get_ident() == self._thread:
            self._publish(method, params, params["sessionId"])
        elif not loop.is_closed():
            loop.call_soon_threadsafe(self._publish, method, params, params["sessionId"])

    def stop(self) -> None:
        """Unsubscribe from the store (the server is closing)."""
        for stop in self._stops:
            stop()
        self._stops = []
