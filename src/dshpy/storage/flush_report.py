"""What a backend's write did that only the backend knows — its fsync or commit time, its bytes — for whoever asks.

A flush's duration says how long the write took; it does not say whether the disk
was slow (the fsync, the commit) or the Python around it, nor how many bytes went
out. Only the backend knows where its durable step is and what it encoded, and only
an observer of the writes (telemetry's ``dshpy.store.flush`` span) wants the
numbers, so the two meet here: the observer opens a :class:`FlushReport` block
around the writer's ``write``, and the backend reports into it.

With no block open — telemetry off, the default — a backend pays one
``perf_counter_ns`` and one thread-local read per durable step, against an fsync or
commit that takes far longer. A block is per thread: a write runs start to end in
the thread that called it.

What each backend reports as durable: JSONL the ``fsync`` of the log after the
append (and of a torn tail it cut first), SQLite the ``COMMIT`` of the append's
transaction (WAL with ``synchronous=FULL``: the WAL's fsync happens there),
PostgreSQL the ``append_events`` statement (an autocommit statement: the server's
commit and its WAL flush are inside its round trip, which cannot be split without
two more round trips per flush). Bytes: the appended lines or zstd frame (JSONL),
the events' JSON bodies (SQLite, PostgreSQL). The memory backend reports nothing.
"""

from __future__ import annotations

import threading
import time

__all__ = ["FlushReport", "record_durable", "reporting"]

_local = threading.local()


class FlushReport:
    """What the backend reports while this block runs in this thread (``with FlushReport() as report: write(...)``).

    Blocks nest (the inner one collects). A plain class rather than a generator
    context manager: it wraps every flush while telemetry is on.
    """

    __slots__ = ("_previous", "durable_ns", "steps", "written")

    def __init__(self) -> None:
        self.durable_ns = 0
        """Nanoseconds spent in durable steps (fsyncs, commits)."""
        self.steps = 0
        """How many durable steps were reported (0: the backend has none, or the write failed before one)."""
        self.written: int | None = None
        """Bytes the backend wrote for the batch (``None``: it did not say)."""
        self._previous: FlushReport | None = None

    def __enter__(self) -> FlushReport:
        self._previous = getattr(_local, "report", None)
        _local.report = self
        return self

    def __exit__(self, *_exc: object) -> None:
        _local.report = self._previous
        self._previous = None


def reporting() -> FlushReport | None:
    """The block open in this thread, if any (a backend computes what it reports only when someone listens)."""
    report: FlushReport | None = getattr(_local, "report", None)
    return report


def record_durable(started_ns: int) -> None:
    """Called by a backend right after a durable step that began at ``time.perf_counter_ns()`` ``started_ns``."""
    report: FlushReport | None = getattr(_local, "report", None)
    if report is not None:
        report.durable_ns += time.perf_counter_ns() - started_ns
        report.steps += 1
