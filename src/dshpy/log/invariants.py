"""Lifecycle invariants: turn and step nesting, numbering, and tool-call pairing.

:class:`Lifecycle` follows a log one event at a time. ``check`` is pure and raises
:class:`~dshpy.errors.InvariantError` naming the seq and the rule; ``apply`` moves
the state on. The live session checks every candidate before it commits, and every
backend replays stored logs through :func:`validate`, so a log that breaks a rule
is refused at the first bad event instead of confusing the model later.

Rules (dsh's invariant companion, with the stricter read-side checks of format v4):

* ``turn/start`` opens turn *n* = previous + 1, only when no turn is open;
  ``turn/end`` closes the open turn, never over an open step.
* ``step/start`` opens step *k* = previous + 1 of the open turn; ``step/end`` closes
  it, and may not leave a tool call the model asked for unanswered.
* ``system/message``, ``developer/message``, ``assistant/message``,
  ``assistant/attempt`` and ``tool/call`` name the open turn and step;
  ``request/header``, ``request/context`` and ``todo/write`` need an open turn.
* A ``tool/call`` starts a call the step's ``assistant/message`` advertised, with
  the same name and arguments, once. An appended ``tool/result`` answers an
  advertised call of the open step exactly once; a call that never started may
  only be answered by the synthetic ``TOOL_NOT_STARTED`` repair result. A
  replacing ``tool/result`` (pruning) only needs an open turn.
* Everything else (``user/message``, ``session/end-seed``, plugin records, …) may
  appear anywhere.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from dshpy.core.events import SessionEvent
from dshpy.core.vocabulary import IN_STEP_EVENT_TYPES, IN_TURN_EVENT_TYPES
from dshpy.errors import InvariantError

__all__ = ["Lifecycle", "PendingCall", "validate"]

REPAIR_RESULT_PREFIXES = ("interrupted-tool-result-", "forked-tool-result-")


@dataclass(slots=True)
class PendingCall:
    """A tool call advertised by the open step's assistant message."""

    turn: int
    step: int
    name: str
    arguments: str
    call_seq: int | None = None
    answered: bool = False


