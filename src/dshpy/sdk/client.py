"""``HarnessClient`` / ``AsyncHarnessClient``: sessions and turns on a dshpy server.

::

    with dshpy.HarnessClient(profile="sdk") as client:       # spawns `dshpy serve --stdio`
        session = client.create_session()
        response = client.send_message(session.id, "Hello")
        print(response.content, response.finish_reason, response.usage)

``HarnessClient(url="http://127.0.0.1:8765", token=...)`` talks to ``dshpy serve
--http`` instead. The profile names a table of ``$DSHPY_HOME/config.toml`` (store,
model, base URL, max tokens); the spawned server uses it.
"""

from __future__ import annotations

import asyncio
import os
import queue
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .transport import HarnessError, HttpTransport, StdioTransport, Transport, TransportClosedError

if TYPE_CHECKING:
    from .async_transport import AsyncHttpTransport

__all__ = ["AsyncHarnessClient", "HarnessClient", "HarnessError", "Response", "SessionRecord", "TransportClosedError"]


@dataclass(frozen=True, slots=True)
class SessionRecord:
    """A session as the server describes it (``raw`` keeps everything it sent)."""

    id: str
    cwd: str | None = None
    parent_session: str | None = None
    event_count: int = 0
    created_at: int | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def context(self) -> dict[str, Any] | None:
        """How full the context window is, from ``session.get``: ``{used, window, ratio}`` (``None`` elsewhere)."""
        context = self.raw.get("context")
        return dict(context) if isinstance(context, Mapping) else None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SessionRecord:
        """Read the session info of ``session.create``/``fork``/``get``/``list``; missing fields keep their defaults."""
        return cls(
            id=str(data.get("id") or data.get("sessionId")),
            cwd=data.get("cwd"),
            parent_session=data.get("parentSession"),
            event_count=int(data.get("eventCount") or 0),
            created_at=data.get("createdAt"),
            raw=dict(data),
        )


@dataclass(frozen=True, slots=True)
class Response:
    """How one turn ended: the final assistant ``content``, ``finish_reason`` (``completed``, …), ``usage``."""

    session_id: str
    content: str
    finish_reason: str
    usage: dict[str, int]
    events: list[dict[str, Any]]
    turn: int
    message_id: str
    reason: dict[str, Any]

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Response:
        """Read the answer of ``session.send`` (also the result a streamed turn ends with); needs ``sessionId``."""
        return cls(
            session_id=str(data["sessionId"]),
            content=str(data.get("content", "")),
            finish_reason=str(data.get("finishReason")),
            usage=dict(data.get("usage") or {}),
            events=list(data.get("events") or []),
            turn=int(data.get("turn", 0)),
            message_id=str(data.get("messageId", "")),
            reason=dict(data.get("reason") or {}),
        )


