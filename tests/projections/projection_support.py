"""Helpers for the projection tests: a controllable clock, an agent-like log writer, and its strategy.

``dshpy.testing.strategies`` draws logs op by op with seqs baked in; the projections
also need what it does not write (titles, lifecycle records, retries, tool errors,
several models, real timings), and the lifecycle guard may refuse a command, which
shifts every later seq. So the log here is drawn as *commands* that an
:class:`AgentWriter` turns into appends against the live session, in dsh's write order.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from dshpy import LifecycleError, Session, SessionEvent
from dshpy.projections import LIFECYCLE, SESSION_STATE_TYPE, TRANSITIONS, ProjectionDefinition, attach, state_of
from dshpy.testing.builders import text_stream, tool_result_data, user_message

T0 = 1_700_000_000_000

MODELS = ("deepseek-chat", "deepseek-reasoner", "deepseek-v4-flash")


class Clock:
    """A clock the test moves by hand (Session stamps every append with it)."""

    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> int:
        self.now += ms
        return self.now


def new_session(clock: Clock | None = None) -> Session:
    return Session.new(session_id="proj-session", clock=clock or Clock())


def fresh(definition: ProjectionDefinition[Any], events: Sequence[SessionEvent]) -> Any:
    """The reference: fold every event through ``apply`` from ``init()``, with no type routing."""
    state = definition.init()
    for event in events:
        state = definition.apply(state, event)
    return state


_ids = itertools.count(1)


def uid(prefix: str) -> str:
    return f"{prefix}-{next(_ids)}"


def usage_chunk(time: int, usage: dict[str, int]) -> dict[str, Any]:
    return {"type": "chunk", "time": time, "chunk": {"type": "usage", "usage": usage}}


@dataclass(frozen=True)
class StepPlan:
    """One step: failed attempts first (each optionally scheduled by llm/retry), then the message and its tools."""

    failed_attempts: int = 0
    retry_records: bool = False
    tool_errors: tuple[bool, ...] = ()
    """One entry per tool call; True for a result with isError."""
    usage: dict[str, int] = field(default_factory=lambda: {"inputTokens": 100, "outputTokens": 20})
    attempt_usage: dict[str, int] | None = field(default_factory=lambda: {"inputTokens": 50, "outputTokens": 3})
    ttft_ms: int = 40
    decode_ms: int = 200
    tool_ms: int = 15
    usage_in_message: bool = True
    empty_stream: bool = False


@dataclass(frozen=True)
class Turn:
    prompt: str = "hello"
    model: str = "deepseek-chat"
    steps: tuple[StepPlan, ...] = (StepPlan(),)
    close: bool = True


@dataclass(frozen=True)
class Prompt:
    text: str
    kind: str = "user"


@dataclass(frozen=True)
class Title:
    text: str
    by_user: bool = False


@dataclass(frozen=True)
class Todos:
    items: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class State:
    target: str
    reason: str | None = None


@dataclass(frozen=True)
class Advance:
    """A legal lifecycle move, chosen from the current state's successors by ``choice``."""

    choice: int


@dataclass(frozen=True)
class Idle:
    ms: int


Command = Turn | Prompt | Title | Todos | State | Advance | Idle


