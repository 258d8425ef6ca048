"""dsh's names for the projections dshpy folds too: accepted wherever a projection key is.

dsh caches and reads its projections under camelCase keys (``turnBoundary``,
``tokenUsage``, ``sessionStats``), and the seed writes ``stateOf('turnBoundary')``.
dshpy's keys stay snake_case and canonical — they are what every store's projection
cache is keyed by, so renaming them would orphan every cached row — and dsh's names
are **aliases** that resolve to them. Only ``turnBoundary`` folds to the very JSON
dsh caches (same fold, same ``stateVersion``); ``tokenUsage`` and ``sessionStats``
name dshpy's counterparts, whose totals agree with dsh's but whose shapes are
dshpy's own. ``title`` and ``todos`` are spelled alike in both.
"""

from __future__ import annotations

from types import MappingProxyType

__all__ = ["DSH_PROJECTION_NAMES", "canonical_key"]

DSH_PROJECTION_NAMES: MappingProxyType[str, str] = MappingProxyType(
    {
        "turnBoundary": "turn_boundary",
        "tokenUsage": "usage",
        "sessionStats": "stats",
    }
)
"""dsh's projection key → the dshpy key it reads."""


def canonical_key(name: str) -> str:
    """dshpy's key for ``name``: an alias resolved, any other name unchanged."""
    return DSH_PROJECTION_NAMES.get(name, name)
