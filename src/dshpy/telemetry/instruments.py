"""The tracer and the metric instruments dshpy records with, created once per :func:`~dshpy.telemetry.enable`.

Histograms carry the bucket boundaries the GenAI conventions recommend as an advisory
(the SDK uses them unless a view says otherwise), so dashboards built for other GenAI
instrumentations read dshpy's numbers the same way.

The two counts taken per event rather than per operation — events stored (by type)
and tool calls answered (by tool and error) — are tallied in a plain dict and
reported through observable counters, OpenTelemetry's instrument for counts kept by
the instrumented code: what the exporter receives is the same monotonic sum a
synchronous counter gives, but a flush pays one dict update per event instead of
an SDK measurement (attribute cleaning, hashing, exemplar check) per event.
"""

from __future__ import annotations

import importlib.metadata
import threading
from collections.abc import Iterable, Sequence
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.metrics import CallbackOptions, Observation

from dshpy.telemetry import names as n

__all__ = ["Instruments"]


def _version() -> str | None:
    """dshpy's installed version, the instrumentation scope's (read from metadata: ``import dshpy`` is layers above)."""
    try:
        return importlib.metadata.version("dshpy")
    except importlib.metadata.PackageNotFoundError:
        return None


class _Tally:
    """Counts by a tuple of attribute values, read by an observable counter's callback (thread-safe)."""

    __slots__ = ("_counts", "_keys", "_lock")

    def __init__(self, *keys: str) -> None:
        self._keys = keys
        self._counts: dict[tuple[Any, ...], int] = {}
        self._lock = threading.Lock()

    def add(self, key: tuple[Any, ...]) -> None:
        with self._lock:
            self._counts[key] = self._counts.get(key, 0) + 1

    def add_each(self, keys: Iterable[tuple[Any, ...]]) -> None:
        """One more for each key (one lock for the lot: a flushed batch)."""
        with self._lock:
            counts = self._counts
            for key in keys:
                counts[key] = counts.get(key, 0) + 1

    def observe(self, _options: CallbackOptions) -> Iterable[Observation]:
        with self._lock:
            counts = list(self._counts.items())
        names = self._keys
        return [
            Observation(count, {name: value for name, value in zip(names, key, strict=True) if value is not None})
            for key, count in counts
        ]


class Instruments:
    """One tracer and every instrument, from the providers dshpy reports to."""

    def __init__(self, tracer_provider: trace.TracerProvider, meter_provider: metrics.MeterProvider) -> None:
        version = _version()
        self.tracer = tracer_provider.get_tracer(n.INSTRUMENTATION_SCOPE, version)
        meter = meter_provider.get_meter(n.INSTRUMENTATION_SCOPE, version)
        self.token_usage = meter.create_histogram(
            n.METRIC_TOKEN_USAGE,
            unit="{token}",
            description="Number of input and output tokens used.",
            explicit_bucket_boundaries_advisory=n.TOKEN_BUCKETS,
        )
        self.operation_duration = meter.create_histogram(
            n.METRIC_OPERATION_DURATION,
            unit="s",
            description="GenAI operation duration.",
            explicit_bucket_boundaries_advisory=n.DURATION_BUCKETS,
        )
        self.time_to_first_chunk = meter.create_histogram(
            n.METRIC_TIME_TO_FIRST_CHUNK,
            unit="s",
            description="Time from sending a model request to receiving the first chunk of its stream.",
            explicit_bucket_boundaries_advisory=n.DURATION_BUCKETS,
        )
        self._events = _Tally(n.EVENT_TYPE)
        meter.create_observable_counter(
            n.METRIC_EVENTS,
            callbacks=[self._events.observe],
            unit="{event}",
            description="Events appended to sessions (counted as they are stored), by event.type.",
        )
        self._tool_calls = _Tally(n.GEN_AI_TOOL_NAME, n.ERROR_TYPE)
        meter.create_observable_counter(
            n.METRIC_TOOL_CALLS,
            callbacks=[self._tool_calls.observe],
            unit="{call}",
            description="Tool calls answered (error.type set on errors).",
        )
        self.tool_duration = meter.create_histogram(
            n.METRIC_TOOL_DURATION,
            unit="s",
            description="How long tool bodies ran.",
            explicit_bucket_boundaries_advisory=n.DURATION_BUCKETS,
        )
        self.retries = meter.create_counter(n.METRIC_RETRIES, unit="{retry}", description="Model requests retried.")
        self.flush_duration = meter.create_histogram(
            n.METRIC_FLUSH_DURATION,
            unit="s",
            description="Durable write of one flushed batch, by backend.",
            explicit_bucket_boundaries_advisory=n.FLUSH_DURATION_BUCKETS,
        )
        self.flush_events = meter.create_histogram(
            n.METRIC_FLUSH_EVENTS,
            unit="{event}",
            description="Events per flushed batch, by backend.",
            explicit_bucket_boundaries_advisory=n.FLUSH_EVENT_BUCKETS,
        )
        self.compactions = meter.create_counter(
            n.METRIC_COMPACTIONS, unit="{compaction}", description="Compactions logged (error.type set on failures)."
        )

    def count_event(self, kind: str) -> None:
        """One more event of type ``kind`` (a dict increment: the exporter's reader collects the totals)."""
        self._events.add((kind,))

    def count_events(self, kinds: Sequence[str]) -> None:
        """One more event of each type in ``kinds`` (a flushed batch's)."""
        self._events.add_each((kind,) for kind in kinds)

    def count_tool_call(self, name: str, error: str | None) -> None:
        """One more tool call answered (``error``: its ``error.type``, ``None`` when it succeeded)."""
        self._tool_calls.add((name, error))

    def record_tokens(self, attributes: dict[str, Any], input_tokens: int, output_tokens: int) -> None:
        """``gen_ai.client.token.usage``: one input and one output measurement for a model call."""
        self.token_usage.record(input_tokens, {**attributes, n.GEN_AI_TOKEN_TYPE: "input"})
        self.token_usage.record(output_tokens, {**attributes, n.GEN_AI_TOKEN_TYPE: "output"})
