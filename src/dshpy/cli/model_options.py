"""The model time-limit flags shared by ``dshpy run``, ``dshpy chat`` and ``dshpy serve``.

Each flag overrides the profile's ``*_timeout`` key, which overrides the default
(the defaults and their reasons: :mod:`dshpy.llm.config`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

__all__ = ["model_timeout_options"]

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
