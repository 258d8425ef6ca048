"""How a client reaches a server: a ``dshpy serve --stdio`` child process, or HTTP.

Both give :meth:`request` (blocking), :meth:`request_async` (a
:class:`concurrent.futures.Future`) and notification subscriptions (a queue per
subscriber that receives every notification frame's ``(method, params)``).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import queue
import socket
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from dshpy.errors import DshError, SessionNotFound

__all__ = [
    "HarnessError",
    "HarnessSessionNotFound",
    "HttpEndpoint",
    "HttpTransport",
    "Notification",
    "SseReader",
    "StdioTransport",
    "Transport",
    "TransportClosedError",
    "rpc_answer",
    "rpc_body",
    "unanswered",
]

Notification = tuple[str, dict[str, Any]]


class HarnessError(DshError):
    """The server answered an error: ``code``, ``message``, ``data`` (see dshpy.server.protocol)."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(f"{message} (code {code})")
        self.code = code
        self.message = message
        self.data = data


class HarnessSessionNotFound(HarnessError, SessionNotFound):
    """The server has no session with that id (-32001): also a :class:`dshpy.SessionNotFound`.

    So code written against a store (``except dshpy.SessionNotFound``) handles a typo'd id
    the same way through the SDK.
    """

    def __str__(self) -> str:
        return HarnessError.__str__(self)


SESSION_NOT_FOUND_CODE = -32001


def harness_error(code: int, message: str, data: Any = None) -> HarnessError:
    """The :class:`HarnessError` (or its more precise subclass) for an error answer."""
    if code == SESSION_NOT_FOUND_CODE:
        return HarnessSessionNotFound(code, message, data)
    return HarnessError(code, message, data)


class TransportClosedError(HarnessError):
    """The connection to the server is gone."""

    def __init__(self, message: str) -> None:
        super().__init__(-32099, message)


class _Subscribers:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queues: list[queue.Queue[Notification | None]] = []

    def add(self) -> queue.Queue[Notification | None]:
        q: queue.Queue[Notification | None] = queue.Queue()
        with self._lock:
            self._queues.append(q)
        return q

    def remove(self, q: queue.Queue[Notification | None]) -> None:
        with self._lock, contextlib.suppress(ValueError):
            self._queues.remove(q)

    def publish(self, item: Notification | None) -> None:
        with self._lock:
            queues = list(self._queues)
        for q in queues:
            q.put(item)


def _unwrap(frame: Mapping[str, Any]) -> Any:
    error = frame.get("error")
    if isinstance(error, dict):
        raise harness_error(int(error.get("code", -32603)), str(error.get("message", "")), error.get("data"))
    return frame.get("result")


class Transport:
    """What a client needs from a connection: requests and a notification feed.

    Subclasses implement :meth:`request_async` and :meth:`close`; both transports
    are safe to use from several threads at once.
    """

    def __init__(self) -> None:
        self.subscribers = _Subscribers()

    def request_async(self, method: str, params: Mapping[str, Any] | None = None) -> Future[Any]:
        """Send a request without waiting; the future holds the result or raises :class:`HarnessError`."""
        raise NotImplementedError

    def request(self, method: str, params: Mapping[str, Any] | None = None, timeout: float | None = None) -> Any:
        """Send a request and wait for its result (at most ``timeout`` seconds).

        On timeout ``TimeoutError`` is raised here, but the request still runs on the
        server; use ``session.cancel`` to stop a turn.
        """
        return self.request_async(method, params).result(timeout)

    def subscribe(self) -> queue.Queue[Notification | None]:
        """A queue receiving every notification as ``(method, params)``; ``None`` when the connection ends.

        Pass it to :meth:`unsubscribe` when done: an abandoned queue keeps growing.
        """
        return self.subscribers.add()

    def unsubscribe(self, q: queue.Queue[Notification | None]) -> None:
        """Stop filling ``q``; a queue that was not subscribed is ignored."""
        self.subscribers.remove(q)

    def close(self) -> None:
        """End the connection; pending requests fail and subscribers receive ``None``."""
        raise NotImplementedError


