"""Plugins: the seed's ``name`` / ``inject`` / ``apply(ctx)`` with ``ctx.on(point, handler)``.

* :mod:`~dshpy.plugins.host` — :class:`PluginHost` applies plugins against a store
  and attaches their handlers to agents; :class:`PluginContext` is their ``ctx``;
* :mod:`~dshpy.plugins.points` — the lifecycle points, dsh's names and dshpy's;
* :mod:`~dshpy.plugins.loading` — plugins from ``config.toml`` and the
  ``dshpy.plugins`` entry points.

::

    host = dshpy.PluginHost(store, dshpy.load_plugins())
    agent = Agent(store.create(), client)
    host.attach(agent)
"""

from dshpy.plugins.host import LoadedPlugin, Plugin, PluginContext, PluginError, PluginHost, as_plugin
from dshpy.plugins.loading import ENTRY_POINT_GROUP, load_plugins, plugin_settings, resolve_plugin
from dshpy.plugins.points import AGENT_POINTS, DSH_AGENT_POINTS, SESSION_POINTS, agent_hook, known_points

__all__ = [
    "AGENT_POINTS",
    "DSH_AGENT_POINTS",
    "ENTRY_POINT_GROUP",
    "SESSION_POINTS",
    "LoadedPlugin",
    "Plugin",
    "PluginContext",
    "PluginError",
    "PluginHost",
    "agent_hook",
    "as_plugin",
    "known_points",
    "load_plugins",
    "plugin_settings",
    "resolve_plugin",
]
