"""How many tokens a model's context window holds (and how many one answer may take), per model.

The agent records the window of every route in ``request/context.contextWindow``
(dsh does the same: the 0.2.1rc2 runtime logs ``1000000`` for its DeepSeek models),
so a session's own log is the first source; the built-in table covers DeepSeek's
models when a log predates any route. An explicit window (a ``--context-window``
flag, a config entry) always wins.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["DEFAULT_CONTEXT_WINDOWS", "DEFAULT_OUTPUT_LIMITS", "default_context_window", "default_output_limit"]

DEFAULT_CONTEXT_WINDOWS: Mapping[str, int] = {
    "deepseek-chat": 131_072,
    "deepseek-reasoner": 131_072,
    "deepseek-v4-flash": 1_000_000,
    "deepseek-v4-pro": 1_000_000,
    "deepseek-flash": 1_000_000,
}
"""Windows of DeepSeek's models: the OpenAI-compatible API's two names hold 128 Ki tokens (the
figure its context-length error quotes); the Anthropic-format models take dsh's catalog value."""


DEFAULT_OUTPUT_LIMITS: Mapping[str, int] = {
    "deepseek-chat": 8_192,
    "deepseek-reasoner": 65_536,
}
"""The most output tokens one request of DeepSeek's OpenAI-compatible models may ask for (8K and 64K):
a summary call asking for more is refused by the provider, so the agent caps it here."""


def default_context_window(model: Any) -> int | None:
    """The built-in window of ``model``, or ``None`` for a model the table does not know."""
    return DEFAULT_CONTEXT_WINDOWS.get(model) if isinstance(model, str) else None


def default_output_limit(model: Any) -> int | None:
    """The built-in output cap of ``model``, or ``None`` for a model the table does not know."""
    return DEFAULT_OUTPUT_LIMITS.get(model) if isinstance(model, str) else None
