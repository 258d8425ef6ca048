"""Named configurations in ``$DSHPY_HOME/config.toml``, shared by the SDK and the server.

::

    [profiles.work]                     # or a bare [work] table
    store = "sqlite:////srv/agent/sessions.db"
    model = "deepseek-chat"
    base_url = "https://api.deepseek.com"
    max_tokens = 4096
    system = "Be brief."
    connect_timeout = 10                # seconds (defaults: dshpy.llm.config)
    read_timeout = 120                  # the longest silence of the model server
    total_timeout = 1800                # the whole answer (default: no limit)
    otel = true                         # OpenTelemetry traces and metrics (OTEL_* configure where they go)
    memory = true                       # run/chat/serve: the session_search and session_read tools (default: off)
    memory_scope = "cwd"                # what they see: "cwd" (this project's sessions) or "all"
    tools = "all"                       # built-in tools: "all", "read", "none", or names ("read,grep,bash")
    permissions = "workspace-write"     # read-only | workspace-write | danger-full-access ($DSH_PERMISSION_MODE)
    approval = "ask"                    # ask | never (default: the preset's)
    allow_unsandboxed_shell = false     # run shell commands unconfined when bubblewrap is missing

Every key is optional. ``sdk`` and ``default`` work without a file (all defaults:
the default store, ``$DEEPSEEK_MODEL`` / ``$DEEPSEEK_BASE_URL`` or the built-in
model); any other name must exist in the file. Values are checked on loading: a
malformed ``base_url`` or a timeout that is not a positive number is a
:class:`ProfileError` naming the key, not a model call that fails later.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dshpy.errors import ConfigError
from dshpy.storage.urls import dshpy_home

if TYPE_CHECKING:
    from dshpy.llm.config import ModelTimeouts

__all__ = ["BUILTIN_PROFILES", "Profile", "ProfileError", "config_path", "load_profile"]

BUILTIN_PROFILES = frozenset({"sdk", "default"})


class ProfileError(ConfigError):
    """The profile does not exist, or the config file is not valid."""


@dataclass(frozen=True, slots=True)
class Profile:
    """One named configuration; ``None`` means "not set" (a flag, the environment or the built-in default decides).

    ``store`` is a store URL; the three timeouts are seconds for the server's model
    requests (see :meth:`timeouts` for which value wins).
    """

    name: str
    store: str | None = None
    model: str | None = None
    base_url: str | None = None
    max_tokens: int | None = None
    system: str | None = None
    connect_timeout: float | None = None
    read_timeout: float | None = None
    total_timeout: float | None = None
    otel: bool | None = None
    """Turn telemetry on (or off) for commands run with this profile, unless their ``--otel`` flag says otherwise."""
    memory: bool | None = None
    """Give the agent the ``session_search`` / ``session_read`` tools (``dshpy run|chat|serve``, ``dshpy-runtime``;
    off unless set)."""
    memory_scope: str | None = None
    """What those tools see: ``cwd`` (sessions of the same working directory, the default) or ``all``."""
    tools: str | None = None
    """The built-in tool set (``all``, ``read``, ``none`` or comma-separated names; checked where it is used)."""
    permissions: str | None = None
    """The permission preset (``read-only``, ``workspace-write``, ``danger-full-access``)."""
    approval: str | None = None
    """The approval policy (``ask`` or ``never``; default: the preset's)."""
    allow_unsandboxed_shell: bool | None = None
    """Run shell commands unconfined when bubblewrap is missing (instead of refusing them)."""

    def timeouts(
        self, *, connect: float | None = None, read: float | None = None, total: float | None = None
    ) -> ModelTimeouts:
        """The model time limits: each explicit value (a flag) wins over the profile's, which wins over the default."""
        from dshpy.llm.config import ModelTimeouts  # not at import: ``import dshpy`` stays free of openai

        own = ModelTimeouts().with_overrides(
            connect=self.connect_timeout, read=self.read_timeout, total=self.total_timeout
        )
        return own.with_overrides(connect=connect, read=read, total=total)


def config_path(home: Path | None = None) -> Path:
    """Where profiles are read from: ``config.toml`` in ``home`` (default ``$DSHPY_HOME``); it need not exist."""
    return (home or dshpy_home()) / "config.toml"


def _table(document: dict[str, Any], name: str) -> dict[str, Any] | None:
    profiles = document.get("profiles")
    if isinstance(profiles, dict) and isinstance(profiles.get(name), dict):
        return dict(profiles[name])
    table = document.get(name)
    return dict(table) if isinstance(table, dict) and name != "profiles" else None


def load_profile(name: str = "sdk", home: Path | None = None) -> Profile:
    """The profile ``name`` from ``config.toml`` in ``home`` (default ``$DSHPY_HOME``)."""
    path = config_path(home)
    document: dict[str, Any] = {}
    if path.is_file():
        try:
            document = tomllib.loads(path.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
            raise ProfileError(f"{path}: {error}") from None
    table = _table(document, name)
    if table is None:
        if name in BUILTIN_PROFILES:
            return Profile(name)
        raise ProfileError(f"no profile {name!r} in {path} (add a [profiles.{name}] table)")
    fields: dict[str, Any] = {}
    for key, kind in (("store", str), ("model", str), ("base_url", str), ("max_tokens", int), ("system", str)):
        value = table.get(key)
        if value is None:
            continue
        if not isinstance(value, kind) or isinstance(value, bool):
            raise ProfileError(f"{path}: profile {name!r}: {key} must be a {kind.__name__}")
        fields[key] = value
    if fields.get("max_tokens") is not None and fields["max_tokens"] < 1:
        raise ProfileError(f"{path}: profile {name!r}: max_tokens must be positive")
    if fields.get("base_url") is not None:
        from dshpy.llm.config import ModelConfigError, check_base_url

        try:
            check_base_url(fields["base_url"].rstrip("/"))
        except ModelConfigError as error:
            raise ProfileError(f"{path}: profile {name!r}: base_url: {error}") from None
    otel = table.get("otel")
    if otel is not None:
        if not isinstance(otel, bool):
            raise ProfileError(f"{path}: profile {name!r}: otel must be true or false")
        fields["otel"] = otel
    for key in ("connect_timeout", "read_timeout", "total_timeout"):
        value = table.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
            raise ProfileError(f"{path}: profile {name!r}: {key} must be a positive number of seconds, not {value!r}")
        fields[key] = float(value)
    memory = table.get("memory")
    if memory is not None:
        if not isinstance(memory, bool):
            raise ProfileError(f"{path}: profile {name!r}: memory must be true or false, not {memory!r}")
        fields["memory"] = memory
    scope = table.get("memory_scope")
    if scope is not None:
        if scope not in ("cwd", "all"):
            raise ProfileError(f'{path}: profile {name!r}: memory_scope must be "cwd" or "all", not {scope!r}')
        fields["memory_scope"] = scope
    fields.update(_tool_fields(table, f"{path}: profile {name!r}"))
    return Profile(name, **fields)


_CHOICES = {
    "permissions": ("read-only", "workspace-write", "danger-full-access"),
    "approval": ("ask", "never"),
}


def _tool_fields(table: dict[str, Any], where: str) -> dict[str, Any]:
    """The built-in tool and permission keys (``tools``, ``permissions``, ``approval``, ``allow_unsandboxed_shell``)."""
    fields: dict[str, Any] = {}
    tools = table.get("tools")
    if tools is not None:
        if not isinstance(tools, str):
            raise ProfileError(f"{where}: tools must be a string (all, read, none, or comma-separated tool names)")
        fields["tools"] = tools
    for key, choices in _CHOICES.items():
        value = table.get(key)
        if value is None:
            continue
        if value not in choices:
            raise ProfileError(f"{where}: {key} must be one of {', '.join(choices)}, not {value!r}")
        fields[key] = value
    unsandboxed = table.get("allow_unsandboxed_shell")
    if unsandboxed is not None:
        if not isinstance(unsandboxed, bool):
            raise ProfileError(f"{where}: allow_unsandboxed_shell must be true or false, not {unsandboxed!r}")
        fields["allow_unsandboxed_shell"] = unsandboxed
    return fields
