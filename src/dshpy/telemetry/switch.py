"""Whether telemetry is on, and the few entry points the rest of dshpy calls — all free when it is off.

Everything here is plain Python: importing it, or calling it while telemetry is off,
imports no OpenTelemetry module and costs one global read. :func:`enable` is the
only way in; it imports :mod:`~dshpy.telemetry.instrumentation` (and with it the
OpenTelemetry API and, when dshpy builds its own providers, the SDK), which raises
:class:`TelemetryUnavailable` when the ``[otel]`` extra is not installed.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dshpy.errors import ConfigError

if TYPE_CHECKING:
    from dshpy.log.session import Session
    from dshpy.telemetry.content import Redactor
    from dshpy.telemetry.instrumentation import Telemetry

__all__ = [
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
    "session_events_from_env",
    "within_context",
]


class _State:
    """The process's telemetry switch (one object, so the hot paths read one attribute)."""

    __slots__ = ("active",)

    def __init__(self) -> None:
        self.active: Telemetry | None = None


_state = _State()
_OFF: contextlib.AbstractContextManager[Any] = contextlib.nullcontext()
_TRUE = frozenset({"1", "true", "yes", "on"})
SESSION_EVENTS = ("per-flush", "per-event")
"""How appended events are recorded: named by the flush span that wrote them (default), or also a span event each."""


class TelemetryUnavailable(ConfigError):
    """Telemetry was asked for, but OpenTelemetry is not installed (``pip install 'dshpy[otel]'``)."""


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in _TRUE


def capture_from_env() -> bool:
    """``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``, the GenAI instrumentations' content switch."""
    return _flag("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")


def _session_events(value: str, origin: str) -> str:
    if value not in SESSION_EVENTS:
        raise ConfigError(f"{origin}: {value!r} is not one of {', '.join(SESSION_EVENTS)}")
    return value


def session_events_from_env() -> str:
    """``DSHPY_OTEL_SESSION_EVENTS`` (``per-flush``, the default, or ``per-event``)."""
    value = os.environ.get("DSHPY_OTEL_SESSION_EVENTS", "").strip().lower()
    return _session_events(value, "DSHPY_OTEL_SESSION_EVENTS") if value else "per-flush"


def requested(flag: bool | None = None, configured: bool | None = None) -> bool:
    """Whether to turn telemetry on: the flag (``--otel``), else the profile's ``otel``, else ``$DSHPY_OTEL``.

    ``OTEL_SDK_DISABLED=true`` turns it off whatever the rest says, as it does for any
    OpenTelemetry SDK.
    """
    if _flag("OTEL_SDK_DISABLED"):
        return False
    if flag is not None:
        return flag
    if configured is not None:
        return configured
    return _flag("DSHPY_OTEL")


def enable(
    *,
    tracer_provider: Any = None,
    meter_provider: Any = None,
    capture_content: bool | None = None,
    redact: Redactor | None = None,
    agent_name: str = "dshpy",
    console: bool = False,
    session_events: str | None = None,
) -> Telemetry:
    """Turn telemetry on for sessions opened and agents built from now on; returns the active :class:`Telemetry`.

    Providers: those given, else the application's global ones, else SDK providers
    built from the standard ``OTEL_*`` variables (see :mod:`dshpy.telemetry.providers`;
    ``console=True`` prints to stderr instead). ``capture_content`` (default:
    ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``) records prompts, answers
    and tool I/O, each through ``redact`` first. ``session_events`` (default:
    ``DSHPY_OTEL_SESSION_EVENTS``, else ``"per-flush"``) says how appended events are
    recorded: ``"per-flush"`` names them on the ``dshpy.store.flush`` span that wrote
    them (``dshpy.store.flush.event_types``, from ``first_seq``); ``"per-event"`` also
    adds a timestamped ``session.event`` span event for each, on its step or turn — more
    detail, several µs more per event. Enabling again replaces the active telemetry (the
    old one is disabled first).
    """
    detail = session_events_from_env() if session_events is None else _session_events(session_events, "session_events")
    try:
        from dshpy.telemetry.content import ContentCapture
        from dshpy.telemetry.instrumentation import Telemetry
        from dshpy.telemetry.providers import resolve_providers
    except ImportError as error:
        raise TelemetryUnavailable(
            f"telemetry needs OpenTelemetry ({error.name or error}): pip install 'dshpy[otel]'"
        ) from None
    disable()
    providers = resolve_providers(tracer_provider, meter_provider, console=console)
    capture = ContentCapture(capture_from_env() if capture_content is None else capture_content, redact)
    _state.active = made = Telemetry(providers, capture, agent_name, per_event=detail == "per-event")
    return made