class StdioTransport(Transport):
    """Spawns ``args`` (default ``python -m dshpy serve --stdio``) and speaks newline-delimited JSON-RPC."""

    def __init__(
        self,
        args: Sequence[str] | None = None,
        *,
        env: Mapping[str, str] | None = None,
        shutdown_timeout: float = 2.0,
    ) -> None:
        super().__init__()
        command = list(args) if args is not None else [sys.executable, "-m", "dshpy", "serve", "--stdio"]
        environ = dict(os.environ)
        environ.update(env or {})
        self.shutdown_timeout = shutdown_timeout
        self.stderr_tail: deque[str] = deque(maxlen=200)
        self._ids = itertools.count(1)
        self._pending: dict[int, Future[Any]] = {}
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._closed = False
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=environ
        )
        threading.Thread(target=self._read, name="dshpy-sdk-stdout", daemon=True).start()
        threading.Thread(target=self._read_stderr, name="dshpy-sdk-stderr", daemon=True).start()

    def _read(self) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        for line in stdout:
            try:
                frame = json.loads(line)
            except ValueError:
                continue
            if not isinstance(frame, dict):
                continue
            if "method" in frame and "id" not in frame:
                params = frame.get("params")
                self.subscribers.publish((str(frame["method"]), params if isinstance(params, dict) else {}))
                continue
            with self._lock:
                request_id = frame.get("id")
                future = self._pending.pop(request_id, None) if isinstance(request_id, int) else None
            if future is not None and not future.done():
                try:
                    future.set_result(_unwrap(frame))
                except HarnessError as error:
                    future.set_exception(error)
        self._fail_all("the dshpy server exited" + self._diagnostics())

    def _read_stderr(self) -> None:
        stderr = self.process.stderr
        assert stderr is not None
        for raw in stderr:
            self.stderr_tail.append(raw.decode("utf-8", "replace").rstrip())

    def _diagnostics(self) -> str:
        tail = "\n".join(list(self.stderr_tail)[-20:])
        return f"; server stderr:\n{tail}" if tail else ""

    def _fail_all(self, message: str) -> None:
        with self._lock:
            pending, self._pending = self._pending, {}
            self._closed = True
        for future in pending.values():
            if not future.done():
                future.set_exception(TransportClosedError(message))
        self.subscribers.publish(None)

    def request_async(self, method: str, params: Mapping[str, Any] | None = None) -> Future[Any]:
        """Write the request now; raises :class:`TransportClosedError` at once if the server is not running.

        If the server exits before answering, the future fails with
        :class:`TransportClosedError` carrying the tail of its stderr.
        """
        future: Future[Any] = Future()
        with self._lock:
            if self._closed:
                raise TransportClosedError("the dshpy server is not running" + self._diagnostics())
            request_id = next(self._ids)
            self._pending[request_id] = future
        frame: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            frame["params"] = dict(params)
        data = (json.dumps(frame, separators=(",", ":")) + "\n").encode()
        stdin = self.process.stdin
        assert stdin is not None
        try:
            with self._write_lock:
                stdin.write(data)
                stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            with self._lock:
                self._pending.pop(request_id, None)
            raise TransportClosedError("the dshpy server is not running" + self._diagnostics()) from None
        return future

    def close(self) -> None:
        """``shutdown`` → stdin EOF → SIGTERM → SIGKILL, each wait bounded."""
        process = self.process
        if process.poll() is None:
            with contextlib.suppress(Exception):
                self.request("shutdown", None, timeout=self.shutdown_timeout)
            with contextlib.suppress(Exception):
                assert process.stdin is not None
                process.stdin.close()
            try:
                process.wait(self.shutdown_timeout)
            except subprocess.TimeoutExpired:
                process.terminate()
                try:
                    process.wait(self.shutdown_timeout)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        for stream in (process.stdin, process.stdout, process.stderr):
            with contextlib.suppress(Exception):
                if stream is not None:
                    stream.close()
        self._fail_all("the client was closed")


