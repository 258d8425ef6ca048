"""Hooks: plugin code that runs at fixed points of a turn (dsh's ``agent/*`` waterfalls, in small).

``agent.on(name, handler)`` registers a sync or async ``handler(payload)``; handlers
run in registration order and may call ``payload.agent.inject(...)`` to put a user
message before the next step. The points:

* ``turn-start`` (:class:`TurnStart`) — the turn is open and its prompt claimed;
* ``pre-step`` (:class:`PreStep`) — before each ``step/start``; ``payload.block(reason)``
  ends the turn ``blocked`` instead;
* ``tool-call`` (:class:`ToolCallHook`) — before a tool body runs; ``payload.deny(reason)``
  answers the call with an error result instead of running it;
* ``turn-stopping`` (:class:`TurnStopping`) — the model answered without calling a
  tool; a handler that injects a message makes the turn go on with another step.

Five more points only observe (telemetry is built on them, :mod:`dshpy.telemetry`):

* ``model-request`` (:class:`ModelRequest`) — each model request (every retry too)
  is about to be sent; its ``response`` is filled in as the answer streams in;
* ``request-error`` (:class:`RequestError`) — a model request failed; its attempt is
  logged, and the loop is about to retry it or end the turn (dsh's ``agent/request-error``,
  which may also decide the retry — here the :class:`~dshpy.llm.retry.RetryPolicy` does);
* ``tool-start`` / ``tool-end`` (:class:`ToolStart`, :class:`ToolEnd`) — around each
  tool body, in the task that runs it (a denied or unknown tool too: its body is the
  refusal), so what a handler puts in the task's context the body sees;
* ``turn-end`` (:class:`TurnEnd`) — the turn is over, its ``turn/end`` logged and
  flushed, or it failed with an exception (``payload.error``).

A handler that raises ends the turn with an error (and the exception propagates):
a broken plugin must not go unnoticed.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, get_args

from dshpy.llm.client import ResponseInfo
from dshpy.log.messages import Message

if TYPE_CHECKING:
    from .tools import ToolOutcome
    from .updates import TurnResult

__all__ = [
    "HOOK_NAMES",
    "HookName",
    "Hooks",
    "ModelRequest",
    "PreStep",
    "RequestError",
    "ToolCallHook",
    "ToolEnd",
    "ToolStart",
    "TurnEnd",
    "TurnStart",
    "TurnStopping",
]

HookName = Literal[
    "turn-start",
    "pre-step",
    "tool-call",
    "turn-stopping",
    "model-request",
    "request-error",
    "tool-start",
    "tool-end",
    "turn-end",
]
HOOK_NAMES: frozenset[str] = frozenset(get_args(HookName))


@dataclass(slots=True)
class TurnStart:
    agent: Any
    turn: int
    prompt: dict[str, Any]
    """The user message that opened the turn."""


@dataclass(slots=True)
class PreStep:
    agent: Any
    turn: int
    step: int
    blocked: str | None = None

    def block(self, reason: str) -> None:
        """End the turn ``blocked`` instead of starting this step."""
        self.blocked = reason


@dataclass(slots=True)
class ToolCallHook:
    agent: Any
    turn: int
    step: int
    call_id: str
    name: str
    arguments: str
    denied: str | None = None

    def deny(self, reason: str) -> None:
        """Answer the call with an error result (``TOOL_DENIED``) instead of running it."""
        self.denied = reason


@dataclass(slots=True)
class TurnStopping:
    agent: Any
    turn: int
    step: int
    message: Message | None
    """The assistant message the model stopped with."""

    @property
    def text(self) -> str:
        return self.message.text if self.message is not None else ""


@dataclass(slots=True)
class ModelRequest:
    agent: Any
    turn: int
    step: int
    attempt: int
    """1 for the step's first request, then one more for each retry."""
    messages: list[dict[str, Any]]
    """The chat messages about to be sent (the log's derivation; read, never change them)."""
    tools: list[dict[str, Any]]
    """The tool schemas offered with them."""
    response: ResponseInfo = field(default_factory=ResponseInfo)
    """What the server says about its answer (its ``model``), filled in as the stream arrives."""


@dataclass(slots=True)
class RequestError:
    agent: Any
    turn: int
    step: int
    attempt: int
    """Which request of the step failed (1 for the first)."""
    failure: dict[str, Any]
    """The ``LlmFailure`` logged with the attempt (``code``, ``message``, …)."""

    @property
    def code(self) -> str:
        return str(self.failure.get("code", ""))


@dataclass(slots=True)
class ToolStart:
    agent: Any
    turn: int
    step: int
    call_id: str
    name: str
    arguments: str


@dataclass(slots=True)
class ToolEnd:
    agent: Any
    turn: int
    step: int
    call_id: str
    name: str
    outcome: ToolOutcome
    """What the call returned (an error result for a denied, unknown or failed tool)."""


@dataclass(slots=True)
class TurnEnd:
    agent: Any
    turn: int
    result: TurnResult | None
    """How the turn ended; ``None`` when it failed with :attr:`error`."""
    error: BaseException | None = None


Handler = Callable[[Any], Any]


class Hooks:
    """Handlers by hook name."""

    def __init__(self) -> None:
        self._handlers: dict[str, list[Handler]] = {name: [] for name in HOOK_NAMES}

    def on(self, name: str, handler: Handler) -> Callable[[], None]:
        """Register ``handler`` for ``name``; returns a function that unregisters it."""
        if name not in HOOK_NAMES:
            raise ValueError(f"unknown hook {name!r}; hooks are: {', '.join(sorted(HOOK_NAMES))}")
        handlers = self._handlers[name]
        handlers.append(handler)
        return lambda: handlers.remove(handler) if handler in handlers else None

    def has(self, name: str) -> bool:
        return bool(self._handlers[name])

    async def emit(self, name: str, payload: Any) -> None:
        for handler in tuple(self._handlers[name]):
            result = handler(payload)
            if inspect.isawaitable(result):
                await result
