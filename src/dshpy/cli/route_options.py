"""``--provider`` and ``--system-file`` for ``dshpy run`` and ``dshpy chat``.

The two flags are read where they are used (:func:`chosen_provider`,
:func:`system_file_text`) instead of being threaded through every command's
signature: the decorator takes them out of the keyword arguments and keeps them in
the click context.

* ``--provider deepseek-official`` talks to DeepSeek's Anthropic-format Messages API,
  as dsh does (:class:`~dshpy.llm.anthropic.AnthropicClient`); any other provider (or
  none) is OpenAI-compatible chat completions. Default: ``$DSHPY_PROVIDER``, else chat.
* ``--system-file FILE`` reads the system prompt from a file (``--system`` wins).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any, TypeVar

import click

__all__ = ["chosen_provider", "route_options", "system_file_text"]

F = TypeVar("F", bound=Callable[..., Any])
_KEY = "dshpy.route"


def route_options(func: F) -> F:
    """Add ``--provider NAME`` and ``--system-file FILE`` (kept in the click context, not passed on)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        click.get_current_context().meta[_KEY] = (kwargs.pop("provider", None), kwargs.pop("system_file", None))
        return func(*args, **kwargs)

    wrapped = click.option(
        "--system-file",
        type=click.Path(dir_okay=False),
        metavar="FILE",
        help="Read the system prompt from FILE (--system wins).",
    )(wrapper)
    wrapped = click.option(
        "--provider",
        metavar="NAME",
        help="deepseek-official: DeepSeek's Anthropic-format API, as dsh uses; otherwise OpenAI-compatible "
        "(default: $DSHPY_PROVIDER).",
    )(wrapped)
    return wrapped  # type: ignore[return-value]


def _route() -> tuple[str | None, str | None]:
    context = click.get_current_context(silent=True)
    found = context.find_root().meta.get(_KEY) if context is not None else None
    return found if isinstance(found, tuple) else (None, None)


def chosen_provider() -> str | None:
    """``--provider``, else ``$DSHPY_PROVIDER``, else ``None`` (OpenAI-compatible)."""
    return _route()[0] or os.environ.get("DSHPY_PROVIDER") or None


def system_file_text() -> str | None:
    """The ``--system-file`` text (a clear error naming the file when it cannot be read), or ``None``."""
    from dshpy.agent.system_prompt import SystemPromptError, read_system_file

    path = _route()[1]
    if path is None:
        return None
    try:
        return read_system_file(path)
    except SystemPromptError as error:
        raise click.ClickException(str(error)) from None
