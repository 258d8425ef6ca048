"""``turn_boundary``: where the open turn and the latest step begin and end.

Exactly the projection of the seed (chapter 9, §9.5.3, dsh's ``turnBoundary``,
``stateVersion`` 2), so its cached JSON equals dsh's row value: ``turn/start`` sets
``openTurnStartSeq`` and ``lastTurn``; ``turn/end`` clears ``openTurnStartSeq``;
``step/start`` sets ``lastStepStartSeq`` and ``lastStepBoundary = {kind: "start"}``;
``step/end`` sets ``lastStepBoundary = {kind: "end"}``. Nothing else changes it.
"""

from __future__ import annotations

from collections.abc import Sequence
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


_TYPES = frozenset({"turn/start", "turn/end", "step/start", "step/end"})


def fold_turn_boundary(state: TurnBoundaryState, events: Sequence[SessionEvent]) -> TurnBoundaryState:
    """``state`` after ``events``, building the state (and its step boundary) once at the end."""
    open_turn_start_seq = state.open_turn_start_seq
    last_step_start_seq = state.last_step_start_seq
    last_turn = state.last_turn
    boundary: tuple[Literal["start", "end"], int] | None = None  # a new last step boundary, if any
    changed = False
    for event in events:
        kind = event.type
        if kind not in _TYPES:
            continue
        if kind == "turn/start":
            turn = event.data.get("turn") if isinstance(event.data, dict) else None
            if type(turn) is not int:
                continue
            open_turn_start_seq, last_turn = event.seq, turn
        elif kind == "turn/end":
            open_turn_start_seq = None
        elif kind == "step/start":
            last_step_start_seq = event.seq
            boundary = ("start", event.seq)
        else:  # step/end
            boundary = ("end", event.seq)
        changed = True
    if not changed:
        return state
    return state.evolve(
        open_turn_start_seq=open_turn_start_seq,
        last_step_start_seq=last_step_start_seq,
        last_step_boundary=state.last_step_boundary
        if boundary is None
        else StepBoundary(kind=boundary[0], seq=boundary[1]),
        last_turn=last_turn,
    )


def apply_turn_boundary(state: TurnBoundaryState, event: SessionEvent) -> TurnBoundaryState:
    return fold_turn_boundary(state, (event,))


TURN_BOUNDARY: ProjectionDefinition[TurnBoundaryState] = ProjectionDefinition(
    key="turn_boundary",
    state_version=2,
    state_schema=TurnBoundaryState,
    init=TurnBoundaryState,
    apply=apply_turn_boundary,
    types=_TYPES,
    apply_many=fold_turn_boundary,
)
"""The seed's ``turnBoundary`` projection (state_version 2, as in dsh)."""
