"""The HTTP transport of :class:`~dshpy.sdk.AsyncHarnessClient`: httpx's ``AsyncClient``, no threads.

Requests are coroutines on the caller's event loop; the event stream (``GET
/events``) is read by one task that fans notifications out to asyncio queues.
Same wire, errors and stream routing as :class:`~dshpy.sdk.transport.HttpTransport`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Mapping
from typing import Any

import httpx2

from .transport import HttpEndpoint, Notification, SseReader, TransportClosedError, rpc_answer, rpc_body, unanswered

__all__ = ["AsyncHttpTransport"]


class AsyncHttpTransport:
    """``POST /rpc`` and ``GET /events`` of one ``dshpy serve --http`` server, as coroutines.

    Use it on one event loop: the httpx client and the stream reader belong to the
    loop that first used them. :meth:`close` ends the stream and the connections.
    """

    def __init__(self, url: str, *, token: str | None = None, timeout: float = 600.0) -> None:
        self.endpoint = HttpEndpoint.parse(url, token)
        self.timeout = timeout
        self.stream_id: str | None = None
        self._client = httpx2.AsyncClient(
            timeout=httpx2.Timeout(timeout, connect=min(timeout, 30.0)),
            limits=httpx2.Limits(max_connections=16, max_keepalive_connections=8, keepalive_expiry=4.0),
        )
        self._ids = itertools.count(1)
        self._queues: list[asyncio.Queue[Notification | None]] = []
        self._reader: asyncio.Task[None] | None = None
        self._opening = asyncio.Lock()
        self._closed = False

    async def request(self, method: str, params: Mapping[str, Any] | None = None) -> Any:
        """Call ``method``; its result, or :class:`HarnessError` with the server's code.

        An unreachable or closed server is :class:`TransportClosedError`. A request sent
        on a kept-alive connection the server had already closed is resent once: it
        never reached the server, so resending cannot run it twice.
        """
        if self._closed:
            raise TransportClosedError("the client was closed")
        body = rpc_body(next(self._ids), method, params)
        headers = self.endpoint.rpc_headers(self.stream_id)
        try:
            try:
                response = await self._client.post(self.endpoint.rpc_url, content=body, headers=headers)
            except httpx2.RemoteProtocolError as error:
                if not unanswered(error):
                    raise
                response = await self._client.post(self.endpoint.rpc_url, content=body, headers=headers)
        except httpx2.TransportError as error:
            where = f"{self.endpoint.host}:{self.endpoint.port}"
            raise TransportClosedError(f"cannot reach {where}: {error}") from None
        except RuntimeError as error:  # the httpx client was closed under us
            raise TransportClosedError(f"the client was closed: {error}") from None
        return rpc_answer(response.status_code, response.content)

    async def subscribe(self) -> asyncio.Queue[Notification | None]:
        """A queue of every notification the stream carries (``None`` when it ends); opens the stream once."""
        q: asyncio.Queue[Notification | None] = asyncio.Queue()
        self._queues.append(q)
        async with self._opening:
            if self._reader is None:
                await self._open_events()
        return q

    def unsubscribe(self, q: asyncio.Queue[Notification | None]) -> None:
        """Stop filling ``q``; the event stream itself stays open for the other subscribers."""
        with contextlib.suppress(ValueError):
            self._queues.remove(q)

    def _publish(self, item: Notification | None) -> None:
        for q in list(self._queues):
            q.put_nowait(item)

    async def _open_events(self) -> None:
        timeout = httpx2.Timeout(30.0, read=None)  # the server pings every 15 s; a stream may idle for hours
        request = self._client.build_request(
            "GET", self.endpoint.events_url, headers=self.endpoint.events_headers(), timeout=timeout
        )
        try:
            response = await self._client.send(request, stream=True)
        except httpx2.TransportError as error:
            raise TransportClosedError(f"cannot open the event stream: {error}") from None
        if response.status_code != 200:
            content = await response.aread()
            await response.aclose()
            rpc_answer(response.status_code, content)  # raises HarnessError naming the status
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._reader = asyncio.ensure_future(self._read_events(response, ready))
        try:
            await asyncio.wait_for(asyncio.shield(ready), 10)
        except TimeoutError:
            raise TransportClosedError("the event stream did not start") from None

    async def _read_events(self, response: httpx2.Response, ready: asyncio.Future[None]) -> None:
        reader = SseReader()
        try:
            async for line in response.aiter_lines():
                item = reader.feed(line)
                if item is None:
                    continue
                kind, value = item
                if kind == "ready":
                    self.stream_id = value
                    if not ready.done():
                        ready.set_result(None)
                else:
                    self._publish(value)
        except (OSError, ValueError, httpx2.HTTPError):
            pass
        finally:
            with contextlib.suppress(Exception):
                await response.aclose()
            self._publish(None)

    async def close(self) -> None:
        """End the event stream and the connections; every subscriber's queue gets ``None``, later requests fail."""
        self._closed = True
        reader, self._reader = self._reader, None
        if reader is not None:
            reader.cancel()
            with contextlib.suppress(BaseException):
                await reader
        await self._client.aclose()
        self._publish(None)
