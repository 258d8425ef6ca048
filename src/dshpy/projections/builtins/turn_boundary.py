"""``turn_boundary``: where the open turn and the latest step begin and end.

Exactly the projection of the seed (chapter 9, §9.5.3, dsh's ``turnBoundary``,
``stateVersion`` 2), so its cached JSON equals dsh's row value: ``turn/start`` sets
``openTurnStartSeq`` and ``lastTurn``; ``turn/end`` clears ``openTurnStartSeq``;
``step/start`` sets ``lastStepStartSeq`` and ``lastStepBoundary = {kind: "start"}``;
``step/end`` sets ``lastStepBoundary = {kind: "end"}``. Nothing else changes it.
"""

from __future__ import annotations

from typing import Literal

from dshpy.core.events import SessionEvent
from dshpy.projections.definition import ProjectionDefinition, ProjectionState

__all__ = ["TURN_BOUNDARY", "StepBoundary", "TurnBoundaryState"]


class StepBoundary(ProjectionState):
    kind: Literal["start", "end"]
    seq: int


class TurnBoundaryState(ProjectionState):
    open_turn_start_seq: int | None = None
    """Seq of the open turn's ``turn/start``; ``None`` between turns."""
    last_step_start_seq: int | None = None
    last_step_boundary: StepBoundary | None = None
    last_turn: int = 0
    """Number of the latest turn started (0 before the first)."""


def apply_turn_boundary(state: TurnBoundaryState, event: SessionEvent) -> TurnBoundaryState:
    kind = event.type
    if kind == "turn/start":
        turn = event.data.get("turn") if isinstance(event.data, dict) else None
        if type(turn) is not int:
            return state
        return state.evolve(open_turn_start_seq=event.seq, last_turn=turn)
    if kind == "turn/end":
        return state.evolve(open_turn_start_seq=None)
    if kind == "step/start":
        boundary = StepBoundary(kind="start", seq=event.seq)
        return state.evolve(last_step_start_seq=event.seq, last_step_boundary=boundary)
    if kind == "step/end":
        return state.evolve(last_step_boundary=StepBoundary(kind="end", seq=event.seq))
    return state


TURN_BOUNDARY: ProjectionDefinition[TurnBoundaryState] = ProjectionDefinition(
    key="turn_boundary",
    state_version=2,
    state_schema=TurnBoundaryState,
    init=TurnBoundaryState,
    apply=apply_turn_boundary,
    types=frozenset({"turn/start", "turn/end", "step/start", "step/end"}),
)
"""The seed's ``turnBoundary`` projection (state_version 2, as in dsh)."""