@dataclass(slots=True)
class Lifecycle:
    """Turn/step/tool-call state after some prefix of a log."""

    open_turn: int | None = None
    open_step: int | None = None
    last_turn: int = 0
    last_step: int = 0
    calls: dict[str, PendingCall] = field(default_factory=dict)

    @property
    def next_turn(self) -> int:
        """The number the next ``turn/start`` must carry (forks continue their parent's count)."""
        return self.last_turn + 1

    def copy(self) -> Lifecycle:
        clone = Lifecycle(self.open_turn, self.open_step, self.last_turn, self.last_step)
        clone.calls = {
            key: PendingCall(c.turn, c.step, c.name, c.arguments, c.call_seq, c.answered)
            for key, c in self.calls.items()
        }
        return clone

    def unanswered(self) -> list[str]:
        """Call ids the open step advertised and has not answered, in advertised order."""
        return [call_id for call_id, call in self.calls.items() if not call.answered]

    # -- checking -----------------------------------------------------------------

    def check(self, event: SessionEvent) -> None:
        """Raise :class:`InvariantError` if ``event`` may not follow the current state."""
        kind = event.type
        data: Any = event.data
        if kind == "turn/start":
            if self.open_turn is not None:
                self._fail(event, "turn-nesting", f"turn/start while turn {self.open_turn} is still open")
            if data["turn"] != self.next_turn:
                self._fail(event, "turn-numbering", f"turn/start {data['turn']} but the next turn is {self.next_turn}")
        elif kind == "turn/end":
            if self.open_turn is None or data["turn"] != self.open_turn:
                self._fail(
                    event,
                    "turn-nesting",
                    f"turn/end {data['turn']} does not match the open turn "
                    f"({self.open_turn if self.open_turn is not None else 'none'})",
                )
            if self.open_step is not None:
                self._fail(event, "step-nesting", f"turn/end while step {self.open_step} is still open")
        elif kind == "step/start":
            self._need_turn(event, data["turn"])
            if self.open_step is not None:
                self._fail(event, "step-nesting", f"step/start while step {self.open_step} is still open")
            if data["step"] != self.last_step + 1:
                self._fail(
                    event, "step-numbering", f"step/start {data['step']} but the next step is {self.last_step + 1}"
                )
        elif kind == "step/end":
            self._need_step(event, data)
            pending = self.unanswered()
            if pending:
                self._fail(event, "unanswered-tool-call", f"step/end leaves tool call {pending[0]} unanswered")
        elif kind in IN_STEP_EVENT_TYPES:
            self._need_step(event, data)
            if kind == "assistant/message":
                self._check_advertised(event, data)
            elif kind == "tool/call":
                self._check_call(event, data)
        elif kind == "tool/result":
            if event.surface_op == "append":
                self._need_step(event, data)
                self._check_result(event, data)
            elif self.open_turn is None:
                self._fail(event, "outside-turn", "a replacing tool/result needs an open turn")
        elif kind in IN_TURN_EVENT_TYPES and self.open_turn is None:
            self._fail(event, "outside-turn", f"{kind} must occur inside a turn")

    def _fail(self, event: SessionEvent, rule: str, detail: str) -> None:
        raise InvariantError(
            f"seq {event.seq} ({event.type}): {detail}", rule=rule, event_type=event.type, seq=event.seq
        )

    def _need_turn(self, event: SessionEvent, turn: int) -> None:
        if self.open_turn is None:
            self._fail(event, "outside-turn", f"{event.type} outside any turn")
        if turn != self.open_turn:
            self._fail(event, "turn-mismatch", f"{event.type} names turn {turn} but turn {self.open_turn} is open")

    def _need_step(self, event: SessionEvent, data: Any) -> None:
        self._need_turn(event, data["turn"])
        if self.open_step is None:
            self._fail(event, "outside-step", f"{event.type} outside any step")
        if data["step"] != self.open_step:
            self._fail(
                event, "step-mismatch", f"{event.type} names step {data['step']} but step {self.open_step} is open"
            )

    def _check_advertised(self, event: SessionEvent, data: Any) -> None:
        seen: set[str] = set()
        for block in data["message"]["content"]:
            if block.get("type") != "tool-call":
                continue
            call_id = block["id"]
            if call_id in self.calls or call_id in seen:
                self._fail(event, "duplicate-tool-call", f"tool call id {call_id} is advertised twice in one step")
            seen.add(call_id)

    def _check_call(self, event: SessionEvent, data: Any) -> None:
        call = self.calls.get(data["callId"])
        if call is None:
            self._fail(
                event, "unadvertised-tool-call", f"tool/call {data['callId']} matches no tool-call block of this step"
            )
            return
        if call.name != data["name"] or call.arguments != data["arguments"]:
            self._fail(
                event, "tool-call-mismatch", f"tool/call {data['callId']} differs from its advertised name or arguments"
            )
        if call.call_seq is not None:
            self._fail(
                event, "duplicate-tool-call", f"tool/call {data['callId']} was already started at seq {call.call_seq}"
            )
        if call.answered:
            self._fail(event, "duplicate-tool-call", f"tool/call {data['callId']} was already answered")

    def _check_result(self, event: SessionEvent, data: Any) -> None:
        message = data["message"]
        call_id = message["toolCallId"]
        call = self.calls.get(call_id)
        if call is None:
            self._fail(event, "orphan-tool-result", f"tool/result answers {call_id}, which this step never advertised")
            return
        if call.answered:
            self._fail(event, "duplicate-tool-result", f"tool call {call_id} is already answered")
        if call.call_seq is None:
            error = data.get("error") or {}
            repaired = (
                error.get("code") == "TOOL_NOT_STARTED"
                and message.get("isError") is True
                and str(message["id"]).startswith(REPAIR_RESULT_PREFIXES)
            )
            if not repaired:
                self._fail(
                    event,
                    "result-before-call",
                    f"tool/result answers {call_id} before its tool/call; only the TOOL_NOT_STARTED "
                    "repair may answer a call that never started",
                )

    # -- applying -----------------------------------------------------------------

    def apply(self, event: SessionEvent) -> None:
        """Advance past ``event`` (which :meth:`check` accepted)."""
        kind = event.type
        data: Any = event.data
        if kind == "turn/start":
            self.open_turn = data["turn"]
            self.last_turn = data["turn"]
            self.open_step = None
            self.last_step = 0
            self.calls = {}
        elif kind == "turn/end":
            self.open_turn = None
            self.open_step = None
            self.calls = {}
        elif kind == "step/start":
            self.open_step = data["step"]
            self.last_step = data["step"]
            self.calls = {}
        elif kind == "step/end":
            self.open_step = None
            self.calls = {}
        elif kind == "assistant/message":
            for block in data["message"]["content"]:
                if block.get("type") == "tool-call":
                    self.calls[block["id"]] = PendingCall(data["turn"], data["step"], block["name"], block["arguments"])
        elif kind == "tool/call":
            self.calls[data["callId"]].call_seq = event.seq
        elif kind == "tool/result" and event.surface_op == "append":
            self.calls[data["message"]["toolCallId"]].answered = True


def validate(events: Iterable[SessionEvent], state: Lifecycle | None = None) -> Lifecycle:
    """Check a whole log (or continue from ``state``); return the state after it.

    Raises :class:`InvariantError` at the first event that breaks a rule.
    """
    lifecycle = state if state is not None else Lifecycle()
    for event in events:
        lifecycle.check(event)
        lifecycle.apply(event)
    return lifecycle
