"""Plugins as the seed writes them: a ``name``, the services it needs, and ``apply(ctx)``.

::

    name = "cross-session-memory"
    inject = ["sessions", "query"]          # the services apply() may use

    def apply(ctx):
        ctx.on("agent/turn-stopping", on_turn_stopping)   # dsh's names or dshpy's hook names
        ctx.on("session/flush", lambda p: print(p.first_seq, p.last_seq))

A plugin is any object with those attributes — a module, a class instance — so a
package can ship one as a module. A :class:`PluginHost` applies plugins against one
store: it checks the services first (a missing one is a :class:`PluginError` naming
it), calls ``apply`` with a :class:`PluginContext`, subscribes session points on the
store at once, and keeps agent points for the agents it is attached to
(:meth:`PluginHost.attach`, also for agents attached before a plugin was applied).
While a plugin's agent handler runs, :meth:`Agent.inject` sources messages as
``{"kind": "plugin:<name>"}``. Services: ``sessions`` (the store), ``query`` (a
:class:`~dshpy.query.SessionQuery` on it), plus any the host is given.
"""

from __future__ import annotations

import inspect
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from dshpy.agent.injection import INJECTING_PLUGIN
from dshpy.agent.loop import Agent
from dshpy.errors import ConfigError
from dshpy.query import SessionQuery
from dshpy.storage.contract import SessionStore
from dshpy.storage.notices import SESSION_POINTS

from .points import agent_hook, known_points

__all__ = ["LoadedPlugin", "Plugin", "PluginContext", "PluginError", "PluginHost", "as_plugin"]


class PluginError(ConfigError):
    """A plugin cannot be loaded or applied: not a plugin, a missing service, a duplicate name, a failing apply."""


@runtime_checkable
class Plugin(Protocol):
    """What a plugin provides (``inject``, the services it needs, is optional)."""

    name: str

    def apply(self, ctx: PluginContext) -> Any: ...


@dataclass(frozen=True, slots=True)
class LoadedPlugin:
    """A plugin with where it came from (for messages) and its options from the config file."""

    plugin: Any
    origin: str = "code"
    options: Mapping[str, Any] = field(default_factory=dict)


def as_plugin(value: Any, origin: str = "code") -> tuple[str, tuple[str, ...]]:
    """``(name, required services)`` of ``value``, or a :class:`PluginError` saying what it lacks."""
    name = getattr(value, "name", None)
    if not isinstance(name, str) or not name.strip():
        raise PluginError(f"{origin}: {value!r} is not a plugin: it has no 'name' string")
    if not callable(getattr(value, "apply", None)):
        raise PluginError(f'{origin}: plugin "{name}" has no apply(ctx) function')
    needs = getattr(value, "inject", ())
    if isinstance(needs, str) or not isinstance(needs, Sequence | frozenset | set):
        raise PluginError(f'{origin}: plugin "{name}": inject must be a list of service names, not {needs!r}')
    if not all(isinstance(item, str) for item in needs):
        raise PluginError(f'{origin}: plugin "{name}": inject must list service names (strings), not {needs!r}')
    return name, tuple(needs)


class PluginContext:
    """What ``apply(ctx)`` receives: ``ctx.on(point, handler)``, the services as attributes, ``ctx.options``."""

    def __init__(self, host: PluginHost, name: str, options: Mapping[str, Any]) -> None:
        self._host = host
        self.name = name
        self.options: Mapping[str, Any] = dict(options)
        """This plugin's table from the config file (``[plugins.options."<name>"]``), else empty."""

    def on(self, point: str, handler: Callable[[Any], Any]) -> Callable[[], None]:
        """Subscribe ``handler(payload)`` to ``point`` (dsh's name or dshpy's); returns a function that stops it."""
        return self._host._subscribe(self.name, point, handler)

    def __getattr__(self, service: str) -> Any:
        services = self._host.services
        if service in services:
            return services[service]
        raise AttributeError(
            f'plugin "{self.name}" has no service {service!r} (services: {", ".join(sorted(services))})'
        )


