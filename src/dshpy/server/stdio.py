"""Newline-delimited JSON-RPC on stdin/stdout (logs go to stderr; stdout carries only frames).

Input is read in a thread with ``os.read`` (works for pipes, files and ttys) and
split into lines on the event loop. A line longer than the limit is refused with
-32600 as soon as the limit is passed, and the rest of it is skipped, never
buffered. Each request runs as its own task, so a running turn does not block the
next request; frames are written whole, one per line.

At most ``max_in_flight`` requests are handled at once. A request beyond that is
answered -32007 (``data.limit == "inFlightRequests"``) at once rather than queued:
pausing the reader instead would also hold back the ``session.cancel`` or
``shutdown`` a client needs to end requests that wait on a hung model (those two
are always let through), and a client that writes all its requests before reading
any answer would deadlock against a server that stopped reading while its own
answers filled the stdout pipe. So stdin is always drained.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
from typing import Any, BinaryIO

from .hub import Subscription
from .limits import limit_error
from .methods import Runtime
from .protocol import DEFAULT_MAX_REQUEST_BYTES, INVALID_REQUEST, FrameError, RpcError, error_frame, parse_frame

__all__ = ["DEFAULT_MAX_IN_FLIGHT", "StdioPeer", "serve_stdio"]

DEFAULT_MAX_IN_FLIGHT = 1024
"""Requests handled at once over one stdio connection (waits on running turns included)."""

_ALWAYS_ADMITTED = frozenset({"shutdown", "session.cancel"})

log = logging.getLogger("dshpy.server")


class StdioPeer:
    """The stdio connection as a notification peer: subscribed to everything, as dsh's runtime is to its one client.

    Frames are written whole, one per line, under a lock so that answers and
    notifications never interleave. Once stdout is gone (the client exited) further
    frames are dropped; the server stops when stdin ends.
    """

    def __init__(self, out: BinaryIO) -> None:
        self.subscription = Subscription()
        self._out = out
        self._lock = threading.Lock()
        self.broken = False

    def send(self, frame: bytes) -> None:
        """Write one frame and a newline, flushed; a broken pipe marks the peer broken instead of raising."""
        if self.broken:
            return
        with self._lock:
            try:
                self._out.write(frame + b"\n")
                self._out.flush()
            except (BrokenPipeError, ValueError, OSError):
                self.broken = True


class _LineSplitter:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.buffer = bytearray()
        self.skipping = False

    def feed(self, data: bytes) -> tuple[list[bytes], int]:
        """Complete lines in ``data``, and how many over-long lines started being refused."""
        lines: list[bytes] = []
        refused = 0
        start = 0
        while True:
            end = data.find(b"\n", start)
            if end < 0:
                rest = data[start:]
                if not self.skipping:
                    self.buffer += rest
                    if len(self.buffer) > self.limit:
                        self.buffer.clear()
                        self.skipping = True
                        refused += 1
                return lines, refused
            piece = data[start:end]
            if self.skipping:
                self.skipping = False
            elif len(self.buffer) + len(piece) > self.limit:
                self.buffer.clear()
                refused += 1
            else:
                self.buffer += piece
                line = bytes(self.buffer).strip()
                self.buffer.clear()
                if line:
                    lines.append(line)
            start = end + 1


async def serve_stdio(
    runtime: Runtime,
    *,
    stdin_fd: int | None = None,
    stdout: BinaryIO | None = None,
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
) -> None:
    """Serve until stdin ends or ``shutdown`` is answered."""
    loop = asyncio.get_running_loop()
    fd = sys.stdin.fileno() if stdin_fd is None else stdin_fd
    peer = StdioPeer(stdout if stdout is not None else sys.stdout.buffer)
    runtime.hub.add(peer)
    chunks: asyncio.Queue[bytes | None] = asyncio.Queue()

    def read() -> None:
        while True:
            try:
                data = os.read(fd, 1 << 16)
            except OSError:
                data = b""
            loop.call_soon_threadsafe(chunks.put_nowait, data or None)
            if not data:
                return

    threading.Thread(target=read, name="dshpy-stdin", daemon=True).start()
    splitter = _LineSplitter(max_request_bytes)
    tasks: set[asyncio.Task[None]] = set()
    too_large = RpcError(INVALID_REQUEST, "request too large", {"limit": max_request_bytes})
    too_many = limit_error(
        f"too many requests in progress (at most {max_in_flight}): wait for answers before sending more",
        "inFlightRequests",
        max_in_flight,
    )

    async def answer(line: bytes) -> None:
        frame = await runtime.handle_frame(line, peer)
        if frame is not None:
            peer.send(frame)

    try:
        while not runtime.closed.is_set():
            getter = asyncio.ensure_future(chunks.get())
            closed = asyncio.ensure_future(runtime.closed.wait())
            done, _ = await asyncio.wait({getter, closed}, return_when=asyncio.FIRST_COMPLETED)
            if getter not in done:
                getter.cancel()
                break
            closed.cancel()
            data = getter.result()
            if data is None:
                break
            lines, refused = splitter.feed(data)
            for _ in range(refused):
                peer.send(error_frame(None, too_large))
            for line in lines:
                if len(tasks) >= max_in_flight:
                    admitted, request_id = _triage(line)
                    if not admitted:
                        if request_id is not _NO_ANSWER:
                            peer.send(error_frame(request_id, too_many))
                        continue
                task = loop.create_task(answer(line))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
    finally:
        if not runtime.closed.is_set():
            await runtime.close()  # cancels running turns, so the answers below come quickly
        if tasks:
            await asyncio.wait(tasks, timeout=5)
        runtime.hub.remove(peer)


_NO_ANSWER = object()
"""A notification's id: it is never answered, not even with an error."""


def _triage(line: bytes) -> tuple[bool, Any]:
    """Whether a request may run although the in-flight limit is reached, and the id to refuse it with."""
    try:
        request = parse_frame(line)
    except FrameError as error:
        return False, _NO_ANSWER if error.silent else error.request_id
    if request.method in _ALWAYS_ADMITTED:
        return True, None
    return False, _NO_ANSWER if request.is_notification else request.id
