"""The tracer and the metric instruments dshpy records with, created once per :func:`~dshpy.telemetry.enable`.

Histograms carry the bucket boundaries the GenAI conventions recommend as an advisory
(the SDK uses them unless a view says otherwise), so dashboards built for other GenAI
instrumentations read dshpy's numbers the same way. Appended events are counted in a
plain dict and reported through an observable counter, so an append pays a dict
increment, not a measurement.
"""

from __future__ import annotations

import importlib.metadata
import threading
from collections.abc import Iterable
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
        self._event_counts: dict[str, int] = {}
        self._event_lock = threading.Lock()
        meter.create_observable_counter(
            n.METRIC_EVENTS,
            callbacks=[self._observe_events],
            unit="{event}",
            description="Events appended to sessions, by event.type.",
        )
        self.tool_calls = meter.create_counter(
            n.METRIC_TOOL_CALLS, unit="{call}", description="Tool calls answered (error.type set on errors)."
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
        with self._event_lock:
            self._event_counts[kind] = self._event_counts.get(kind, 0) + 1

    def _observe_events(self, _options: CallbackOptions) -> Iterable[Observation]:
        with self._event_lock:
            counts = list(self._event_counts.items())
        return [Observation(count, {n.EVENT_TYPE: kind}) for kind, count in counts]

    def record_tokens(self, attributes: dict[str, Any], input_tokens: int, output_tokens: int) -> None:
        """``gen_ai.client.token.usage``: one input and one output measurement for a model call."""
        self.token_usage.record(input_tokens, {**attributes, n.GEN_AI_TOKEN_TYPE: "input"})
        self.token_usage.record(output_tokens, {**attributes, n.GEN_AI_TOKEN_TYPE: "output"})