class PluginHost:
    """Applies plugins against one store and attaches their agent handlers to agents."""

    def __init__(
        self,
        store: SessionStore,
        plugins: Iterable[Any] = (),
        *,
        services: Mapping[str, Any] | None = None,
    ) -> None:
        self.store = store
        self.services: dict[str, Any] = {"sessions": store, "query": SessionQuery(store), **(services or {})}
        self.plugins: dict[str, Any] = {}
        self._agent_handlers: list[tuple[str, Callable[[Any], Any]]] = []
        self._agents: weakref.WeakSet[Agent] = weakref.WeakSet()
        self._stops: list[Callable[[], None]] = []
        self._applying: list[Callable[[], None]] = []  # the subscriptions of the plugin being applied
        for plugin in plugins:
            self.apply(plugin)

    def apply(self, plugin: Any, *, options: Mapping[str, Any] | None = None, origin: str = "code") -> str:
        """Apply one plugin (or a :class:`LoadedPlugin`); returns its name."""
        if isinstance(plugin, LoadedPlugin):
            plugin, origin, options = plugin.plugin, plugin.origin, {**plugin.options, **(options or {})}
        name, needs = as_plugin(plugin, origin)
        if name in self.plugins:
            raise PluginError(f'{origin}: a plugin named "{name}" is already applied')
        missing = [service for service in needs if service not in self.services]
        if missing:
            raise PluginError(
                f'{origin}: plugin "{name}" needs the service {missing[0]!r}, which this host does not offer '
                f"(services: {', '.join(sorted(self.services))})"
            )
        self.plugins[name] = plugin
        self._applying = []
        try:
            plugin.apply(PluginContext(self, name, options or {}))
        except Exception as error:
            for stop in self._applying:  # a half-applied plugin leaves nothing subscribed
                stop()
            del self.plugins[name]
            if isinstance(error, PluginError):
                raise
            raise PluginError(
                f'{origin}: plugin "{name}" failed in apply(): {type(error).__name__}: {error}'
            ) from error
        finally:
            self._applying = []
        return name

    def attach(self, agent: Agent) -> Callable[[], None]:
        """Give ``agent`` every plugin's agent handlers (and those of plugins applied later); returns a detacher."""
        stops = [agent.on(hook, handler) for hook, handler in self._agent_handlers]
        self._agents.add(agent)

        def detach() -> None:
            self._agents.discard(agent)
            for stop in stops:
                stop()

        return detach

    def close(self) -> None:
        """Unsubscribe every session-point handler from the store."""
        stops, self._stops = self._stops, []
        for stop in stops:
            stop()

    def _subscribe(self, plugin: str, point: str, handler: Callable[[Any], Any]) -> Callable[[], None]:
        if not callable(handler):
            raise PluginError(f'plugin "{plugin}": the handler for {point!r} is not callable')
        if point in SESSION_POINTS:
            stop = self.store.on(point, handler)
            self._stops.append(stop)
            self._applying.append(stop)
            return stop
        hook = agent_hook(point)
        if hook is None:
            raise PluginError(
                f'plugin "{plugin}": unknown lifecycle point {point!r} (known: {", ".join(known_points())})'
            )
        wrapped = _as_plugin_handler(plugin, handler)
        entry = (hook, wrapped)
        self._agent_handlers.append(entry)
        stops = [agent.on(hook, wrapped) for agent in list(self._agents)]

        def stop_all() -> None:
            if entry in self._agent_handlers:
                self._agent_handlers.remove(entry)
            for stop in stops:
                stop()

        self._applying.append(stop_all)
        return stop_all


def _as_plugin_handler(plugin: str, handler: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``handler`` run with :data:`INJECTING_PLUGIN` set, so what it injects is sourced to ``plugin``."""

    async def run(payload: Any) -> None:
        token = INJECTING_PLUGIN.set(plugin)
        try:
            result = handler(payload)
            if inspect.isawaitable(result):
                await result
        finally:
            INJECTING_PLUGIN.reset(token)

    return run