class AgentWriter:
    """Writes commands to a session the way dsh's agent loop would."""

    def __init__(self, session: Session, clock: Clock) -> None:
        self.session = session
        self.clock = clock
        self.refused: list[LifecycleError] = []

    def run(self, commands: Sequence[Command]) -> None:
        for command in commands:
            self.do(command)

    def do(self, command: Command) -> None:
        try:
            if isinstance(command, Turn):
                self.turn(command)
            elif isinstance(command, Prompt):
                message = user_message(command.text, message_id=uid("u"), kind=command.kind)
                self.append("user/message", message, surface_op="append")
            elif isinstance(command, Title):
                self.title(command)
            elif isinstance(command, Todos):
                todos = [{"content": c, "status": s} for c, s in command.items]
                self.append("todo/write", {"todos": todos})
            elif isinstance(command, State):
                data: dict[str, Any] = {"state": command.target}
                if command.reason is not None:
                    data["reason"] = command.reason
                self.append(SESSION_STATE_TYPE, data)
            elif isinstance(command, Advance):
                choices = sorted(TRANSITIONS[state_of(self.session, LIFECYCLE).state])
                if choices:
                    self.append(SESSION_STATE_TYPE, {"state": choices[command.choice % len(choices)]})
            else:
                self.clock.advance(command.ms)
        except LifecycleError as error:
            self.refused.append(error)

    def append(self, kind: str, data: Any, **options: Any) -> SessionEvent:
        self.clock.advance(1)
        return self.session.append(kind, data, **options)

    def title(self, command: Title) -> None:
        if command.by_user:
            self.append("session/title", {"title": command.text, "messageSeqs": [], "source": {"kind": "user"}})
            return
        human = [
            e.seq
            for e in self.session.events
            if e.type == "user/message" and e.data["source"].get("kind") == "user" and e.is_surface
        ]
        if not human:
            return
        source = {"kind": "provider", "provider": "deepseek"}
        self.append("session/title", {"title": command.text, "messageSeqs": human[:1], "source": source})

    def turn(self, plan: Turn) -> None:
        s = self.session
        turn = s.next_turn
        message = user_message(plan.prompt, message_id=uid("prompt"))
        self.append("turn/start", {"turn": turn})  # may raise LifecycleError: nothing else is written then
        header = {"config": {"provider": "deepseek", "model": plan.model}}
        for number, step in enumerate(plan.steps, start=1):
            last = number == len(plan.steps)
            self.append("step/start", {"turn": turn, "step": number})
            if number == 1:
                self.append("user/message", message, surface_op="append")
                self.append("request/header", {"header": header, "reason": "initial" if turn == 1 else "resume"})
                self.append("request/context", {"provider": "deepseek", "model": plan.model})
            self.step(turn, number, step, plan.model, calls=not last)
            self.append("step/end", {"turn": turn, "step": number})
        if plan.close:
            self.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})

    def step(self, turn: int, number: int, plan: StepPlan, model: str, *, calls: bool) -> None:
        retry_id = uid("retry")
        for attempt in range(plan.failed_attempts):
            if attempt and plan.retry_records:
                self.append(
                    "llm/retry",
                    {
                        "retryId": retry_id,
                        "turn": turn,
                        "step": number,
                        "provider": "deepseek",
                        "retry": attempt,
                        "mode": "normal",
                        "policyKey": "default",
                        "maxRetries": 5,
                        "delayMs": 10,
                        "failure": {"message": "overloaded", "code": "HTTP_529"},
                    },
                )
                self.clock.advance(10)
                self.append("llm/retry-started", {"retryId": retry_id, "turn": turn, "step": number, "retry": attempt})
            first = self.clock.advance(plan.ttft_ms)
            stream = text_stream("partial", time0=first)[:2]
            if plan.attempt_usage is not None:
                stream.append(usage_chunk(first + 2, plan.attempt_usage))
            self.clock.advance(plan.decode_ms)
            self.append("assistant/attempt", {"turn": turn, "step": number, "stream": stream})
        tool_calls = [(uid("call"), "read_file", '{"path":"a.txt"}') for _ in plan.tool_errors] if calls else []
        first = self.clock.advance(plan.ttft_ms)
        stream = [] if plan.empty_stream else text_stream(f"step {number}", time0=first)[:3]
        if not plan.empty_stream:
            stream.append(usage_chunk(first + 3, plan.usage))
        self.clock.advance(plan.decode_ms)
        content: list[dict[str, Any]] = [{"type": "text", "text": f"step {number}"}]
        content += [{"type": "tool-call", "id": c, "name": n, "arguments": a} for c, n, a in tool_calls]
        data: dict[str, Any] = {
            "turn": turn,
            "step": number,
            "message": {
                "id": uid("assistant"),
                "role": "assistant",
                "content": content,
                "source": {"kind": "model", "provider": "deepseek", "model": model},
            },
            "stream": stream,
        }
        if plan.usage_in_message:
            data["usage"] = plan.usage
        self.append("assistant/message", data, surface_op="append")
        for (call_id, name, args), is_error in zip(tool_calls, plan.tool_errors, strict=False):
            call = self.append(
                "tool/call", {"turn": turn, "step": number, "callId": call_id, "name": name, "arguments": args}
            )
            self.clock.advance(plan.tool_ms)
            result = tool_result_data(turn, number, call_id, "boom" if is_error else "ok", is_error=is_error)
            self.append("tool/result", result, surface_op="append", source_event_seqs=[call.seq])


