"""Timed flushes: the writer a live session gets while telemetry is on, and each batch's ``dshpy.store.flush`` span.

The storage layer hands every live session's backend writer to telemetry
(:func:`dshpy.storage.live_session.observe_writers`); :class:`TracedWriter` wraps it, so
a flush becomes a span under the step or turn it happened in, with the backend, the
batch's size and first seq, and two metrics (its duration and event count, by
backend), and the batch's event types in seq order — the per-flush form of the
seed's ``session.event`` (:mod:`~dshpy.telemetry.session_trace`), which also feeds
the ``dshpy.session.events`` count. What only the backend knows comes through a
:class:`~dshpy.storage.flush_report.FlushReport` open around the write: the time its
durable step took (``dshpy.store.flush.fsync_ms``: the fsync, or the commit — see
that module for what each backend times) and the bytes it wrote.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from opentelemetry.trace import Status, StatusCode

from dshpy.core.events import SessionEvent
from dshpy.log.session import SessionWriter
from dshpy.storage.flush_report import FlushReport
from dshpy.telemetry import names as n
from dshpy.telemetry.instruments import Instruments
from dshpy.telemetry.session_trace import SessionTrace

__all__ = ["TracedWriter"]

log = logging.getLogger("dshpy.telemetry")


class TracedWriter:
    """A backend writer whose every batch is timed into a ``dshpy.store.flush`` span (calls pass through unchanged)."""

    __slots__ = ("_backend", "_inner", "_instruments", "_metric", "_trace")

    def __init__(self, inner: SessionWriter, trace: SessionTrace, backend: str, instruments: Instruments) -> None:
        self._inner = inner
        self._trace = trace
        self._backend = backend
        self._instruments = instruments
        self._metric = {n.STORE_BACKEND: backend}
        """The metrics' attributes, built once (the SDK copies what it keeps)."""
        trace.writer_traced = True

    def write(self, session_id: str, expected_seq: int, events: Sequence[SessionEvent]) -> None:
        if self._trace.detach is None:  # telemetry was turned off: a plain write
            self._inner.write(session_id, expected_seq, events)
            return
        started = time.time_ns()
        with FlushReport() as report:
            try:
                self._inner.write(session_id, expected_seq, events)
            except BaseException as error:
                self._record(started, expected_seq, events, report, error)
                raise
        self._record(started, expected_seq, events, report, None)

    def close(self) -> None:
        self._inner.close()

    def _record(
        self,
        started: int,
        expected_seq: int,
        events: Sequence[SessionEvent],
        report: FlushReport,
        error: BaseException | None,
    ) -> None:
        """The batch's span and metrics; never raises (telemetry must not fail a flush)."""
        try:
            ended = time.time_ns()
            trace = self._trace
            instruments = self._instruments
            metric = self._metric
            types = [event.type for event in events]
            if error is None:
                instruments.count_events(types)  # stored: by type only (a metric is never split by an unbounded id)
            else:
                metric = {**metric, n.ERROR_TYPE: type(error).__qualname__}
            if not trace.sampled_out():  # else the span would be dropped: skip building it
                attributes: dict[str, Any] = trace.numbers()
                attributes[n.STORE_BACKEND] = self._backend
                attributes[n.FLUSH_EVENTS] = len(events)
                attributes[n.FLUSH_FIRST_SEQ] = expected_seq
                attributes[n.FLUSH_EVENT_TYPES] = types
                if report.steps:
                    attributes[n.FLUSH_FSYNC_MS] = report.durable_ns / 1e6
                if report.written is not None:
                    attributes[n.FLUSH_BYTES] = report.written
                if error is not None:
                    attributes[n.ERROR_TYPE] = metric[n.ERROR_TYPE]
                span = instruments.tracer.start_span(
                    n.SPAN_FLUSH, context=trace.parent_context(), attributes=attributes, start_time=started
                )
                if error is not None:
                    span.set_status(Status(StatusCode.ERROR, str(error)))
                span.end(end_time=ended)
            instruments.flush_duration.record((ended - started) / 1e9, metric)
            instruments.flush_events.record(len(events), metric)
        except Exception:
            log.exception("telemetry failed on a flush of %s", self._trace.session_id)
