"""Projections (layer L2): state derived from the event log, folded incrementally, cacheable.

* :mod:`~dshpy.projections.definition` — :class:`ProjectionDefinition` and the
  :class:`ProjectionState` base of every state;
* :mod:`~dshpy.projections.registry` — one definition per key; the default registry
  holds the built-ins;
* :mod:`~dshpy.projections.runner` — a runner per live session: :func:`state_of`,
  :func:`snapshot`, change listeners, the append guard, cache seeding;
* :mod:`~dshpy.projections.commands` — :func:`set_lifecycle`, a write command the
  lifecycle's guard checks;
* :mod:`~dshpy.projections.checkpoint` — cache rows (:class:`CachedState`) and when
  to trust them;
* :mod:`~dshpy.projections.builtins` — ``turn_boundary``, ``usage``, ``stats``,
  ``title``, ``todos``, ``lifecycle``.

Projections import only :mod:`dshpy.core` and :mod:`dshpy.log` (DESIGN.md §2).
"""

from dshpy.projections.builtins import BUILTINS, LIFECYCLE, STATS, TITLE, TODOS, TURN_BOUNDARY, USAGE
from dshpy.projections.builtins.lifecycle import (
    SESSION_STATE_TYPE,
    SESSION_STATES,
    TRANSITIONS,
    LifecycleState,
    SessionState,
)
from dshpy.projections.builtins.stats import StatsState
from dshpy.projections.builtins.title import TitleState, fallback_title
from dshpy.projections.builtins.todos import TodoItem, TodosState
from dshpy.projections.builtins.turn_boundary import StepBoundary, TurnBoundaryState
from dshpy.projections.builtins.usage import ModelUsage, Route, TokenCounts, UsageState
from dshpy.projections.checkpoint import CachedState, Restored, SeedOutcome, restore, restore_floor, usable
from dshpy.projections.commands import set_lifecycle
from dshpy.projections.definition import ProjectionDefinition, ProjectionState
from dshpy.projections.names import DSH_PROJECTION_NAMES, canonical_key
from dshpy.projections.registry import ProjectionRegistry, default_registry
from dshpy.projections.runner import (
    ChangeListener,
    ProjectionRunner,
    Seeding,
    Snapshot,
    attach,
    detach,
    on_change,
    runner_of,
    snapshot,
    state_of,
)

__all__ = [
    "BUILTINS",
    "DSH_PROJECTION_NAMES",
    "LIFECYCLE",
    "SESSION_STATES",
    "SESSION_STATE_TYPE",
    "STATS",
    "TITLE",
    "TODOS",
    "TRANSITIONS",
    "TURN_BOUNDARY",
    "USAGE",
    "CachedState",
    "ChangeListener",
    "LifecycleState",
    "ModelUsage",
    "ProjectionDefinition",
    "ProjectionRegistry",
    "ProjectionRunner",
    "ProjectionState",
    "Restored",
    "Route",
    "SeedOutcome",
    "Seeding",
    "SessionState",
    "Snapshot",
    "StatsState",
    "StepBoundary",
    "TitleState",
    "TodoItem",
    "TodosState",
    "TokenCounts",
    "TurnBoundaryState",
    "UsageState",
    "attach",
    "canonical_key",
    "default_registry",
    "detach",
    "fallback_title",
    "on_change",
    "restore",
    "restore_floor",
    "runner_of",
    "set_lifecycle",
    "snapshot",
    "state_of",
    "usable",
]