def disable() -> None:
    """Turn telemetry off: stop observing, flush and shut down the providers dshpy built. A no-op when off."""
    current, _state.active = _state.active, None
    if current is not None:
        current.close()


def enabled() -> bool:
    return _state.active is not None


def active() -> Telemetry | None:
    """The active telemetry, or ``None`` when it is off."""
    return _state.active


@contextlib.contextmanager
def running(on: bool, *, console: bool = False, capture_content: bool | None = None) -> Iterator[None]:
    """For a command: telemetry on for the block when ``on``, then flushed (exports sent) and off again."""
    if not on:
        yield
        return
    enable(console=console, capture_content=capture_content)
    try:
        yield
    finally:
        disable()


@dataclass(frozen=True, slots=True)
class TelemetrySwitch:
    """What a command line asked of telemetry: ``--otel/--no-otel``, ``--otel-console``, ``--otel-capture-content``.

    ``otel`` ``None`` leaves the choice to the profile's ``otel`` key, then ``$DSHPY_OTEL``
    (:func:`requested`); ``console`` implies it. ``capture_content`` ``None`` leaves that
    to ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``.
    """

    otel: bool | None = None
    console: bool = False
    capture_content: bool | None = None

    def running(self, configured: bool | None = None) -> contextlib.AbstractContextManager[None]:
        """:func:`running`, on when the switch, ``configured`` (a profile's ``otel``) or the environment says so."""
        on = requested(True if self.console and self.otel is None else self.otel, configured)
        return running(on, console=self.console, capture_content=self.capture_content)


# -- the entry points the rest of dshpy calls -------------------------------------------------------


def observe_agent(agent: Any) -> None:
    """Called by every new :class:`~dshpy.agent.Agent`: its hooks become spans when telemetry is on."""
    if _state.active is not None:
        _state.active.instrument_agent(agent)


def compaction_span(
    session: Session, *, reason: str | None = None, **attributes: Any
) -> contextlib.AbstractContextManager[Any]:
    """Wrap one compaction of ``session`` in a ``dshpy.compaction`` span (a no-op context when telemetry is off).

    ::

        with compaction_span(session, reason="context-window", **{"dshpy.compaction.events": 120}) as span:
            ...  # summarize, then append compaction/start … compaction/end in one batch

    The span is a child of the session's open step (else turn, else the caller's
    span) and carries ``session.id``, the turn and step numbers, ``reason``
    (``dshpy.compaction.reason``) and ``attributes``; it records the error if the block
    raises. The block may add attributes with ``span.set_attribute(...)`` (``span`` is
    ``None`` when telemetry is off). Compactions are also counted
    (``dshpy.compactions``) from the logged ``compaction/end`` events, with or without it.
    """
    if _state.active is None:
        return _OFF
    return _state.active.compaction_span(session, reason, attributes)


def remote_parent(
    params: Mapping[str, Any], headers: Mapping[str, str] | None = None
) -> contextlib.AbstractContextManager[Any]:
    """For a JSON-RPC method: the request's W3C trace context (``params._meta``, else headers) current while it runs."""
    if _state.active is None:
        return _OFF
    from dshpy.telemetry.propagation import extracted

    return extracted(params, headers)


def captured_context() -> Any:
    """The trace context current now, for work queued to run later (``None`` when telemetry is off)."""
    if _state.active is None:
        return None
    from dshpy.telemetry.propagation import captured

    return captured()


def within_context(context: Any) -> contextlib.AbstractContextManager[Any]:
    """Run the block in a context :func:`captured_context` returned (as it is, for ``None``)."""
    if context is None or _state.active is None:
        return _OFF
    from dshpy.telemetry.propagation import within

    return within(context)
