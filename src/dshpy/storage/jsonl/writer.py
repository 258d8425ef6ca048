"""Writing a JSONL log: encoding batches, appending one durably, and the session's single live writer.

A batch is acknowledged only once it is appended and fsynced; a failed append is
truncated back off, so the log never keeps bytes nobody was told about. Before the
first append after a crash, a torn tail is copied aside (``<log>.torn-<UTC time>``)
and cut off, and the complete events a torn zstd frame still held are appended again
as their own frame, ahead of the new batch.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import os
import secrets
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import orjson

from dshpy.core.events import SessionEvent, encode_event
from dshpy.core.json import dumps
from dshpy.errors import ConflictError, SessionNotFound, StoreError
from dshpy.log.header import SessionHeader
from dshpy.storage.flush_report import record_durable, reporting
from dshpy.storage.jsonl.files import file_errors, fsync_dir, write_all
from dshpy.storage.jsonl.layout import TORN_SUFFIX, Location
from dshpy.storage.jsonl.locking import SessionLock
from dshpy.storage.jsonl.scan import LogReader, Scan, revision
from dshpy.storage.jsonl.zstd_frames import compress_frame
from dshpy.storage.os_errors import os_store_error

__all__ = ["JsonlWriter", "encode_new"]

log = logging.getLogger("dshpy.storage.jsonl")  # the backend's one logger: its name is what users configure

_dump_line = orjson.dumps
_NEWLINE = orjson.OPT_APPEND_NEWLINE


def _encode_batch(events: Sequence[SessionEvent], *, compressed: bool) -> bytes:
    """Storage lines (what :func:`encode_event` gives, each with its newline), framed when compressed."""
    try:
        lines = b"".join([_dump_line(event.to_wire(seq_ranges=True), option=_NEWLINE) for event in events])
    except TypeError:  # a lone surrogate: the escaping encoder writes the batch (see dshpy.core.json)
        lines = b"".join([encode_event(event) + b"\n" for event in events])
    return compress_frame(lines) if compressed else lines


def encode_new(header: SessionHeader, events: Sequence[SessionEvent], *, compressed: bool) -> bytes:
    """A new log's bytes: the header line (frame 0 alone when compressed), then the first batch."""
    line = dumps(header.to_record()) + b"\n"
    head = compress_frame(line) if compressed else line
    return head + _encode_batch(events, compressed=compressed) if events else head


def _set_aside(path: Path, start: int, end: int) -> Path:
    """Copy bytes ``start:end`` of ``path`` (a torn tail) to a new ``<name>.torn-<UTC time>`` beside it, durably.

    The tail was never acknowledged, but a damaged log can look torn in ways no check
    foresees; keeping its bytes lets a person look before they are gone.
    """
    with open(path, "rb") as source:
        source.seek(start)
        tail = source.read(end - start)
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    aside = path.with_name(f"{path.name}{TORN_SUFFIX}{stamp}")
    while True:
        try:
            fd = os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            break
        except FileExistsError:
            aside = path.with_name(f"{path.name}{TORN_SUFFIX}{stamp}-{secrets.token_hex(3)}")
    try:
        write_all(fd, tail)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(aside)
        raise
    os.close(fd)
    fsync_dir(path.parent)
    return aside


