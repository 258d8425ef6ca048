"""Named configurations in ``$DSHPY_HOME/config.toml``, shared by the SDK and the server.

::

    [profiles.work]                     # or a bare [work] table
    store = "sqlite:////srv/agent/sessions.db"
    model = "deepseek-chat"
    base_url = "https://api.deepseek.com"
    max_tokens = 4096
    system = "Be brief."

Every key is optional. ``sdk`` and ``default`` work without a file (all defaults:
the default store, ``$DEEPSEEK_MODEL`` / ``$DEEPSEEK_BASE_URL`` or the built-in
model); any other name must exist in the file.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dshpy.storage.urls import dshpy_home

__all__ = ["BUILTIN_PROFILES", "Profile", "ProfileError", "config_path", "load_profile"]

BUILTIN_PROFILES = frozenset({"sdk", "default"})


class ProfileError(ValueError):
    """The profile does not exist, or the config file is not valid."""


@dataclass(frozen=True, slots=True)
class Profile:
    name: str
    store: str | None = None
    model: str | None = None
    base_url: str | None = None
    max_tokens: int | None = None
    system: str | None = None


def config_path(home: Path | None = None) -> Path:
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
    return Profile(name, **fields)
