"""A session's log whose older events stay in the store until someone reads them.

A session resumed from a checkpoint (:mod:`dshpy.log.resume`) holds in memory only
the events after it; the events before it are fetched from the store by seq when
they are indexed, sliced or iterated, a chunk at a time, and only a few chunks are
kept. To every caller it is the same append-only list of events: ``len``, indexing,
slices and iteration give exactly what a fully loaded log gives, so everything that
walks a whole log (projections re-folding, export, fork planning, compaction) still
works, only paying for the read when it happens.

Why a bounded chunk cache and not a growing one: the point is that a long session
costs memory for its tail only. A caller that walks the whole log once pays the reads
once; one that keeps walking it should read it from the store (``store.read``).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from typing import overload

from dshpy.core.events import SessionEvent
from dshpy.errors import CorruptSessionError

__all__ = ["CHUNK_EVENTS", "FetchEvents", "StoredLog", "StreamEvents"]

FetchEvents = Callable[[int, int], Sequence[SessionEvent]]
"""``fetch(start, stop)``: the stored events with ``start <= seq < stop``, in order (a store's read)."""

StreamEvents = Callable[[int], Iterator[SessionEvent]]
"""``stream(start)``: the stored events from seq ``start`` on, in order (a store's streaming read)."""

CHUNK_EVENTS = 512
"""Events fetched per read of the stored part: a few ms of decoding, so a random look-up stays cheap."""

_KEPT_CHUNKS = 4
"""Chunks kept after a read (the most recently used): enough for the look-backs admission makes."""


class StoredLog:
    """The events ``0 .. stored-1`` read lazily through ``fetch``, then the events held in memory.

    Appends go to the in-memory part. The log never changes below its length (events are
    immutable and the store is append-only), so a :class:`~dshpy.log.messages.LogView`
    over it is a snapshot exactly as over a list.
    """

    __slots__ = ("_chunks", "_fetch", "_lock", "_session_id", "_stored", "_stream", "_tail")

    def __init__(self, session_id: str, stored: int, fetch: FetchEvents, stream: StreamEvents | None = None) -> None:
        """``stream``, when given, serves iteration: one pass of the store's read, not a fetch per chunk."""
        self._session_id = session_id
        self._stored = stored
        self._fetch = fetch
        self._stream = stream
        self._tail: list[SessionEvent] = []
        self._chunks: OrderedDict[int, Sequence[SessionEvent]] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def stored(self) -> int:
        """How many leading events are read from the store (not held in memory)."""
        return self._stored

    @property
    def held(self) -> int:
        """How many events of the store's part are currently cached in memory."""
        return sum(len(chunk) for chunk in self._chunks.values())

    def __len__(self) -> int:
        return self._stored + len(self._tail)

    def append(self, event: SessionEvent) -> None:
        self._tail.append(event)

    @overload
    def __getitem__(self, index: int) -> SessionEvent: ...
    @overload
    def __getitem__(self, index: slice) -> list[SessionEvent]: ...
    def __getitem__(self, index: int | slice) -> SessionEvent | list[SessionEvent]:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:
                return [self[i] for i in range(start, stop, step)]
            return self._range(start, stop)
        length = len(self)
        if index < 0:
            index += length
        if not 0 <= index < length:
            raise IndexError("log index out of range")
        if index >= self._stored:
            return self._tail[index - self._stored]
        chunk = self._chunk(index // CHUNK_EVENTS)
        return chunk[index % CHUNK_EVENTS]

    def __iter__(self) -> Iterator[SessionEvent]:
        stored = self._stored
        if self._stream is None or stored <= CHUNK_EVENTS:
            for number in range((stored + CHUNK_EVENTS - 1) // CHUNK_EVENTS):
                yield from self._chunk(number)
        else:
            expected = 0
            events = self._stream(0)
            try:
                for event in events:
                    if expected == stored:
                        break
                    if event.seq != expected:
                        raise self._changed(expected, stored, [event])
                    yield event
                    expected += 1
            finally:
                close = getattr(events, "close", None)
                if close is not None:
                    close()
            if expected != stored:
                raise self._changed(expected, stored, [])
        yield from self._tail

    def _range(self, start: int, stop: int) -> list[SessionEvent]:
        if start >= stop:
            return []
        stored = self._stored
        out: list[SessionEvent] = []
        at = start
        while at < min(stop, stored):
            number, offset = divmod(at, CHUNK_EVENTS)
            chunk = self._chunk(number)
            piece = chunk[offset : offset + min(stop, stored) - at]
            out.extend(piece)
            at += len(piece)
        if stop > stored:
            out.extend(self._tail[max(start - stored, 0) : stop - stored])
        return out

    def _chunk(self, number: int) -> Sequence[SessionEvent]:
        with self._lock:
            chunk = self._chunks.get(number)
            if chunk is not None:
                self._chunks.move_to_end(number)
                return chunk
        start = number * CHUNK_EVENTS
        stop = min(start + CHUNK_EVENTS, self._stored)
        chunk = tuple(self._fetch(start, stop))
        if len(chunk) != stop - start or any(event.seq != start + i for i, event in enumerate(chunk)):
            raise self._changed(start, stop, chunk)
        with self._lock:
            self._chunks[number] = chunk
            while len(self._chunks) > _KEPT_CHUNKS:
                self._chunks.popitem(last=False)
        return chunk

    def _changed(self, start: int, stop: int, read: Sequence[SessionEvent]) -> CorruptSessionError:
        got = f" from seq {read[0].seq}" if read else ""
        return CorruptSessionError(
            f'session "{self._session_id}": the store no longer holds events {start}..{stop - 1} as it did when '
            f"the session was opened (read {len(read)} events{got})"
        )