def _append_batch(
    reader: LogReader, session_id: str, location: Location, scan: Scan, events: Sequence[SessionEvent], fd: int
) -> Scan:
    """Repair a torn tail if there is one, then append ``events`` as one batch and fsync.

    The caller holds the session's lock, has checked ``scan`` is the file's state, and
    passes its ``O_APPEND`` descriptor of the log. One ``fstat`` checks the file is
    still the log at ``location`` (not unlinked or renamed over: its link count) and
    was not written by anyone else (its size). On any failure the file is truncated
    back to where this batch began.
    """
    payload = _encode_batch(events, compressed=reader.compressed)
    if scan.recovered:
        recovered = scan.events[scan.count - scan.recovered : scan.count]
        payload = _encode_batch(recovered, compressed=reader.compressed) + payload
    report = reporting()
    if report is not None:
        report.written = len(payload)
    current = os.fstat(fd)
    if current.st_nlink == 0:
        if not location.path.exists():
            raise SessionNotFound(f'session "{session_id}" was deleted')
        raise ConflictError(
            f'session "{session_id}" was replaced on disk while its lock was held ({location.path} is '
            "another file now); reopen it",
            expected_seq=scan.count,
        )
    before = current.st_size
    if before != scan.size:
        raise ConflictError(
            f'session "{session_id}" changed on disk while its lock was held (another program wrote '
            f"{location.path}); reopen it",
            expected_seq=scan.count,
        )
    if scan.truncate_to is not None:
        with file_errors(f'session "{session_id}": cannot set its torn tail aside'):
            aside = _set_aside(location.path, scan.truncate_to, scan.size)
            os.ftruncate(fd, scan.truncate_to)
            synced = time.perf_counter_ns()
            os.fsync(fd)
            record_durable(synced)
        before = scan.truncate_to
        log.warning(
            'session "%s" recovered from a torn tail: %d bytes that were never acknowledged were moved to %s '
            "and cut from %s%s",
            session_id,
            scan.size - scan.truncate_to,
            aside,
            location.path,
            f"; the {scan.recovered} complete events they held are appended again" if scan.recovered else "",
        )
    try:
        write_all(fd, payload)
        synced = time.perf_counter_ns()
        os.fsync(fd)
        record_durable(synced)
    except BaseException as failure:
        try:
            os.ftruncate(fd, before)
            os.fsync(fd)
        except OSError as rollback:
            raise StoreError(
                f'session "{session_id}": append failed ({failure}) and rolling it back failed too '
                f"({rollback}); {location.path} may end in a torn batch, which the next open discards"
            ) from failure
        if isinstance(failure, OSError):
            raise os_store_error(failure, f'session "{session_id}": append failed') from failure
        raise
    stat = os.fstat(fd)
    shared = scan.events
    if len(shared) != scan.count:
        shared = shared[: scan.count]
    shared.extend(events)  # readers of older scans only look at their own events[:count]
    after = Scan(scan.header, shared, scan.count + len(events), stat.st_size, None, 0, events[-1].time)
    reader.cache.put(location.path, revision(stat), after)
    return after


class JsonlWriter:
    """The single writer of one session: holds its lock and appends conditional batches."""

    def __init__(
        self, reader: LogReader, session_id: str, location: Location, lock: SessionLock, scan: Scan | None = None
    ) -> None:
        self._reader = reader
        self._session_id = session_id
        self._location = location
        self._lock = lock
        self._scan = scan
        self._mutex = threading.Lock()
        self._fd: int | None = None
        """The log opened for appending, from the first batch until :meth:`close` (the lock is held all along)."""

    def write(self, session_id: str, expected_seq: int, events: Sequence[SessionEvent]) -> None:
        if session_id != self._session_id:
            raise StoreError(f'this writer belongs to session "{self._session_id}", not "{session_id}"')
        if not events:
            return
        with self._mutex:
            if not self._lock.held:
                raise StoreError(f'session "{session_id}": the writer was closed')
            scan = self._current()
            if scan.count != expected_seq:
                raise ConflictError(
                    f'session "{session_id}" ends at seq {scan.count}, not {expected_seq}',
                    expected_seq=expected_seq,
                    actual_seq=scan.count,
                )
            fd = self._fd
            if fd is None:
                try:
                    fd = self._fd = os.open(self._location.path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
                except FileNotFoundError:
                    raise SessionNotFound(f'session "{session_id}" was deleted') from None
                except OSError as error:  # e.g. a log file another user owns, in a directory we may write
                    raise os_store_error(error, f'session "{session_id}": cannot open its log for appending') from None
            self._scan = _append_batch(self._reader, session_id, self._location, scan, events, fd)

    def _current(self) -> Scan:
        """The file's state: what this writer last wrote (scanned once, when it has not written yet).

        Not re-checked here: the append itself checks the open log's link count and size
        against this scan, so a deleted, replaced or foreign-written log still fails the batch.
        """
        scan = self._scan
        return scan if scan is not None else self._reader.scan(self._session_id, self._location)

    def close(self) -> None:
        with self._mutex:
            self._close_fd()
            self._lock.release()

    def _close_fd(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def __del__(self) -> None:  # a dropped, unclosed session must not keep its session locked
        with contextlib.suppress(Exception):  # interpreter shutdown may have torn down os already
            self._close_fd()
            self._lock.release()
