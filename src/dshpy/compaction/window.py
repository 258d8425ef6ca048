"""How many tokens a model's context window holds, per model, and which window a session uses.

The agent records the window of every route in ``request/context.contextWindow``
(dsh does the same: the 0.2.1rc2 runtime logs ``1000000`` for its DeepSeek models),
so a session's own log is the first source; the built-in table covers DeepSeek's
models when a log predates any route. An explicit window (a ``--context-window``
flag, a config entry) always wins.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["DEFAULT_CONTEXT_WINDOWS", "default_context_window"]

DEFAULT_CONTEXT_WINDOWS: Mapping[str, int] = {
    "deepseek-chat": 131_072,
    "deepseek-reasoner": 131_072,
    "deepseek-v4-flash": 1_000_000,
    "deepseek-v4-pro": 1_000_000,
    "deepseek-flash": 1_000_000,
}
"""Windows of DeepSeek's models: the OpenAI-compatible API's two names hold 128 Ki tokens (the
figure its context-length error quotes); the Anthropic-format models take dsh's catalog value."""


def default_context_window(model: Any) -> int | None:
    """The built-in window of ``model``, or ``None`` for a model the table does not know."""
    return DEFAULT_CONTEXT_WINDOWS.get(model) if isinstance(model, str) else None
