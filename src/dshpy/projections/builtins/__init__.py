"""The built-in projections, one module each; :data:`BUILTINS` is what the default registry holds."""

from __future__ import annotations

from typing import Any

from dshpy.projections.builtins.lifecycle import LIFECYCLE
from dshpy.projections.builtins.stats import STATS
from dshpy.projections.builtins.title import TITLE
from dshpy.projections.builtins.todos import TODOS
from dshpy.projections.builtins.turn_boundary import TURN_BOUNDARY
from dshpy.projections.builtins.usage import USAGE
from dshpy.projections.definition import ProjectionDefinition

__all__ = ["BUILTINS", "LIFECYCLE", "STATS", "TITLE", "TODOS", "TURN_BOUNDARY", "USAGE"]

BUILTINS: tuple[ProjectionDefinition[Any], ...] = (TURN_BOUNDARY, USAGE, STATS, TITLE, TODOS, LIFECYCLE)
