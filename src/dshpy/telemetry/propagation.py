"""W3C trace context across the JSON-RPC server: a client's ``traceparent`` becomes the parent of the work it asked for.

Over HTTP the request's ``traceparent`` / ``tracestate`` headers carry it; over stdio
(no headers) the request's ``params._meta`` object does, as MCP carries it
(``{"_meta": {"traceparent": "00-…"}}``); ``_meta`` wins when both are present. The
extracted context is made current while the method runs, and a prompt queued for a
later turn takes it along (:func:`captured`), so the turn's ``invoke_agent`` span is a
child of the client's span even when it starts after the request was answered.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

__all__ = ["captured", "carrier_of", "extracted", "within"]

_PROPAGATOR = TraceContextTextMapPropagator()
_KEYS = ("traceparent", "tracestate")


def carrier_of(params: Mapping[str, Any], headers: Mapping[str, str] | None) -> dict[str, str]:
    """The trace context fields a request carries: ``params._meta`` first, then the HTTP headers."""
    carrier: dict[str, str] = {}
    if headers is not None:
        for key in _KEYS:
            value = headers.get(key)
            if isinstance(value, str):
                carrier[key] = value
    meta = params.get("_meta")
    if isinstance(meta, Mapping) and isinstance(meta.get("traceparent"), str):
        carrier = {key: meta[key] for key in _KEYS if isinstance(meta.get(key), str)}
    return carrier


@contextmanager
def extracted(params: Mapping[str, Any], headers: Mapping[str, str] | None) -> Iterator[None]:
    """Run the block with the request's trace context current (as it was, when the request carries none)."""
    carrier = carrier_of(params, headers)
    if not carrier:
        yield
        return
    token = otel_context.attach(_PROPAGATOR.extract(carrier))
    try:
        yield
    finally:
        otel_context.detach(token)


@contextmanager
def within(context: Any) -> Iterator[None]:
    """Run the block with ``context`` (an OpenTelemetry context :func:`captured` earlier) current."""
    token = otel_context.attach(context)
    try:
        yield
    finally:
        otel_context.detach(token)


def captured() -> Any:
    """The OpenTelemetry context current now, to restore later with :func:`within`."""
    return otel_context.get_current()
