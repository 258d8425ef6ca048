"""The web UI's HTTP surface, mounted in front of the JSON-RPC app under ``/ui/``.

* ``GET /ui/`` and ``GET /ui/assets/<file>``: the page, its script and its style, from
  the package (no CDN). They hold no data, so a browser may fetch them without the
  token (it cannot send one for a page or a ``<script src>``); Host and Origin are
  checked as for everything else.
* ``GET /ui/api/…``: JSON over the store, and ``…/live`` (Server-Sent Events following
  a session: each committed event as a ``data:`` line, and while this server's own
  agent streams an answer in it, the answer's frames as ``event: stream``, see
  :mod:`dshpy.server.assistant_stream`). These need the bearer token when one is set, exactly like ``POST /rpc``:
  the page reads the token from its URL fragment (never sent to the server) and sends
  it as ``Authorization: Bearer``.

Every UI response carries ``Content-Security-Policy: default-src 'self'`` (no inline
script, no foreign origin), ``X-Content-Type-Options: nosniff`` and no-referrer;
everything else is passed to the wrapped app unchanged.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from dshpy.core.ids import check_session_id
from dshpy.core.json import dumps, thaw
from dshpy.errors import CorruptSessionError, DshError, InvalidSessionIdError, SessionNotFound
from dshpy.query.errors import QueryError, QueryNotFoundError
from dshpy.server.assistant_stream import AssistantStreams, Frame
from dshpy.server.http_guard import RequestGuard

from .data import UiData

__all__ = ["ASSETS", "CSP", "UI_PREFIX", "mount_ui"]

UI_PREFIX = "/ui"
CSP = "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
ASSETS = {"app.js": "text/javascript", "app.css": "text/css", "favicon.svg": "image/svg+xml"}
MAX_LIVE_STREAMS = 16
LIVE_POLL_SECONDS = 0.2
LIVE_PING_SECONDS = 15.0
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
_SECURITY = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
}


def _asset(name: str) -> bytes:
    return resources.files("dshpy.ui").joinpath("assets", name).read_bytes()


def _json(value: Any, status: int = 200) -> Response:
    headers = {**_SECURITY, "cache-control": "no-store"}
    return Response(dumps(value), status, headers, media_type="application/json")


def _error(status: int, message: str) -> Response:
    return _json({"error": message}, status)


async def _answer(work: Callable[[], Any]) -> Response:
    """Run a store query in a worker thread; map the store's errors to HTTP statuses with their message."""
    try:
        return _json(await run_in_threadpool(work))
    except (SessionNotFound, QueryNotFoundError) as error:
        return _error(404, str(error))
    except (InvalidSessionIdError, QueryError, ValueError) as error:
        return _error(400, str(error))
    except CorruptSessionError as error:
        return _error(422, str(error))
    except DshError as error:  # the store failed (I/O, a lost connection): say so, the page shows it
        return _error(500, str(error))