# -- strategies ----------------------------------------------------------------------------

_counts = st.integers(0, 5000)
_usages = st.fixed_dictionaries(
    {"inputTokens": _counts, "outputTokens": _counts},
    optional={"cacheReadTokens": _counts, "cacheWriteTokens": _counts, "reasoningTokens": _counts},
)
_texts = st.text(st.characters(codec="utf-8"), max_size=30)
_steps = st.builds(
    StepPlan,
    failed_attempts=st.integers(0, 2),
    retry_records=st.booleans(),
    tool_errors=st.lists(st.booleans(), max_size=2).map(tuple),
    usage=_usages,
    attempt_usage=st.none() | _usages,
    ttft_ms=st.integers(0, 500),
    decode_ms=st.integers(0, 2000),
    tool_ms=st.integers(0, 300),
    usage_in_message=st.booleans(),
    empty_stream=st.booleans(),
)
_turns = st.builds(
    Turn,
    prompt=_texts,
    model=st.sampled_from(MODELS),
    steps=st.lists(_steps, min_size=1, max_size=3).map(tuple),
)
_states = st.builds(
    State,
    target=st.sampled_from(["active", "paused", "completed", "failed", "archived", "created", "bogus"]),
    reason=st.none() | st.sampled_from(["user asked", "done"]),
)
_commands: st.SearchStrategy[Command] = st.one_of(
    _turns,
    _turns,
    st.builds(Prompt, text=_texts, kind=st.sampled_from(["user", "runtime-context"])),
    st.builds(Title, text=_texts, by_user=st.booleans()),
    st.builds(
        Todos,
        items=st.lists(st.tuples(_texts, st.sampled_from(["pending", "in_progress", "completed"])), max_size=3).map(
            tuple
        ),
    ),
    _states,
    st.builds(Advance, choice=st.integers(0, 2)),
    st.builds(Advance, choice=st.integers(0, 2)),
    st.builds(Idle, ms=st.integers(0, 10_000)),
)


def agent_commands(max_size: int = 12) -> st.SearchStrategy[list[Command]]:
    """Command lists for :class:`AgentWriter`; the last turn may stay open, as after a crash."""

    def maybe_open(commands: list[Command], keep_open: bool) -> list[Command]:
        if keep_open and commands and isinstance(commands[-1], Turn):
            last = commands[-1]
            commands = [*commands[:-1], Turn(last.prompt, last.model, last.steps, close=False)]
        return commands

    return st.builds(maybe_open, st.lists(_commands, max_size=max_size), st.booleans())


def write(
    commands: Sequence[Command],
    *,
    guarded: bool = True,
    on_event: Callable[[Session, SessionEvent], None] | None = None,
) -> Session:
    """A fresh session with ``commands`` written; ``guarded``: with a runner attached, as live sessions have."""
    clock = Clock()
    session = new_session(clock)
    if guarded:
        attach(session)
    if on_event is not None:
        session.subscribe(on_event)
    AgentWriter(session, clock).run(commands)
    return session