def _search_params(query: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """``session.search`` params: the query and the options given (``None`` left out, names in camelCase)."""
    wire = {"session_id": "sessionId"}
    params: dict[str, Any] = {"query": query}
    for name, value in options.items():
        if value is not None and value is not False:
            params[wire.get(name, name)] = list(value) if isinstance(value, tuple) else value
    return params


def _create_params(session_id: str | None, cwd: str | None) -> dict[str, Any]:
    params: dict[str, Any] = {}
    if session_id is not None:
        params["sessionId"] = session_id
    if cwd is not None:
        params["cwd"] = cwd
    return params


def _fork_params(session_id: str, boundary: int | None, child_id: str | None) -> dict[str, Any]:
    params: dict[str, Any] = {"sessionId": session_id}
    if boundary is not None:
        params["boundary"] = boundary
    if child_id is not None:
        params["childSessionId"] = child_id
    return params


def _page_params(
    session_id: str, seq: int, limit: int | None, collected: int, types: Sequence[str] | None
) -> dict[str, Any]:
    page_size = 1000 if limit is None else min(1000, limit - collected)
    params: dict[str, Any] = {"sessionId": session_id, "fromSeq": seq, "limit": page_size}
    if types is not None:
        params["types"] = list(types)
    return params


class HarnessClient:
    """A synchronous client; thread-safe (requests may overlap, e.g. two sessions at once).

    ``timeout`` bounds each call to the server. ``connect_timeout``, ``read_timeout``
    and ``total_timeout`` (seconds) are the server's limits for its model requests;
    like ``model`` and ``base_url`` they override the profile and apply to the server
    this client starts (a server at ``url`` keeps its own settings), as do
    ``context_window`` (tokens) and ``auto_compact`` (``False``: no automatic
    compaction; default: ``config.toml``'s ``[compaction] auto``).
    """

    def __init__(
        self,
        profile: str = "sdk",
        *,
        url: str | None = None,
        token: str | None = None,
        store: str | None = None,
        model: str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        env: Mapping[str, str] | None = None,
        command: Sequence[str] | None = None,
        timeout: float | None = None,
        connect_timeout: float | None = None,
        read_timeout: float | None = None,
        total_timeout: float | None = None,
        context_window: int | None = None,
        auto_compact: bool | None = None,
    ) -> None:
        self.profile = profile
        self.timeout = timeout
        self.last_response: Response | None = None
        self.transport: Transport
        if url is not None:
            self.transport = HttpTransport(url, token=token if token is not None else os.environ.get("DSHPY_TOKEN"))
        else:
            args = list(command) if command is not None else [sys.executable, "-m", "dshpy", "serve", "--stdio"]
            args += ["--profile", profile]
            if store is not None:
                args += ["--store", store]
            if model is not None:
                args += ["--model", model]
            if base_url is not None:
                args += ["--base-url", base_url]
            for flag, seconds in (
                ("--connect-timeout", connect_timeout),
                ("--read-timeout", read_timeout),
                ("--total-timeout", total_timeout),
            ):
                if seconds is not None:
                    args += [flag, repr(float(seconds))]
            if context_window is not None:
                args += ["--context-window", str(int(context_window))]
            if auto_compact is not None:
                args.append("--auto-compact" if auto_compact else "--no-auto-compact")
            environ = dict(env or {})
            if api_key is not None:
                environ["DEEPSEEK_API_KEY"] = api_key
            self.transport = StdioTransport(args, env=environ)

    # -- plumbing -------------------------------------------------------------------

    def request(self, method: str, params: Mapping[str, Any] | None = None) -> Any:
        """Call any server method; raises :class:`HarnessError` with the server's code."""
        return self.transport.request(method, params, self.timeout)

    def close(self) -> None:
        """Shut the server down (stdio) or drop the connections (HTTP)."""
        self.transport.close()

    def __enter__(self) -> HarnessClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # -- sessions -------------------------------------------------------------------

    def create_session(self, session_id: str | None = None, *, cwd: str | None = None) -> SessionRecord:
        """Create a session (id generated unless given) and hold it open on the server.

        ``cwd`` is resolved on the server, relative to its working directory. An id that
        is taken raises :class:`HarnessError` with code -32002.
        """
        return SessionRecord.from_json(self.request("session.create", _create_params(session_id, cwd)))

    def list_sessions(self) -> list[SessionRecord]:
        """Every session in the server's store, not only those this client created."""
        return [SessionRecord.from_json(item) for item in self.request("session.list")["sessions"]]

    def get_session(self, session_id: str, *, projections: bool = True) -> SessionRecord:
        """Header, counts and (``projections``) the projection snapshot, all in ``.raw``."""
        return SessionRecord.from_json(
            self.request("session.get", {"sessionId": session_id, "projections": projections})
        )

    def fork_session(
        self, session_id: str, boundary: int | None = None, *, child_id: str | None = None
    ) -> SessionRecord:
        """A new session with ``session_id``'s events up to ``boundary`` (default: all of them).

        A boundary past the end or inside an open turn, an unknown parent or a taken
        ``child_id`` raises :class:`HarnessError` -32003, whose ``data["code"]`` names
        the reason.
        """
        return SessionRecord.from_json(self.request("session.fork", _fork_params(session_id, boundary, child_id)))

    def delete_session(self, session_id: str, *, detach_forks: bool = False) -> None:
        """Delete a session from the store.

        Refused (-32002) while a turn runs on it: :meth:`cancel` first. A session whose
        history forks share is refused unless ``detach_forks`` copies it into them.
        """
        self.request("session.delete", {"sessionId": session_id, "detachForks": detach_forks})

    def cancel(self, session_id: str) -> bool:
        """Cancel the session's running turn and drop its queued prompts; ``True`` if a turn was cancelled.

        The dropped prompts' :meth:`send_message` calls raise :class:`HarnessError` -32002.
        """
        return bool(self.request("session.cancel", {"sessionId": session_id})["cancelled"])

    def events(
        self, session_id: str, from_seq: int = 0, *, limit: int | None = None, types: Sequence[str] | None = None
    ) -> list[dict[str, Any]]:
        """Stored events from ``from_seq`` (wire JSON), paging until ``limit`` (default: all)."""
        collected: list[dict[str, Any]] = []
        seq = from_seq
        while limit is None or len(collected) < limit:
            page = self.request("session.events", _page_params(session_id, seq, limit, len(collected), types))
            collected.extend(page["events"])
            seq = page["nextSeq"]
            if not page["more"]:
                break
        return collected

    # -- search -----------------------------------------------------------------------

    def search(
        self,
        query: str,
        *,
        filters: Mapping[str, Any] | None = None,
        session_id: str | None = None,
        types: Sequence[str] | None = None,
        since: int | str | None = None,
        until: int | str | None = None,
        operators: bool = False,
        limit: int | None = None,
        cursor: str | None = None,
        mode: str | None = None,
    ) -> dict[str, Any]:
        """Full-text search over the server's store: ``{"hits": [...], "nextCursor": ...}`` (``session.search``).

        Each hit names ``sessionId`` and ``seq`` with a ``snippet`` (``text`` and
        ``highlights`` offsets). ``filters`` take camelCase keys (``cwd``, ``state``,
        ``createdFrom``, ``excludeIds``, …). A refused query raises :class:`HarnessError`
        whose ``data["code"]`` is the ``SESSION_QUERY_*`` code. ``mode``: ``"fts"`` (the
        default), ``"semantic"`` or ``"hybrid"`` (the server needs ``dshpy[semantic]``; without
        it the error's code is ``SESSION_QUERY_SEMANTIC_UNAVAILABLE``).
        """
        options = {"filters": filters, "session_id": session_id, "types": types, "since": since, "until": until}
        options |= {"operators": operators, "limit": limit, "cursor": cursor, "mode": mode}
        result: dict[str, Any] = self.request("session.search", _search_params(query, options))
        return result

    def compact_session(self, session_id: str, *, dry_run: bool = False) -> dict[str, Any]:
        """Condense the session's history now (all but the newest message), with the server's model.

        Answers dsh's ``CompactionResult`` (``compactionId``, ``startSeq``, ``summarySeq``,
        ``endSeq``, ``shadowedSeqs``, ``shadowedTokenCount``, …) and ``context``; with
        ``dry_run`` the span it would condense, writing nothing. While a turn runs it
        raises :class:`HarnessError` -32002 (``data["code"] == "busy"``); with nothing to
        compact, -32000 with ``data["code"] == "empty"``.
        """
        return dict(self.request("session.compact", {"sessionId": session_id, "dryRun": dry_run}))

    def context_usage(self, session_id: str) -> dict[str, Any]:
        """How full the session's context window is: ``{used, window, ratio}`` ("62% used" is ``ratio`` 0.62)."""
        return dict(self.request("session.get", {"sessionId": session_id, "projections": False})["context"])

    # -- turns ----------------------------------------------------------------------

    def send_message(self, session_id: str, text: str) -> Response:
        """Run one turn and return how it ended; an unknown id raises :class:`HarnessSessionNotFound` (-32001)."""
        response = Response.from_json(self.request("session.send", {"sessionId": session_id, "text": text}))
        self.last_response = response
        return response

    def stream(self, session_id: str, text: str, *, grace: float = 5.0) -> Iterator[dict[str, Any]]:
        """Run one turn, yielding each event (wire JSON) as it is appended; the result is in :attr:`last_response`."""
        subscription = self.transport.subscribe()
        try:
            future = self.transport.request_async(
                "session.send", {"sessionId": session_id, "text": text, "events": False}
            )
            ended_turns: set[int] = set()
            deadline: float | None = None
            while True:
                if future.done() and deadline is None:
                    error = future.exception()
                    if error is not None:
                        raise error
                    deadline = time.monotonic() + grace
                if deadline is not None:
                    result = future.result()
                    if int(result["turn"]) in ended_turns or time.monotonic() > deadline:
                        break
                try:
                    item = subscription.get(timeout=0.05)
                except queue.Empty:
                    continue
                if item is None:
                    if future.done():
                        continue
                    raise TransportClosedError("the server closed the notification stream")
                method, params = item
                if method != "session.event" or params.get("sessionId") != session_id:
                    continue
                event = params.get("event")
                if isinstance(event, dict):
                    if event.get("type") == "turn/end" and isinstance(event.get("data"), dict):
                        ended_turns.add(int(event["data"].get("turn", -1)))
                    yield event
            self.last_response = Response.from_json(future.result())
        finally:
            self.transport.unsubscribe(subscription)


class AsyncHarnessClient:
    """The same methods as :class:`HarnessClient`, awaitable.

    Over HTTP (``url=...``) it runs on httpx's ``AsyncClient`` on the caller's event
    loop; over stdio each call runs the synchronous client in a worker thread (the
    child process's pipes are read by threads anyway).
    """

    def __init__(self, profile: str = "sdk", **options: Any) -> None:
        self.profile = profile
        self.timeout: float | None = options.get("timeout")
        self._last: Response | None = None
        self._http: AsyncHttpTransport | None = None
        self._sync: HarnessClient | None = None
        url = options.get("url")
        if url is not None:
            from .async_transport import AsyncHttpTransport  # httpx loads only for HTTP clients

            token = options.get("token")
            self._http = AsyncHttpTransport(url, token=token if token is not None else os.environ.get("DSHPY_TOKEN"))
        else:
            self._sync = HarnessClient(profile, **options)

    @property
    def last_response(self) -> Response | None:
        """How the last turn run by :meth:`send_message` or :meth:`stream` on this client ended."""
        return self._last

    async def request(self, method: str, params: Mapping[str, Any] | None = None) -> Any:
        """Call any server method; raises :class:`HarnessError` with the server's code."""
        if self._http is not None:
            return await asyncio.wait_for(self._http.request(method, params), self.timeout)
        assert self._sync is not None
        return await asyncio.to_thread(self._sync.request, method, params)

    async def create_session(self, session_id: str | None = None, *, cwd: str | None = None) -> SessionRecord:
        """See :meth:`HarnessClient.create_session`."""
        return SessionRecord.from_json(await self.request("session.create", _create_params(session_id, cwd)))

    async def list_sessions(self) -> list[SessionRecord]:
        """See :meth:`HarnessClient.list_sessions`."""
        return [SessionRecord.from_json(item) for item in (await self.request("session.list"))["sessions"]]

    async def get_session(self, session_id: str, *, projections: bool = True) -> SessionRecord:
        """See :meth:`HarnessClient.get_session`."""
        params = {"sessionId": session_id, "projections": projections}
        return SessionRecord.from_json(await self.request("session.get", params))

    async def fork_session(
        self, session_id: str, boundary: int | None = None, *, child_id: str | None = None
    ) -> SessionRecord:
        """See :meth:`HarnessClient.fork_session`."""
        params = _fork_params(session_id, boundary, child_id)
        return SessionRecord.from_json(await self.request("session.fork", params))

    async def delete_session(self, session_id: str, *, detach_forks: bool = False) -> None:
        """See :meth:`HarnessClient.delete_session`."""
        await self.request("session.delete", {"sessionId": session_id, "detachForks": detach_forks})

    async def cancel(self, session_id: str) -> bool:
        """See :meth:`HarnessClient.cancel`."""
        return bool((await self.request("session.cancel", {"sessionId": session_id}))["cancelled"])

    async def events(
        self, session_id: str, from_seq: int = 0, *, limit: int | None = None, types: Sequence[str] | None = None
    ) -> list[dict[str, Any]]:
        """Stored events from ``from_seq`` (wire JSON), paging until ``limit`` (default: all)."""
        collected: list[dict[str, Any]] = []
        seq = from_seq
        while limit is None or len(collected) < limit:
            page = await self.request("session.events", _page_params(session_id, seq, limit, len(collected), types))
            collected.extend(page["events"])
            seq = page["nextSeq"]
            if not page["more"]:
                break
        return collected

    async def search(
        self,
        query: str,
        *,
        filters: Mapping[str, Any] | None = None,
        session_id: str | None = None,
        types: Sequence[str] | None = None,
        since: int | str | None = None,
        until: int | str | None = None,
        operators: bool = False,
        limit: int | None = None,
        cursor: str | None = None,
        mode: str | None = None,
    ) -> dict[str, Any]:
        """See :meth:`HarnessClient.search`."""
        options = {"filters": filters, "session_id": session_id, "types": types, "since": since, "until": until}
        options |= {"operators": operators, "limit": limit, "cursor": cursor, "mode": mode}
        result: dict[str, Any] = await self.request("session.search", _search_params(query, options))
        return result

    async def compact_session(self, session_id: str, *, dry_run: bool = False) -> dict[str, Any]:
        """See :meth:`HarnessClient.compact_session`."""
        return dict(await self.request("session.compact", {"sessionId": session_id, "dryRun": dry_run}))

    async def context_usage(self, session_id: str) -> dict[str, Any]:
        """See :meth:`HarnessClient.context_usage`."""
        params = {"sessionId": session_id, "projections": False}
        return dict((await self.request("session.get", params))["context"])

    async def send_message(self, session_id: str, text: str) -> Response:
        """See :meth:`HarnessClient.send_message` (an unknown id raises :class:`HarnessSessionNotFound`)."""
        response = Response.from_json(await self.request("session.send", {"sessionId": session_id, "text": text}))
        self._last = response
        return response

    async def stream(self, session_id: str, text: str, *, grace: float = 5.0) -> AsyncIterator[dict[str, Any]]:
        """Run one turn, yielding each event as it is appended; the result is in :attr:`last_response`."""
        if self._http is not None:
            async for event in self._stream_http(self._http, session_id, text, grace):
                yield event
            return
        async for event in self._stream_threaded(session_id, text):
            yield event

    async def _stream_http(
        self, http: AsyncHttpTransport, session_id: str, text: str, grace: float
    ) -> AsyncIterator[dict[str, Any]]:
        subscription = await http.subscribe()
        params = {"sessionId": session_id, "text": text, "events": False}
        turn = asyncio.ensure_future(self.request("session.send", params))
        try:
            ended_turns: set[int] = set()
            deadline: float | None = None
            while True:
                if turn.done() and deadline is None:
                    turn.result()  # raises the call's error
                    deadline = time.monotonic() + grace
                if deadline is not None and (int(turn.result()["turn"]) in ended_turns or time.monotonic() > deadline):
                    break
                try:
                    item = await asyncio.wait_for(subscription.get(), 0.05)
                except TimeoutError:
                    continue
                if item is None:
                    if turn.done():
                        continue
                    raise TransportClosedError("the server closed the notification stream")
                method, notification = item
                if method != "session.event" or notification.get("sessionId") != session_id:
                    continue
                event = notification.get("event")
                if isinstance(event, dict):
                    if event.get("type") == "turn/end" and isinstance(event.get("data"), dict):
                        ended_turns.add(int(event["data"].get("turn", -1)))
                    yield event
            self._last = Response.from_json(turn.result())
        finally:
            http.unsubscribe(subscription)
            if not turn.done():
                turn.cancel()

    async def _stream_threaded(self, session_id: str, text: str) -> AsyncIterator[dict[str, Any]]:
        sync = self._sync
        assert sync is not None
        loop = asyncio.get_running_loop()
        items: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        stop = threading.Event()

        def pump() -> None:
            try:
                for event in sync.stream(session_id, text):
                    loop.call_soon_threadsafe(items.put_nowait, ("event", event))
                    if stop.is_set():
                        break
                loop.call_soon_threadsafe(items.put_nowait, ("end", None))
            except BaseException as error:
                loop.call_soon_threadsafe(items.put_nowait, ("error", error))

        worker = loop.run_in_executor(None, pump)
        try:
            while True:
                kind, value = await items.get()
                if kind == "end":
                    self._last = sync.last_response
                    break
                if kind == "error":
                    raise value
                yield value
        finally:
            stop.set()
            await worker

    async def close(self) -> None:
        """Shut the server down (stdio) or drop the connections (HTTP)."""
        if self._http is not None:
            await self._http.close()
        elif self._sync is not None:
            await asyncio.to_thread(self._sync.close)

    async def __aenter__(self) -> AsyncHarnessClient:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.close()