class _LiveStream(Response):
    """``text/event-stream`` of one session's events from ``from_seq`` on, as writers commit them.

    A worker thread runs the store's follow (LISTEN/NOTIFY or the poll fallback, as the
    backend offers) and hands batches to the event loop; the stream ends when the
    client goes or the server stops.
    """

    def __init__(
        self,
        data: UiData,
        session_id: str,
        from_seq: int,
        live: set[threading.Event],
        streams: AssistantStreams | None,
    ) -> None:
        super().__init__(status_code=200, media_type="text/event-stream")
        self.data = data
        self.session_id = session_id
        self.from_seq = from_seq
        self.live = live
        self.streams = streams

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        stop = threading.Event()
        self.live.add(stop)

        def follow() -> None:
            try:
                for event in self.data.store.follow(
                    self.session_id, self.from_seq, poll_interval=LIVE_POLL_SECONDS, stop=stop
                ):
                    frame = b"data: " + dumps(thaw(event.to_wire())) + b"\n\n"
                    loop.call_soon_threadsafe(queue.put_nowait, frame)
            except Exception as error:  # the stream says why it ended
                message = orjson.dumps({"error": str(error)})
                loop.call_soon_threadsafe(queue.put_nowait, b"event: error\ndata: " + message + b"\n\n")
            finally:
                with contextlib.suppress(RuntimeError):  # the loop is gone: nobody is listening
                    loop.call_soon_threadsafe(queue.put_nowait, None)

        async def watch_disconnect() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            stop.set()
            queue.put_nowait(None)

        def stream(frame: Frame) -> None:  # on the loop, called by the agent that streams: only queue it
            queue.put_nowait(b"event: stream\ndata: " + dumps(frame) + b"\n\n")

        watcher = asyncio.ensure_future(watch_disconnect())
        unwatch = None
        worker = threading.Thread(target=follow, name=f"dshpy-ui-live-{self.session_id[-8:]}", daemon=True)
        headers = [(k.encode(), v.encode()) for k, v in _SECURITY.items()]
        headers += [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-store")]
        try:
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": b"event: ready\ndata: {}\n\n", "more_body": True})
            worker.start()
            if self.streams is not None:
                unwatch = self.streams.watch(self.session_id, stream)
            while not stop.is_set():
                try:
                    frame = await asyncio.wait_for(queue.get(), timeout=LIVE_PING_SECONDS)
                except TimeoutError:
                    frame = b": ping\n\n"
                if frame is None:
                    break
                parts = [frame]
                while not queue.empty():
                    more = queue.get_nowait()
                    if more is None:
                        stop.set()
                        break
                    parts.append(more)
                await send({"type": "http.response.body", "body": b"".join(parts), "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            if unwatch is not None:
                unwatch()
            stop.set()
            watcher.cancel()
            self.live.discard(stop)


def _ui_routes(data: UiData, live: set[threading.Event], streams: AssistantStreams | None) -> Starlette:
    index = _asset("index.html")

    async def page(_request: Request) -> Response:
        return Response(index, 200, {**_SECURITY, "cache-control": "no-store"}, media_type="text/html")

    async def asset(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in ASSETS:
            return _error(404, f"no such asset {name!r}")
        return Response(_asset(name), 200, {**_SECURITY, "cache-control": "no-cache"}, media_type=ASSETS[name])

    def sid(request: Request) -> str:
        return check_session_id(request.path_params["session_id"])

    async def sessions(request: Request) -> Response:
        return await _answer(lambda: data.sessions(request.query_params))

    async def session(request: Request) -> Response:
        return await _answer(lambda: data.session(sid(request)))

    async def transcript(request: Request) -> Response:
        return await _answer(lambda: data.transcript(sid(request), request.query_params))

    async def events(request: Request) -> Response:
        return await _answer(lambda: data.events(sid(request), request.query_params))

    async def usage(request: Request) -> Response:
        return await _answer(lambda: data.usage(sid(request)))

    async def follow(request: Request) -> Response:
        if len(live) >= MAX_LIVE_STREAMS:
            return _error(503, f"too many live views (at most {MAX_LIVE_STREAMS})")
        raw = request.query_params.get("from", "0")
        try:
            session_id = sid(request)
            if not raw.isdigit():
                raise ValueError(f"from must be a non-negative integer, not {raw!r}")
            await run_in_threadpool(data.store.stat, session_id)
        except (InvalidSessionIdError, ValueError) as error:
            return _error(400, str(error))
        except SessionNotFound as error:
            return _error(404, str(error))
        return _LiveStream(data, session_id, int(raw), live, streams)

    async def home(_request: Request) -> Response:
        return RedirectResponse(f"{UI_PREFIX}/", 307)

    api = f"{UI_PREFIX}/api/sessions"
    return Starlette(
        routes=[
            Route(UI_PREFIX, home, methods=["GET"]),
            Route(f"{UI_PREFIX}/", page, methods=["GET"]),
            Route(f"{UI_PREFIX}/assets/{{name}}", asset, methods=["GET"]),
            Route(api, sessions, methods=["GET"]),
            Route(f"{api}/{{session_id}}", session, methods=["GET"]),
            Route(f"{api}/{{session_id}}/transcript", transcript, methods=["GET"]),
            Route(f"{api}/{{session_id}}/events", events, methods=["GET"]),
            Route(f"{api}/{{session_id}}/usage", usage, methods=["GET"]),
            Route(f"{api}/{{session_id}}/live", follow, methods=["GET"]),
        ],
        exception_handlers={404: _not_found, 405: _not_allowed},
    )


async def _not_found(request: Request, _exc: Exception) -> Response:
    return _error(404, f"no such endpoint {request.url.path}")


async def _not_allowed(request: Request, _exc: Exception) -> Response:
    return _error(405, f"{request.method} is not allowed on {request.url.path}")


def _public(path: str) -> bool:
    """The page and its assets: no data, fetched by a browser that cannot send the token."""
    return path in (UI_PREFIX, f"{UI_PREFIX}/") or path.startswith(f"{UI_PREFIX}/assets/")


def mount_ui(
    inner: ASGIApp, data: UiData, guard: RequestGuard, streams: AssistantStreams | None = None
) -> tuple[ASGIApp, Callable[[], None]]:
    """``inner`` with the UI in front of it under ``/ui``, and a function that ends every live view.

    Requests outside ``/ui`` go to ``inner`` untouched (it applies the guard itself).
    ``streams``: the answers the server's runtime streams, which live views show as they grow.
    """
    live: set[threading.Event] = set()
    ui = _ui_routes(data, live, streams)

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if path != UI_PREFIX and not path.startswith(f"{UI_PREFIX}/"):
            await inner(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        refusal = guard.check(headers, token_required=not _public(path))
        if refusal is not None:
            extra = {"www-authenticate": "Bearer"} if refusal.status == 401 else {}
            body = dumps({"error": refusal.message})
            answer = Response(body, refusal.status, {**_SECURITY, **extra}, media_type="application/json")
            await answer(scope, receive, send)
            return
        await ui(scope, receive, send)

    def stop_live() -> None:
        for stop in list(live):
            stop.set()

    return app, stop_live