@dataclass(frozen=True, slots=True)
class HttpEndpoint:
    """Where a ``dshpy serve --http`` server answers, and the headers every request carries."""

    rpc_url: str
    events_url: str
    host: str
    port: int
    headers: dict[str, str]

    @classmethod
    def parse(cls, url: str, token: str | None) -> HttpEndpoint:
        """The endpoint of the server at ``url`` (its path is kept, for a server behind a prefix).

        ``ValueError`` if ``url`` is not http(s) with a host. With ``token``, every
        request carries it as a bearer token.
        """
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        base = f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}"
        headers = {"Content-Type": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        port = parts.port or (443 if parts.scheme == "https" else 80)
        return cls(base + "/rpc", base + "/events", parts.hostname, port, headers)

    def rpc_headers(self, stream_id: str | None) -> dict[str, str]:
        """Headers of a ``POST /rpc``; with ``stream_id`` the server routes this request's sessions to that stream."""
        headers = dict(self.headers)
        if stream_id is not None:
            headers["X-Dshpy-Stream"] = stream_id  # the server routes this client's sessions to its stream
        return headers

    def events_headers(self) -> dict[str, str]:
        """Headers of ``GET /events``: the token without ``Content-Type`` (a GET has no body)."""
        return {k: v for k, v in self.headers.items() if k != "Content-Type"}


def rpc_body(request_id: int, method: str, params: Mapping[str, Any] | None) -> bytes:
    """The bytes of one request frame (compact JSON; ``params`` left out when ``None``)."""
    frame: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        frame["params"] = dict(params)
    return json.dumps(frame, separators=(",", ":")).encode()


def unanswered(error: Exception) -> bool:
    """A kept-alive connection the server had already closed: the request never reached it (safe to resend once)."""
    return "without sending a response" in str(error)


def rpc_answer(status: int, content: bytes) -> Any:
    """The result of an HTTP answer; :class:`HarnessError` for an error frame or a non-200 status."""
    if status != 200:
        raise HarnessError(-32098, f"HTTP {status}: {content.decode('utf-8', 'replace')[:200]}")
    return _unwrap(json.loads(content))


class SseReader:
    """Turns the lines of ``GET /events`` into the stream id (``ready``) and notifications."""

    def __init__(self) -> None:
        self.event = "message"

    def feed(self, line: str) -> tuple[str, Any] | None:
        """``("ready", stream_id)``, ``("notification", (method, params))`` or ``None``."""
        if line.startswith("event:"):
            self.event = line[6:].strip()
        elif line.startswith("data:"):
            data = json.loads(line[5:])
            if self.event == "ready":
                return "ready", str(data["streamId"])
            if isinstance(data, dict) and "method" in data:
                params = data.get("params")
                return "notification", (str(data["method"]), params if isinstance(params, dict) else {})
        elif not line:
            self.event = "message"
        return None


class HttpTransport(Transport):
    """``POST /rpc`` through one pooled httpx client (thread-safe) and a lazily opened SSE stream.

    httpx does the HTTP: connection pooling and keep-alive, a stale pooled connection
    the server closed is replaced transparently, connect/read timeouts.
    """

    def __init__(self, url: str, *, token: str | None = None, timeout: float = 600.0) -> None:
        super().__init__()
        self.endpoint = HttpEndpoint.parse(url, token)
        import httpx2

        self._httpx = httpx2
        self.host = self.endpoint.host
        self.port = self.endpoint.port
        self.timeout = timeout
        self._client = httpx2.Client(
            timeout=httpx2.Timeout(timeout, connect=min(timeout, 30.0)),
            limits=httpx2.Limits(max_connections=16, max_keepalive_connections=8, keepalive_expiry=4.0),
        )
        self._ids = itertools.count(1)
        self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="dshpy-sdk-http")
        self._sse: Any = None
        self._sse_lock = threading.Lock()
        self.stream_id: str | None = None
        self._closed = False

    def call(self, method: str, params: Mapping[str, Any] | None = None) -> Any:
        """The request, in the calling thread (:meth:`request_async` runs it on the pool).

        Raises :class:`HarnessError` with the server's code, or
        :class:`TransportClosedError` when the server cannot be reached. A request sent on
        a kept-alive connection the server had already closed is resent once: it never
        reached the server, so resending cannot run it twice.
        """
        if self._closed:
            raise TransportClosedError("the client was closed")
        body = rpc_body(next(self._ids), method, params)
        headers = self.endpoint.rpc_headers(self.stream_id)
        try:
            try:
                response = self._client.post(self.endpoint.rpc_url, content=body, headers=headers)
            except self._httpx.RemoteProtocolError as error:
                if not unanswered(error):
                    raise
                response = self._client.post(self.endpoint.rpc_url, content=body, headers=headers)
        except self._httpx.TransportError as error:
            raise TransportClosedError(f"cannot reach {self.host}:{self.port}: {error}") from None
        except RuntimeError as error:  # the httpx client was closed under us
            raise TransportClosedError(f"the client was closed: {error}") from None
        return rpc_answer(response.status_code, response.content)

    def request_async(self, method: str, params: Mapping[str, Any] | None = None) -> Future[Any]:
        """Run :meth:`call` on the transport's 8 threads; more requests than that wait for a free one."""
        return self._pool.submit(self.call, method, params)

    def request(self, method: str, params: Mapping[str, Any] | None = None, timeout: float | None = None) -> Any:
        """Wait for the result; see :meth:`Transport.request`.

        Without ``timeout`` :meth:`call` runs in this thread, saving a hop to the pool.
        """
        if timeout is None:
            return self.call(method, params)
        return super().request(method, params, timeout)

    def subscribe(self) -> queue.Queue[Notification | None]:
        """Subscribe, opening ``GET /events`` on first use and waiting (up to 10 s) until it is ready.

        Once ready, requests carry the stream's id, so the server sends this client the
        events of the sessions it creates, sends to, resumes or forks. Raises
        :class:`TransportClosedError` or :class:`HarnessError` if the stream cannot open.
        """
        q = super().subscribe()
        self._open_events()
        return q

    def _open_events(self) -> None:
        with self._sse_lock:
            if self._sse is not None:
                return
            headers = self.endpoint.events_headers()
            httpx2 = self._httpx
            timeout = httpx2.Timeout(30.0, read=None)  # the server pings every 15 s; a stream may idle for hours
            request = self._client.build_request("GET", self.endpoint.events_url, headers=headers, timeout=timeout)
            try:
                response = self._client.send(request, stream=True)
            except httpx2.TransportError as error:
                raise TransportClosedError(f"cannot open the event stream: {error}") from None
            if response.status_code != 200:
                response.read()
                response.close()
                raise HarnessError(
                    -32098, f"HTTP {response.status_code} opening the event stream: {response.text[:200]}"
                )
            ready = threading.Event()
            self._sse = response
            threading.Thread(target=self._read_events, args=(response, ready), daemon=True).start()
            if not ready.wait(10):
                raise TransportClosedError("the event stream did not start")

    def _read_events(self, response: Any, ready: threading.Event) -> None:
        reader = SseReader()
        try:
            for line in response.iter_lines():
                item = reader.feed(line)
                if item is None:
                    continue
                kind, value = item
                if kind == "ready":
                    self.stream_id = value
                    ready.set()
                else:
                    self.subscribers.publish(value)
        except (OSError, ValueError, self._httpx.HTTPError):
            pass
        finally:
            with contextlib.suppress(Exception):
                response.close()
            self.subscribers.publish(None)

    def close(self) -> None:
        """Close the event stream and the connections; queued requests are cancelled, subscribers receive ``None``."""
        self._closed = True
        response = self._sse
        if response is not None:
            with contextlib.suppress(Exception):  # unblock the reader thread, which is inside a recv()
                stream = response.extensions["network_stream"]
                stream.get_extra_info("socket").shutdown(socket.SHUT_RDWR)
        self._pool.shutdown(wait=False, cancel_futures=True)
        with contextlib.suppress(Exception):
            self._client.close()
        self.subscribers.publish(None)
