"""Which projections exist: one definition per key.

A key names one fold and its cached states. Two different definitions under one key
would read each other's cache rows, so registering a key again is accepted only for
the very same definition (a module imported twice, a plugin loaded twice); a
different ``state_version`` — or a different fold with the same version — is a
:class:`~dshpy.errors.ProjectionError` naming both.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from typing import Any

from dshpy.errors import ProjectionError
from dshpy.projections.builtins import BUILTINS
from dshpy.projections.definition import ProjectionDefinition, S
from dshpy.projections.names import DSH_PROJECTION_NAMES

__all__ = ["ProjectionRegistry", "default_registry"]


class ProjectionRegistry:
    """An ordered set of projection definitions, keyed by ``key``.

    Runners take the registry's definitions when they attach; a definition
    registered later joins a runner the first time it is asked for (see
    :func:`dshpy.projections.runner.state_of`).
    """

    def __init__(self, definitions: Iterable[ProjectionDefinition[Any]] = ()) -> None:
        self._definitions: dict[str, ProjectionDefinition[Any]] = {}
        self._lock = threading.Lock()
        for definition in definitions:
            self.register(definition)

    def register(self, definition: ProjectionDefinition[S]) -> ProjectionDefinition[S]:
        """Add ``definition``; returns it. Re-registering the same definition is a no-op."""
        if not isinstance(definition, ProjectionDefinition):
            raise ProjectionError(f"expected a ProjectionDefinition, got {type(definition).__name__}")
        if definition.key in DSH_PROJECTION_NAMES:
            raise ProjectionError(
                f'projection key "{definition.key}" is dsh\'s name for "{DSH_PROJECTION_NAMES[definition.key]}" '
                "and reads that projection; give the new one another key"
            )
        with self._lock:
            existing = self._definitions.get(definition.key)
            if existing is None:
                self._definitions[definition.key] = definition
                return definition
            if existing == definition:
                return definition
            if existing.state_version != definition.state_version:
                raise ProjectionError(
                    f'projection "{definition.key}" is already registered with state_version '
                    f"{existing.state_version}; refusing state_version {definition.state_version}"
                )
            raise ProjectionError(
                f'projection "{definition.key}" (state_version {definition.state_version}) is already registered '
                "by a different definition; give the new one its own key or a new state_version"
            )

    def unregister(self, key: str) -> None:
        """Remove ``key`` (missing keys are ignored). Runners already attached keep their state."""
        with self._lock:
            self._definitions.pop(key, None)

    def get(self, key: str) -> ProjectionDefinition[Any] | None:
        return self._definitions.get(key)

    def __getitem__(self, key: str) -> ProjectionDefinition[Any]:
        definition = self._definitions.get(key)
        if definition is None:
            known = ", ".join(self._definitions) or "none"
            raise ProjectionError(f'no projection registered under "{key}" (registered: {known})')
        return definition

    def __contains__(self, key: object) -> bool:
        return key in self._definitions

    def __iter__(self) -> Iterator[ProjectionDefinition[Any]]:
        return iter(tuple(self._definitions.values()))

    def __len__(self) -> int:
        return len(self._definitions)

    def keys(self) -> tuple[str, ...]:
        return tuple(self._definitions)

    def copy(self) -> ProjectionRegistry:
        """A new registry with the same definitions (extend it without touching this one)."""
        return ProjectionRegistry(self)

    def __repr__(self) -> str:
        return f"<ProjectionRegistry {list(self._definitions)}>"


_default: dict[str, ProjectionRegistry] = {}
_default_lock = threading.Lock()


def default_registry() -> ProjectionRegistry:
    """The process-wide registry, holding the built-ins; runners use it unless given another."""
    registry = _default.get("default")
    if registry is None:
        with _default_lock:
            registry = _default.get("default")
            if registry is None:
                registry = _default["default"] = ProjectionRegistry(BUILTINS)
    return registry
