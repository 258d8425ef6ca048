"""The model flags shared by ``dshpy run``, ``dshpy chat`` and ``dshpy serve``: time limits and compaction.

Each time-limit flag overrides the profile's ``*_timeout`` key, which overrides the
default (the defaults and their reasons: :mod:`dshpy.llm.config`). The compaction
flags override ``config.toml``'s ``[models."…"] context_window`` and
``[compaction] auto`` (:mod:`dshpy.sdk.model_settings`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

__all__ = ["compaction_options", "model_timeout_options"]

F = TypeVar("F", bound=Callable[..., Any])

_SECONDS = click.FloatRange(min=0, min_open=True)


def model_timeout_options(func: F) -> F:
    """Add ``--connect-timeout``, ``--read-timeout`` and ``--total-timeout`` (seconds; positive)."""
    options = [
        click.option(
            "--connect-timeout", type=_SECONDS, metavar="SECONDS", help="Limit for connecting to the model (10)."
        ),
        click.option(
            "--read-timeout",
            type=_SECONDS,
            metavar="SECONDS",
            help="Longest wait for the model's answer to start or continue (120).",
        ),
        click.option(
            "--total-timeout", type=_SECONDS, metavar="SECONDS", help="Limit for a whole answer (default: none)."
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def compaction_options(func: F) -> F:
    """Add ``--context-window TOKENS`` and ``--auto-compact/--no-auto-compact`` (default: the config file's)."""
    options = [
        click.option(
            "--context-window",
            type=click.IntRange(min=1),
            metavar="TOKENS",
            help="The model's context window (default: config.toml's [models.NAME], else dshpy's table).",
        ),
        click.option(
            "--auto-compact/--no-auto-compact",
            default=None,
            help="Compact the context automatically when it fills up (default: on, or config.toml's [compaction]).",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func
