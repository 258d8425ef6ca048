"""Where spans and metrics go: the application's providers, or ones built from the standard ``OTEL_*`` variables.

When the host application has set a global tracer (meter) provider, dshpy uses it,
so its spans join the application's traces and its metrics its pipeline. Otherwise
dshpy builds an SDK provider the way OpenTelemetry's own configuration does:

* the resource from ``OTEL_SERVICE_NAME`` / ``OTEL_RESOURCE_ATTRIBUTES`` (service
  name ``dshpy`` when neither names one);
* exporters from ``OTEL_TRACES_EXPORTER`` / ``OTEL_METRICS_EXPORTER`` (comma lists of
  ``otlp`` — the default —, ``console``, ``none``); OTLP speaks
  ``OTEL_EXPORTER_OTLP_PROTOCOL`` ``http/protobuf`` (the default) or ``grpc`` (with
  ``opentelemetry-exporter-otlp-proto-grpc`` installed), and reads its endpoint,
  headers and timeout (``OTEL_EXPORTER_OTLP_ENDPOINT``, …) itself;
* spans through a batch processor (``OTEL_BSP_*``: exported on its own thread, every
  5 s or 512 spans by default; a span's end only queues it), sampled by
  ``OTEL_TRACES_SAMPLER`` / ``OTEL_TRACES_SAMPLER_ARG`` (the SDK reads them), metrics
  through a periodic reader (``OTEL_METRIC_EXPORT_INTERVAL``, 60 s by default);

and installs it as the global provider, so other instrumentations in the process (an
HTTP client's, say) report to the same place. ``console=True`` (``--otel-console``)
replaces the exporters by console ones on stderr, for looking at a run locally.
Providers dshpy built are flushed and shut down by :meth:`Providers.shutdown`; the
application's are left alone.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.metrics._internal import _ProxyMeterProvider

from dshpy.errors import ConfigError

__all__ = ["Providers", "TelemetryConfigError", "resolve_providers"]


class TelemetryConfigError(ConfigError):
    """The ``OTEL_*`` configuration asks for something dshpy cannot set up (an exporter that is not installed)."""


@dataclass(slots=True)
class Providers:
    """The tracer and meter providers dshpy reports to, and how to shut down those it built."""

    tracer_provider: trace.TracerProvider
    meter_provider: metrics.MeterProvider
    _shutdowns: list[Callable[[], Any]] = field(default_factory=list)

    def shutdown(self) -> None:
        """Flush and shut down the providers dshpy built (exports what is still buffered)."""
        for shutdown in self._shutdowns:
            shutdown()
        self._shutdowns.clear()


def _names(variable: str) -> list[str]:
    value = os.environ.get(variable, "otlp")
    return [name.strip().lower() for name in value.split(",") if name.strip()]


def _protocol(signal: str) -> str:
    return (
        os.environ.get(f"OTEL_EXPORTER_OTLP_{signal}_PROTOCOL")
        or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "http/protobuf"
    ).strip()


def _resource() -> Any:
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource

    resource = Resource.create()
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: "dshpy"}))
    return resource


def _span_exporters(console: bool) -> list[tuple[Any, bool]]:
    """``(exporter, batched)`` for each trace exporter asked for."""
    if console:
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return [(ConsoleSpanExporter(out=sys.stderr), False)]
    exporters: list[tuple[Any, bool]] = []
    for name in _names("OTEL_TRACES_EXPORTER"):
        if name == "none":
            continue
        if name == "console":
            from opentelemetry.sdk.trace.export import ConsoleSpanExporter

            exporters.append((ConsoleSpanExporter(out=sys.stderr), False))
        elif name == "otlp":
            exporters.append((_otlp("TRACES", "trace_exporter", "OTLPSpanExporter"), True))
        else:
            raise TelemetryConfigError(f"OTEL_TRACES_EXPORTER: unknown exporter {name!r} (otlp, console or none)")
    return exporters


def _metric_exporters(console: bool) -> list[Any]:
    if console:
        from opentelemetry.sdk.metrics.export import ConsoleMetricExporter

        return [ConsoleMetricExporter(out=sys.stderr)]
    exporters: list[Any] = []
    for name in _names("OTEL_METRICS_EXPORTER"):
        if name == "none":
            continue
        if name == "console":
            from opentelemetry.sdk.metrics.export import ConsoleMetricExporter

            exporters.append(ConsoleMetricExporter(out=sys.stderr))
        elif name == "otlp":
            exporters.append(_otlp("METRICS", "metric_exporter", "OTLPMetricExporter"))
        else:
            raise TelemetryConfigError(f"OTEL_METRICS_EXPORTER: unknown exporter {name!r} (otlp, console or none)")
    return exporters


def _otlp(signal: str, module: str, name: str) -> Any:
    """The OTLP exporter class ``name`` for the configured protocol, constructed from the environment."""
    protocol = _protocol(signal)
    if protocol == "http/protobuf":
        package = "opentelemetry.exporter.otlp.proto.http"
        hint = "pip install 'dshpy[otel]'"
    elif protocol == "grpc":
        package = "opentelemetry.exporter.otlp.proto.grpc"
        hint = "pip install opentelemetry-exporter-otlp-proto-grpc"
    else:
        raise TelemetryConfigError(f"OTLP protocol {protocol!r} is not supported (use http/protobuf or grpc)")
    try:
        loaded = importlib.import_module(f"{package}.{module}")
    except ImportError:
        raise TelemetryConfigError(f"OTLP over {protocol} needs {package} ({hint})") from None
    return getattr(loaded, name)()


def _tracer_provider(console: bool, shutdowns: list[Callable[[], Any]]) -> trace.TracerProvider:
    current = trace.get_tracer_provider()
    if not isinstance(current, trace.ProxyTracerProvider) and not console:
        return current  # the application's: dshpy's spans join its traces
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    provider = TracerProvider(resource=_resource())
    for exporter, batched in _span_exporters(console):
        provider.add_span_processor(BatchSpanProcessor(exporter) if batched else SimpleSpanProcessor(exporter))
    if isinstance(current, trace.ProxyTracerProvider):
        trace.set_tracer_provider(provider)
    shutdowns.append(provider.shutdown)
    return provider


def _meter_provider(console: bool, shutdowns: list[Callable[[], Any]]) -> metrics.MeterProvider:
    current = metrics.get_meter_provider()
    if not isinstance(current, _ProxyMeterProvider) and not console:
        return current
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

    readers = [PeriodicExportingMetricReader(exporter) for exporter in _metric_exporters(console)]
    provider = MeterProvider(resource=_resource(), metric_readers=readers)
    if isinstance(current, _ProxyMeterProvider):
        metrics.set_meter_provider(provider)
    shutdowns.append(provider.shutdown)
    return provider


def resolve_providers(tracer_provider: Any = None, meter_provider: Any = None, *, console: bool = False) -> Providers:
    """The providers to report to: those given, else the application's global ones, else built from ``OTEL_*``."""
    shutdowns: list[Callable[[], Any]] = []
    tracers = tracer_provider if tracer_provider is not None else _tracer_provider(console, shutdowns)
    meters = meter_provider if meter_provider is not None else _meter_provider(console, shutdowns)
    return Providers(tracers, meters, shutdowns)
