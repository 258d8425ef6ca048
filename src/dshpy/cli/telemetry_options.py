"""The telemetry flags shared by ``dshpy run``, ``dshpy chat`` and ``dshpy serve``.

``--otel`` turns OpenTelemetry on for the command (the profile's ``otel`` key or
``DSHPY_OTEL=1`` do too); where spans and metrics go is the standard ``OTEL_*``
variables' business (README "Telemetry"). The exporters are flushed when the command
ends, so a short ``dshpy run`` loses nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import click

from dshpy.errors import ConfigError
from dshpy.telemetry import TelemetrySwitch

from .app import CliError

__all__ = ["telemetry_options", "telemetry_running"]

F = TypeVar("F", bound=Callable[..., Any])


def _switch(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """Fold the three flags into one ``telemetry`` argument (a :class:`TelemetrySwitch`), whichever comes last."""
    flags = ctx.meta.setdefault("dshpy.telemetry", {})
    flags[param.name] = value
    if len(flags) < 3:
        return None
    ctx.params["telemetry"] = TelemetrySwitch(flags["otel"], flags["otel_console"], flags["otel_capture_content"])
    return None


def telemetry_options(func: F) -> F:
    """Add ``--otel/--no-otel``, ``--otel-console`` and ``--otel-capture-content``, passed on as ``telemetry``."""
    options = [
        click.option(
            "--otel/--no-otel",
            default=None,
            expose_value=False,
            callback=_switch,
            help="Send OpenTelemetry traces and metrics, configured by the OTEL_* variables "
            "(default: the profile's otel, else $DSHPY_OTEL).",
        ),
        click.option(
            "--otel-console",
            is_flag=True,
            expose_value=False,
            callback=_switch,
            help="Print spans and metrics on stderr instead (implies --otel).",
        ),
        click.option(
            "--otel-capture-content",
            is_flag=True,
            default=None,
            expose_value=False,
            callback=_switch,
            help="Record prompts, answers and tool input/output on the spans (sensitive: off by default).",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


@contextlib.contextmanager
def telemetry_running(switch: TelemetrySwitch, configured: bool | None = None) -> Iterator[None]:
    """Telemetry on for the block when asked for; a missing extra or a bad ``OTEL_*`` setting is a usage error."""
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(switch.running(configured))
        except ConfigError as error:
            raise CliError(f"telemetry: {error}") from None
        yield
