"""Lifecycle point names a plugin subscribes to: dsh's, and dshpy's own hook names.

dsh names its dispatch points ``agent/…`` and ``session/…`` (the runtime's catalog,
0.2.1rc2); dshpy's agent names its hooks without the prefix. Both spellings work in
``ctx.on(name, handler)``; a dsh name resolves to the dshpy point that runs at the
same moment:

=======================  ===================  =======================================
dsh                      dshpy                when
=======================  ===================  =======================================
``agent/pre-step``       ``pre-step``         before each step (``payload.block(why)``)
``agent/request``        ``model-request``    each model request is about to be sent
``agent/request-error``  ``request-error``    a model request failed (attempt logged)
``agent/turn-stopping``  ``turn-stopping``    the model answered without tool calls
``session/created``      (same)               a live session entered the store's service
``session/flush``        (same)               a flush made events durable (seq range)
``session/disposed``     (same)               a session was closed and released
=======================  ===================  =======================================

dshpy's other hooks (``turn-start``, ``tool-call``, ``tool-start``, ``tool-end``,
``turn-end``) have no dsh counterpart of the same meaning, and dsh's other points
(``agent/created``, ``agent/status``, ``agent/inbox/*``, ``session/event``, …) are
not offered: a name neither side knows is refused, listing the known ones.
"""

from __future__ import annotations

from types import MappingProxyType

from dshpy.agent.hooks import HOOK_NAMES
from dshpy.storage.notices import SESSION_POINTS

__all__ = ["AGENT_POINTS", "DSH_AGENT_POINTS", "SESSION_POINTS", "agent_hook", "known_points"]

DSH_AGENT_POINTS: MappingProxyType[str, str] = MappingProxyType(
    {
        "agent/pre-step": "pre-step",
        "agent/request": "model-request",
        "agent/request-error": "request-error",
        "agent/turn-stopping": "turn-stopping",
    }
)
"""dsh's agent point → the dshpy hook that runs at the same moment."""

AGENT_POINTS: frozenset[str] = frozenset(HOOK_NAMES) | frozenset(DSH_AGENT_POINTS)


def agent_hook(name: str) -> str | None:
    """The dshpy hook for an agent point (either spelling), or ``None`` if ``name`` is not one."""
    if name in HOOK_NAMES:
        return name
    return DSH_AGENT_POINTS.get(name)


def known_points() -> list[str]:
    """Every point name `ctx.on` accepts, sorted (for the message that refuses an unknown one)."""
    return sorted(AGENT_POINTS | frozenset(SESSION_POINTS))
