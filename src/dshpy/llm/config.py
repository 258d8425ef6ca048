"""A model client's settings: the route (:class:`ModelConfig`) and its time limits (:class:`ModelTimeouts`).

Both are checked when they are built, so a mistake in a config file, a flag or an
environment variable is reported once, naming the setting, before any request is
made. A malformed base URL in particular must not reach the HTTP layer: there it
looks like an unreachable server, which the agent would retry (and log) for
minutes before giving up.

Default time limits, and why:

* ``connect`` 10 s — a reachable server completes the TCP and TLS handshakes in
  well under a second, even across continents; an address that drops packets is
  better reported now than after the OS's own connect timeout (minutes).
* ``read`` 120 s — the longest silence allowed while waiting: for the answer's
  headers, and then between two chunks. Servers stream as they generate, so a gap
  that long means a dead connection or a stuck server; the generous margin is the
  time to first token of a long prompt (prefilling a 128k-token context, or a
  queued request at a busy provider).
* ``total`` none — the whole request, from sending to the last chunk. Off by
  default: a long answer that keeps streaming is healthy (a reasoning model may
  write for many minutes), and cutting it would bill its tokens and then retry it
  from scratch. Set one to bound a turn's wall-clock time.

A read or total timeout ends the attempt like any other transient failure: logged
as an ``assistant/attempt``, then retried by the agent's retry policy.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from urllib.parse import urlsplit

from dshpy.compaction.window import DEFAULT_CONTEXT_WINDOWS
from dshpy.errors import ConfigError

__all__ = [
    "API_KEY_HINT",
    "DEEPSEEK_OFFICIAL",
    "DEFAULT_BASE_URL",
    "DEFAULT_MODEL",
    "MESSAGES_BASE_URL",
    "MESSAGES_MODEL",
    "MissingApiKeyError",
    "ModelConfig",
    "ModelConfigError",
    "ModelTimeouts",
    "check_base_url",
]

DEFAULT_BASE_URL = "https://api.deepseek.com"
DEFAULT_MODEL = "deepseek-chat"
DEEPSEEK_OFFICIAL = "deepseek-official"
"""The provider dsh 0.2.1 talks to: DeepSeek's Anthropic-format Messages API (:mod:`dshpy.llm.anthropic`)."""
MESSAGES_BASE_URL = "https://api.deepseek.com/anthropic"
"""dsh's default base URL for ``deepseek-official`` (requests go to ``<base>/v1/messages``)."""
MESSAGES_MODEL = "deepseek-v4-flash"
"""The model dsh's SDK asks ``deepseek-official`` for by default."""
API_KEY_HINT = "set DEEPSEEK_API_KEY (e.g. export DEEPSEEK_API_KEY=sk-...; any non-empty value for a local server)"

_CONTEXT_WINDOWS = DEFAULT_CONTEXT_WINDOWS
"""Known windows, logged in ``request/context``; the compaction meter reads the same table."""


class ModelConfigError(ConfigError):
    """The model settings are not usable (malformed base URL, bad timeout, …); the message names the setting."""


class MissingApiKeyError(ModelConfigError):
    """No API key was configured; the message says how to set one."""


def check_base_url(url: str) -> str:
    """``url`` if it can address an OpenAI-compatible server, else :class:`ModelConfigError` saying what is wrong."""
    example = "e.g. https://api.deepseek.com or http://127.0.0.1:8000/v1"
    if not url or url != url.strip() or any(char.isspace() or ord(char) < 32 for char in url):
        raise ModelConfigError(f"malformed model base URL {url!r}: it contains spaces or control characters")
    try:
        parts = urlsplit(url)
    except ValueError as error:  # e.g. an unclosed IPv6 bracket
        raise ModelConfigError(f"malformed model base URL {url!r}: {error} ({example})") from None
    if parts.scheme.lower() not in ("http", "https") or not url.lower().startswith(f"{parts.scheme.lower()}://"):
        raise ModelConfigError(f"malformed model base URL {url!r}: it must start with http:// or https:// ({example})")
    if not parts.hostname:
        raise ModelConfigError(f"malformed model base URL {url!r}: it names no host ({example})")
    try:
        port = parts.port
    except ValueError:
        port = 0
    if port == 0 or (port is None and parts.netloc.endswith(":")):
        raise ModelConfigError(f"malformed model base URL {url!r}: the port must be a number from 1 to 65535")
    if parts.fragment or url.endswith("#"):
        raise ModelConfigError(f"malformed model base URL {url!r}: a base URL has no #fragment")
    return url


