"""OpenTelemetry traces and metrics for sessions, agents and stores (layer L4; extra ``dshpy[otel]``).

Off by default. Turned on by ``dshpy run|chat|serve --otel``, a profile's
``otel = true``, ``DSHPY_OTEL=1``, or in code::

    import dshpy.telemetry
    dshpy.telemetry.enable()                 # the app's global providers, else OTEL_* → OTLP/HTTP
    dshpy.telemetry.enable(capture_content=True, redact=lambda name, value: value)

What is emitted (names: :mod:`~dshpy.telemetry.names`; the README has the table):

* spans — ``invoke_agent dshpy`` per turn (the root), ``dshpy.step`` per step,
  ``chat {model}`` per model call (its retries as span events), ``execute_tool
  {tool}`` per tool call, ``dshpy.store.flush`` per flushed batch,
  ``dshpy.compaction`` per compaction (:func:`compaction_span`); the flush span names
  the events it wrote (``dshpy.store.flush.event_types`` from ``first_seq``: the seed's
  ``session.event``), and ``enable(session_events="per-event")`` also makes each one a
  ``session.event`` span event on the step or turn it belongs to; a turn the sampler
  leaves out records no span below it;
* metrics — ``gen_ai.client.token.usage``, ``gen_ai.client.operation.duration``,
  ``gen_ai.client.operation.time_to_first_chunk``, ``dshpy.tool.calls``,
  ``dshpy.llm.retries``, ``dshpy.session.events``, ``dshpy.store.flush.duration`` /
  ``.events`` / ``.bytes`` and ``dshpy.compactions``.

Off (or without the extra) this package imports no OpenTelemetry module and the
calls the rest of dshpy makes into it (:func:`observe_agent`,
:func:`compaction_span`, :func:`remote_parent`, …) return at once; the storage layer
is not even told (:func:`dshpy.storage.live_session.observe_writers` has no observer).
Prompts and outputs are never recorded unless asked for (:mod:`~dshpy.telemetry.content`).
"""

from dshpy.telemetry.content import Redactor
from dshpy.telemetry.switch import (
    TelemetrySwitch,
    TelemetryUnavailable,
    active,
    capture_from_env,
    captured_context,
    compaction_span,
    disable,
    enable,
    enabled,
    observe_agent,
    remote_parent,
    requested,
    running,
    within_context,
)

__all__ = [
    "Redactor",
    "TelemetrySwitch",
    "TelemetryUnavailable",
    "active",
    "capture_from_env",
    "captured_context",
    "compaction_span",
    "disable",
    "enable",
    "enabled",
    "observe_agent",
    "remote_parent",
    "requested",
    "running",
    "within_context",
]
