"""Finding plugins: the config file's ``[plugins]`` table and the ``dshpy.plugins`` entry points.

``$DSHPY_HOME/config.toml``::

    [plugins]
    load = ["my_plugins.memory", "my_plugins.audit:AuditPlugin"]   # a module, or module:object
    entry_points = true          # also every installed "dshpy.plugins" entry point (default: true)
    disable = ["noisy-plugin"]   # plugin names to leave out, wherever they come from

    [plugins.options."cross-session-memory"]                        # becomes ctx.options
    last = 10

A package ships a plugin by declaring an entry point in the ``dshpy.plugins`` group
(``[project.entry-points."dshpy.plugins"] memory = "my_package.memory"``). A loaded
object that is a class is instantiated without arguments; a module or any other
object is the plugin itself. Whatever cannot be imported or is not a plugin is a
:class:`~dshpy.plugins.host.PluginError` naming where it came from — never skipped silently.
"""

from __future__ import annotations

import importlib
import tomllib
from collections.abc import Mapping
from importlib.metadata import entry_points as installed_entry_points
from pathlib import Path
from typing import Any

from dshpy.storage.urls import dshpy_home

from .host import LoadedPlugin, PluginError, as_plugin

__all__ = ["ENTRY_POINT_GROUP", "load_plugins", "plugin_settings", "resolve_plugin"]

ENTRY_POINT_GROUP = "dshpy.plugins"
_KEYS = frozenset({"load", "entry_points", "disable", "options"})


def plugin_settings(config_file: Path | None = None) -> dict[str, Any]:
    """The checked ``[plugins]`` table of ``config_file`` (default ``$DSHPY_HOME/config.toml``; none: empty)."""
    path = config_file if config_file is not None else dshpy_home() / "config.toml"
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}
    try:
        table = tomllib.loads(raw.decode("utf-8")).get("plugins", {})
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise PluginError(f"{path}: not a valid TOML file: {error}") from None
    if not isinstance(table, dict):
        raise PluginError(f"{path}: [plugins] must be a table")
    unknown = sorted(set(table) - _KEYS)
    if unknown:
        raise PluginError(f"{path}: unknown key plugins.{unknown[0]} (known: {', '.join(sorted(_KEYS))})")
    for key in ("load", "disable"):
        value = table.get(key, [])
        if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
            raise PluginError(f"{path}: plugins.{key} must be a list of names, not {value!r}")
    if not isinstance(table.get("entry_points", True), bool):
        raise PluginError(f"{path}: plugins.entry_points must be true or false")
    options = table.get("options", {})
    if not isinstance(options, dict) or not all(isinstance(v, dict) for v in options.values()):
        raise PluginError(f'{path}: plugins.options must hold one table per plugin ([plugins.options."name"])')
    return {**table, "source": str(path)}


def resolve_plugin(reference: str, origin: str) -> Any:
    """Import ``module`` or ``module:attribute.path``; a class is instantiated (no arguments)."""
    module_name, _, attribute = reference.partition(":")
    try:
        value: Any = importlib.import_module(module_name)
    except ImportError as error:
        raise PluginError(f"{origin}: cannot import {module_name!r}: {error}") from None
    for part in attribute.split(".") if attribute else ():
        try:
            value = getattr(value, part)
        except AttributeError:
            raise PluginError(f"{origin}: {reference!r} has no attribute {part!r}") from None
    if isinstance(value, type):
        value = value()
    return value


def load_plugins(config_file: Path | None = None, *, entry_points: bool | None = None) -> list[LoadedPlugin]:
    """The plugins the config file names, then the installed entry points (unless turned off), minus ``disable``.

    ``entry_points`` overrides the file's ``plugins.entry_points``. Each comes with its
    ``[plugins.options."<name>"]`` table. A name found twice is a :class:`PluginError`.
    """
    settings = plugin_settings(config_file)
    source = settings.get("source", "config")
    found: list[LoadedPlugin] = []
    for reference in settings.get("load", []):
        origin = f"{source} plugins.load {reference!r}"
        found.append(LoadedPlugin(resolve_plugin(reference, origin), origin))
    use_entry_points = settings.get("entry_points", True) if entry_points is None else entry_points
    if use_entry_points:
        for point in installed_entry_points(group=ENTRY_POINT_GROUP):
            dist = getattr(point.dist, "name", None) or "an installed distribution"
            origin = f"entry point {point.name!r} ({ENTRY_POINT_GROUP}) of {dist}"
            try:
                loaded = point.load()
            except Exception as error:
                raise PluginError(f"{origin}: cannot load {point.value!r}: {type(error).__name__}: {error}") from None
            found.append(LoadedPlugin(loaded() if isinstance(loaded, type) else loaded, origin))
    disabled = set(settings.get("disable", []))
    options: Mapping[str, Mapping[str, Any]] = settings.get("options", {})
    chosen: dict[str, LoadedPlugin] = {}
    for item in found:
        name, _needs = as_plugin(item.plugin, item.origin)
        if name in disabled:
            continue
        if name in chosen:
            raise PluginError(f'two plugins are named "{name}": {chosen[name].origin} and {item.origin}')
        chosen[name] = LoadedPlugin(item.plugin, item.origin, dict(options.get(name, {})))
    return list(chosen.values())