def _seconds(name: str, value: float | None, *, optional: bool) -> None:
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        allowed = "a positive number of seconds" + (" (or none)" if optional else "")
        raise ModelConfigError(f"{name} timeout must be {allowed}, not {value!r}")


@dataclass(frozen=True, slots=True)
class ModelTimeouts:
    """Time limits of one model request, in seconds (defaults and their reasons: module docstring)."""

    connect: float = 10.0
    """Opening the connection (TCP and TLS)."""
    read: float = 120.0
    """Any wait for the server: the answer's headers, then each chunk of the stream."""
    total: float | None = None
    """The whole request, headers to last chunk; ``None``: no limit."""

    def __post_init__(self) -> None:
        _seconds("connect", self.connect, optional=False)
        _seconds("read", self.read, optional=False)
        _seconds("total", self.total, optional=True)

    def with_overrides(
        self, *, connect: float | None = None, read: float | None = None, total: float | None = None
    ) -> ModelTimeouts:
        """These limits with each given (not ``None``) value replaced."""
        pairs = (("connect", connect), ("read", read), ("total", total))
        changes = {key: value for key, value in pairs if value is not None}
        return replace(self, **changes) if changes else self


def _provider_of(base_url: str) -> str:
    try:
        host = (urlsplit(base_url).hostname or "").lower()
    except ValueError:  # unparsable: check_base_url says why
        return "openai-compatible"
    if host == "deepseek.com" or host.endswith(".deepseek.com"):
        return "deepseek"
    if host == "openai.com" or host.endswith(".openai.com"):
        return "openai"
    return "openai-compatible"


@dataclass(frozen=True, slots=True)
class ModelConfig:
    """Where requests go, as whom, and how long to wait: the route that ``request/header`` and ``request/context`` log.

    The base URL is checked on construction (:func:`check_base_url`).
    """

    base_url: str = DEFAULT_BASE_URL
    api_key: str | None = None
    model: str = DEFAULT_MODEL
    provider: str = "deepseek"
    """The provider name logged in events (``deepseek``, ``openai``, ``openai-compatible``, …);
    ``deepseek-official`` means the Anthropic-format Messages API."""
    context_window: int | None = None
    timeouts: ModelTimeouts = field(default_factory=ModelTimeouts)

    def __post_init__(self) -> None:
        check_base_url(self.base_url)

    @classmethod
    def from_env(
        cls,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        model: str | None = None,
        provider: str | None = None,
        context_window: int | None = None,
        timeouts: ModelTimeouts | None = None,
        env: Mapping[str, str] | None = None,
    ) -> ModelConfig:
        """Explicit values, then ``DEEPSEEK_BASE_URL`` / ``DEEPSEEK_API_KEY`` / ``DEEPSEEK_MODEL``, then defaults.

        ``provider="deepseek-official"`` selects DeepSeek's Anthropic-format API, with
        dsh's defaults: base URL ``https://api.deepseek.com/anthropic``, model
        ``deepseek-v4-flash``. Any other provider (or none) is OpenAI-compatible.
        """
        environ = os.environ if env is None else env
        official = provider == DEEPSEEK_OFFICIAL
        fallback_url = MESSAGES_BASE_URL if official else DEFAULT_BASE_URL
        url = (base_url or environ.get("DEEPSEEK_BASE_URL") or fallback_url).rstrip("/")
        if not base_url and environ.get("DEEPSEEK_BASE_URL"):
            try:
                check_base_url(url)
            except ModelConfigError as error:
                raise ModelConfigError(f"{error} (from DEEPSEEK_BASE_URL)") from None
        chosen = model or environ.get("DEEPSEEK_MODEL") or (MESSAGES_MODEL if official else DEFAULT_MODEL)
        return cls(
            base_url=url,
            api_key=api_key or environ.get("DEEPSEEK_API_KEY") or None,
            model=chosen,
            provider=provider or _provider_of(url),
            context_window=context_window if context_window is not None else _CONTEXT_WINDOWS.get(chosen),
            timeouts=timeouts if timeouts is not None else ModelTimeouts(),
        )

    @property
    def wire_format(self) -> str:
        """``"messages"`` (Anthropic Messages API) for ``deepseek-official``, else ``"chat"`` (chat completions)."""
        return "messages" if self.provider == DEEPSEEK_OFFICIAL else "chat"

    def with_model(self, model: str) -> ModelConfig:
        return replace(self, model=model, context_window=_CONTEXT_WINDOWS.get(model))
