"""The agent loop: turns and steps that write exactly the events dsh v4 writes (dsh-v4 §3.9).

One turn, for one prompt::

    agent/inbox/spliced (insert, next-turn) → turn/start → agent/inbox/spliced (claim)
    per step:  [agent/inbox/spliced (claim, next-step)] → step/start
               → system/message (first step of the session, or the prompt changed)
               → user/message… (the prompt, injected messages, instructions)
               → user/message (runtime-context snapshot, when it changed)?
               → request/header? → request/context? → session/title (fallback)?
               → session-log-deepseek/delivery-accepted?
               → [assistant/attempt → llm/retry → llm/retry-started]… → assistant/message
               → per tool call: tool/call [job/registered … job/settled] tool/result (citing the call)
               → step/end
    turn/end {completed | max-tokens | error | aborted | blocked}

The request sent to the model is ``client.history().convert(session.derive_messages())``
(chat-completions or Messages API messages, whichever the client speaks) — built from
the log alone, so what the model saw is exactly what is logged. The model
stream reaches callers chunk by chunk (:class:`ChunkUpdate`) but is stored once,
packed, in the event that settles the attempt.

**Checkpoints.** The session is flushed before each step opens (dsh's pre-step
flush), before every model request and before every tool body, so a crash loses at
most what was streaming or running; reopening the store closes the turn with
dsh's ``interrupted`` closers (a logged but unanswered call gets
``TOOL_OUTCOME_UNKNOWN``). A finished turn is flushed too.

**Failures.** A model try that fails after it started is logged as
``assistant/attempt`` (its partial stream, usage included, ending in a ``finish``
chunk of kind ``error`` carrying the ``LlmFailure``); retryable failures are retried
in the same step under :class:`RetryPolicy` (``llm/retry``, the wait,
``llm/retry-started``), others end the turn ``error``. The model never sees a failed
try. ``finish_reason: length`` ends the turn ``max-tokens`` (the cut message is kept;
its unfinished tool calls are dropped, never run).

**Compaction** (:mod:`dshpy.agent.compaction`). Before each model request the
context is measured and, past the threshold, pruned and compacted (its events land
inside the open step); a request refused with ``CONTEXT_WINDOW_EXCEEDED`` is
followed by a prune and one maximal compaction, then retried once if the surface
changed. The model never sees what a checkpoint replaced.

**dsh's runtime records** (off by default; ``dshpy-runtime`` turns them on):
``runtime_context`` names the sections of dsh's runtime-context snapshot
(:mod:`dshpy.agent.runtime_context`), ``fallback_title`` writes dsh's first-prompt
``session/title`` (:mod:`dshpy.agent.fallback_title`), and ``upload_session_log``
sends the log with each Messages API request as dsh does, logging DeepSeek's
acceptance (:mod:`dshpy.agent.session_log`). Background jobs started by tools
(:mod:`dshpy.agent.jobs`) that finish uncollected are announced to the model
before its next step; closing the agent stops the ones still running.

**Cancellation.** :meth:`Agent.cancel` (or cancelling the task awaiting
:meth:`Agent.run`) ends the turn ``aborted``: text already streamed is kept as an
``assistant/message`` marked ``interrupted`` (else the try is an attempt), calls not
started get dsh's ``TOOL_ABORTED_BEFORE_DISPATCH`` result, running ones an
outcome-unknown result, then ``step/end`` and ``turn/end``.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import random
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from dshpy.compaction import CompactionEngine
from dshpy.core.events import SessionEvent
from dshpy.errors import DshError
from dshpy.llm import chunks as c
from dshpy.llm.client import ChatClient, ResponseInfo
from dshpy.llm.failures import LlmError
from dshpy.llm.messages import ReasoningReplay
from dshpy.llm.protocol import HistoryConverter, ModelClient
from dshpy.llm.retry import RetryPolicy
from dshpy.llm.stream import AssistantStreamAccumulator
from dshpy.log.continuation import append_resume_marker
from dshpy.log.messages import Message
from dshpy.log.records import (
    assistant_data,
    attempt_data,
    claim_splice,
    insert_splice,
    request_context_data,
    request_header,
    retry_data,
    retry_started_data,
    tool_call_data,
    tool_result_data,
    user_message,
)
from dshpy.log.session import Session
from dshpy.projections.commands import turn_refusal
from dshpy.telemetry import observe_agent

from .builtin.job_tools import deliver_completions
from .compaction import AgentCompaction
from .fallback_title import fallback_title_data
from .hooks import (
    Hooks,
    ModelRequest,
    PreStep,
    RequestError,
    ToolCallHook,
    ToolEnd,
    ToolStart,
    TurnEnd,
    TurnStart,
    TurnStopping,
)
from .injection import injected_message
from .instructions import pending_instructions
from .jobs import jobs_of
from .prologue import AgentSetupError, RequestPrologue
from .records import ABORTED_BEFORE_DISPATCH, ABORTED_RUNNING
from .runtime_context import RuntimeContext
from .session_log import FIELD as SESSION_LOG_FIELD
from .session_log import SessionLogUpload
from .tools import Tool, ToolContext, ToolLike, ToolOutcome, as_tool
from .updates import ChunkUpdate, EventUpdate, TurnResult, Update, add_usage

__all__ = ["DEFAULT_MAX_STEPS", "Agent", "AgentBusyError", "AgentSetupError", "CancelReason"]

log = logging.getLogger("dshpy.agent")

DEFAULT_MAX_STEPS = 25
CONTEXT_WINDOW_EXCEEDED = "CONTEXT_WINDOW_EXCEEDED"
CancelReason = Literal["user", "parent", "hook", "disposed"]


class AgentBusyError(DshError):
    """A turn is already running on this agent (one turn at a time)."""


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(slots=True)
class _Turn:
    number: int
    steps: int = 0
    text: str = ""
    usage: dict[str, int] = field(default_factory=dict)
    events: list[SessionEvent] = field(default_factory=list)


@dataclass(slots=True)
class _ModelOutcome:
    message: Message | None = None
    finish: str = "stop"
    failure: dict[str, Any] | None = None


class _Sink:
    """Delivers live updates to the caller's callbacks (from any thread that appends)."""

    def __init__(
        self,
        turn: _Turn,
        on_chunk: Callable[[ChunkUpdate], Any] | None,
        on_event: Callable[[EventUpdate], Any] | None,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self.turn = turn
        self.on_chunk = on_chunk
        self.on_event = on_event
        self.loop = loop
        self.thread = threading.get_ident()

    async def chunk(self, update: ChunkUpdate) -> None:
        if self.on_chunk is not None:
            result = self.on_chunk(update)
            if inspect.isawaitable(result):
                await result

    def event(self, _session: Session, event: SessionEvent) -> None:
        self.turn.events.append(event)
        if self.on_event is None:
            return
        if threading.get_ident() == self.thread:
            self.on_event(EventUpdate(event))
        else:
            self.loop.call_soon_threadsafe(self.on_event, EventUpdate(event))


class Agent:
    """Runs turns on one live session with one model client (one turn at a time, one event loop).

    ``system_prompt`` may be changed between turns (the head is replaced in the log);
    ``tools`` are :class:`Tool` s or plain functions; ``max_steps`` bounds the model
    calls of a turn, ``max_tokens`` each answer (sent as ``max_tokens`` and logged in
    the request header); ``tool_timeout`` applies to tools without their own.

    ``instructions_dir``: a directory whose ``AGENTS.md`` (or ``CLAUDE.md``) enters the
    first step of a turn as dsh's ``agent-instructions`` message, once per content
    (:mod:`dshpy.agent.instructions`); ``None`` reads none.

    ``auto_compact`` keeps the context under the window (see
    :mod:`dshpy.agent.compaction`): a pressure check before each model request, and
    one recovery and retry when the provider refuses a request as too long;
    ``compaction_engine`` replaces the runtime policy. :attr:`compaction` also
    compacts on demand and reads how full the context is.

    ``runtime_context`` returns the sections (``[{name, text}]``) of dsh's
    runtime-context snapshot, asked before each step's request; ``fallback_title``
    and ``upload_session_log`` write dsh's other runtime records (see the module
    docstring).

    Constructed on a session that already has events (a resumed or reopened one),
    the agent first appends ``session/end-seed {}``, as dsh does when it resumes a
    session in a new process (``resume_marker=False`` skips it; a fork's fresh
    ``{inherited: true}`` marker counts as one).
    """

    def __init__(
        self,
        session: Session,
        client: ModelClient | None = None,
        *,
        system_prompt: str = "",
        tools: Sequence[ToolLike] = (),
        max_steps: int = DEFAULT_MAX_STEPS,
        max_tokens: int | None = None,
        reasoning_effort: str | None = None,
        retry: RetryPolicy | None = None,
        tool_timeout: float | None = 120.0,
        parallel_tools: bool = True,
        reasoning_replay: ReasoningReplay = "latest-turn",
        resume_marker: bool = True,
        rng: random.Random | None = None,
        auto_compact: bool = True,
        compaction_engine: CompactionEngine | None = None,
        instructions_dir: str | None = None,
        runtime_context: Callable[[], Sequence[Mapping[str, str]]] | None = None,
        fallback_title: bool = False,
        upload_session_log: bool = False,
    ) -> None:
        if max_steps < 1:
            raise ValueError("max_steps must be at least 1")
        if max_tokens is not None and max_tokens < 1:
            raise ValueError("max_tokens must be a positive integer")
        self.session = session
        self._owns_client = client is None
        self.client: ModelClient = client if client is not None else ChatClient()
        self.system_prompt = system_prompt
        self.tools: dict[str, Tool] = {}
        for item in tools:
            self.add_tool(item)
        self.max_steps = max_steps
        self.max_tokens = max_tokens
        self.reasoning_effort = reasoning_effort
        self.retry = retry if retry is not None else RetryPolicy()
        self.tool_timeout = tool_timeout
        self.parallel_tools = parallel_tools
        self.reasoning_replay: ReasoningReplay = reasoning_replay
        self.instructions_dir = instructions_dir
        self.last_result: TurnResult | None = None
        self._rng = rng or random.Random()
        self._hooks = Hooks()
        self._prologue = RequestPrologue(session)
        self.compaction = AgentCompaction(session, self.client, auto=auto_compact, engine=compaction_engine)
        self._history: HistoryConverter | None = None  # made by the client at the first request
        self._inbox: list[dict[str, Any]] = []
        self._inbox_lock = threading.Lock()
        self._task: asyncio.Task[TurnResult] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._cancel_reason: CancelReason | None = None
        self.runtime_context = runtime_context
        self._context_snapshot = RuntimeContext(session) if runtime_context is not None else None
        self.fallback_title = fallback_title
        self._titled = False
        self._upload = SessionLogUpload(session) if upload_session_log else None
        self._notices = deliver_completions(session, self._notify)
        self._marker_pending = resume_marker
        if resume_marker and turn_refusal(session) is None:
            self._append_marker()  # a session that cannot run gets its marker when it runs again
        observe_agent(self)  # telemetry subscribes to the hooks when it is on; nothing happens otherwise

    def _append_marker(self) -> None:
        if self._marker_pending:
            self._marker_pending = False
            append_resume_marker(self.session)

    # -- configuration ------------------------------------------------------------

    def add_tool(self, item: ToolLike) -> Tool:
        made = as_tool(item)
        if made.name in self.tools:
            raise ValueError(f"two tools are named {made.name!r}")
        self.tools[made.name] = made
        return made

    def on(self, name: str, handler: Callable[[Any], Any]) -> Callable[[], None]:
        """Register a hook handler (``turn-start``, ``pre-step``, ``tool-call``, ``turn-stopping``, … see hooks)."""
        return self._hooks.on(name, handler)

    def inject(self, message: str | Mapping[str, Any], *, source: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Queue a user message for the next step (of this turn, or else of the next one).

        ``message`` is a text, the seed's ``{"type": "user", "content": [...]}``, or a
        user message ``{"role": "user", "content": ...}``; a missing ``id`` is made and a
        missing ``source`` is ``source``, else the plugin whose handler is running
        (``{"kind": "plugin:<name>"}``), else ``{"kind": "user"}`` (see
        :mod:`dshpy.agent.injection`). Logged at once as an ``agent/inbox/spliced``
        insert into ``next-step``; the loop claims it before its next ``step/start`` and
        appends it as a ``user/message``. Safe from any thread.
        """
        queued = injected_message(message, source)
        with self._inbox_lock:
            self.session.append("agent/inbox/spliced", insert_splice("next-step", len(self._inbox), [queued]))
            self._inbox.append(queued)
        return queued

    @property
    def inbox_pending(self) -> bool:
        """Messages are queued for the next step (injected, a job notice), held in this process only."""
        return self._has_injected()

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def cancel(self, reason: CancelReason = "user") -> bool:
        """Cancel the running turn (it ends ``aborted``); safe from any thread. False if none is running."""
        task, loop = self._task, self._loop
        if task is None or task.done() or loop is None:
            return False
        self._cancel_reason = reason
        if loop.is_closed():
            return False
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            task.cancel()
        else:
            loop.call_soon_threadsafe(task.cancel)
        return True

    def _notify(self, message: dict[str, Any]) -> None:
        try:
            self.inject(message)
        except Exception:  # a closed session: nobody is left to tell
            log.warning("could not queue a job notice on %s", self.session.id, exc_info=True)

    async def aclose(self) -> None:
        """Stop the session's background jobs and close the model client if the agent made it."""
        self._notices()
        await jobs_of(self.session).close()
        if self._owns_client:
            await self.client.close()

    async def __aenter__(self) -> Agent:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.aclose()

    # -- running ------------------------------------------------------------------

    async def run(
        self,
        prompt: str | Mapping[str, Any],
        *,
        on_chunk: Callable[[ChunkUpdate], Any] | None = None,
        on_event: Callable[[EventUpdate], Any] | None = None,
        source: Mapping[str, Any] | None = None,
    ) -> TurnResult:
        """Run one turn for ``prompt`` and return how it ended.

        ``on_chunk`` (sync or async) gets every model chunk as it arrives, ``on_event``
        every appended event. Model failures do not raise: they end the turn
        ``error`` (see :attr:`TurnResult.error`). Programming and storage errors do,
        after the turn is closed as far as the store still takes events.
        """
        if self.running:
            raise AgentBusyError(f'agent on session "{self.session.id}" is already running a turn')
        if self.session.open_turn is not None:
            raise AgentSetupError(
                f'session "{self.session.id}" has turn {self.session.open_turn} open; reopen it from the store '
                "(which closes an interrupted turn) before running a new one"
            )
        if isinstance(prompt, Mapping):
            message = dict(prompt)
            if message.get("role") != "user":
                raise ValueError("a prompt message must have role 'user'")
        else:
            message = user_message(prompt, source)
        refusal = turn_refusal(self.session)
        if refusal is not None:  # before anything is written: a refused turn leaves no trace in the log
            raise refusal
        self._append_marker()
        loop = asyncio.get_running_loop()
        turn = _Turn(self.session.next_turn)
        sink = _Sink(turn, on_chunk, on_event, loop)
        unsubscribe = self.session.subscribe(sink.event)
        self._cancel_reason = None
        task = loop.create_task(self._run_turn(turn, message, sink), name=f"dshpy-turn-{turn.number}")
        self._task, self._loop = task, loop
        try:
            try:
                result = await task
            except asyncio.CancelledError:
                if not task.done():  # the caller was cancelled: finish closing the turn, then propagate
                    self._cancel_reason = self._cancel_reason or "user"
                    task.cancel()
                    await asyncio.gather(task, return_exceptions=True)
                raise
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise asyncio.CancelledError  # our caller was cancelled while the turn wound down
            self.last_result = result
            return result
        finally:
            unsubscribe()

    async def stream(
        self, prompt: str | Mapping[str, Any], *, source: Mapping[str, Any] | None = None
    ) -> AsyncIterator[Update]:
        """Run one turn, yielding :class:`ChunkUpdate` s and :class:`EventUpdate` s as they happen.

        The result is in :attr:`last_result` afterwards. Leaving the loop early
        cancels the turn (it ends ``aborted``).
        """
        queue: asyncio.Queue[Update | None] = asyncio.Queue()
        task = asyncio.ensure_future(
            self.run(prompt, on_chunk=queue.put_nowait, on_event=queue.put_nowait, source=source)
        )
        task.add_done_callback(lambda _done: queue.put_nowait(None))
        try:
            while (item := await queue.get()) is not None:
                yield item
        finally:
            if not task.done():
                self.cancel()
            self.last_result = await task

    # -- one turn -----------------------------------------------------------------

    def _append(
        self, kind: str, data: Any, *, surface_op: Any = None, source_event_seqs: Sequence[int] | None = None
    ) -> SessionEvent:
        return self.session.append(kind, data, surface_op=surface_op, source_event_seqs=source_event_seqs)

    async def _run_turn(self, turn: _Turn, prompt: dict[str, Any], sink: _Sink) -> TurnResult:
        """One turn, then the ``turn-end`` hook (with the result, or the error the turn raised)."""
        try:
            result = await self._turn(turn, prompt, sink)
        except BaseException as error:
            if self._hooks.has("turn-end"):
                await self._hooks.emit("turn-end", TurnEnd(self, turn.number, None, error))
            raise
        if self._hooks.has("turn-end"):
            await self._hooks.emit("turn-end", TurnEnd(self, turn.number, result))
        return result

    async def _turn(self, turn: _Turn, prompt: dict[str, Any], sink: _Sink) -> TurnResult:
        number = turn.number
        self._append("agent/inbox/spliced", insert_splice("next-turn", 0, [prompt]))
        self._append("turn/start", {"turn": number})
        self._append("agent/inbox/spliced", claim_splice("next-turn", 1))
        entering: list[dict[str, Any]] = [prompt]
        try:
            await self._hooks.emit("turn-start", TurnStart(self, number, prompt))
            step = 0
            while True:
                step += 1
                pre = PreStep(self, number, step)
                await self._hooks.emit("pre-step", pre)
                if pre.blocked is not None:
                    return self._finish(turn, {"kind": "blocked"}, blocked=pre.blocked)
                entering.extend(self._claim_injected())
                self.session.flush()  # checkpoint: pre-step
                self._append("step/start", {"turn": number, "step": step})
                turn.steps = step
                self._prologue.system_prompt(number, step, self.system_prompt)
                for message in entering:
                    self._append("user/message", message, surface_op="append")
                entering = []
                if step == 1 and (instructions := pending_instructions(self.session, self.instructions_dir)):
                    self._append("user/message", instructions, surface_op="append")
                if self._context_snapshot is not None and self.runtime_context is not None:
                    snapshot = self._context_snapshot.message(self.runtime_context())
                    if snapshot is not None:
                        self._append("user/message", snapshot, surface_op="append")
                self._prologue.header(self._request_header())
                self._prologue.context(self._request_context())
                self._title()
                await self.compaction.before_request()
                outcome = await self._call_model(turn, step, sink)
                if outcome.failure is not None:
                    self._append("step/end", {"turn": number, "step": step})
                    return self._finish(turn, {"kind": "error", "error": outcome.failure})
                assert outcome.message is not None
                calls = [b for b in outcome.message.content if b.get("type") == "tool-call"]
                if calls:
                    await self._run_tools(turn, step, calls)
                self._append("step/end", {"turn": number, "step": step})
                if outcome.finish == "max-tokens":
                    return self._finish(turn, {"kind": "max-tokens"})
                if not calls:
                    await self._hooks.emit("turn-stopping", TurnStopping(self, number, step, outcome.message))
                    if not self._has_injected():
                        return self._finish(turn, {"kind": "completed"})
                if step >= self.max_steps:
                    failure = {
                        "message": f"the turn stopped after {step} steps (max_steps={self.max_steps})",
                        "code": "MAX_STEPS",
                    }
                    return self._finish(turn, {"kind": "error", "error": failure})
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            return self._abort(turn, {"kind": "aborted", "reason": {"kind": self._cancel_reason or "user"}})
        except BaseException as error:
            self._close_after_failure(turn, error)
            raise

    def _finish(self, turn: _Turn, reason: dict[str, Any], *, blocked: str | None = None) -> TurnResult:
        self._append("turn/end", {"turn": turn.number, "reason": reason})
        self.session.flush()
        return TurnResult(
            session_id=self.session.id,
            turn=turn.number,
            reason=reason,
            text=turn.text,
            steps=turn.steps,
            usage=turn.usage,
            events=turn.events,
            blocked_reason=blocked,
        )

    def _close_open(self, error_name: str) -> None:
        """Answer every unanswered call and close the open step (before an aborted or failed ``turn/end``)."""
        lifecycle = self.session.lifecycle
        turn, step = lifecycle.open_turn, lifecycle.open_step
        if turn is None:
            return
        for call_id, call in lifecycle.calls.items():
            assert step is not None
            if call.call_seq is None:
                started = self._append("tool/call", tool_call_data(turn, step, call_id, call.name, call.arguments))
                text, code, source = ABORTED_BEFORE_DISPATCH, "TOOL_ABORTED_BEFORE_DISPATCH", started.seq
            else:
                text, code, source = ABORTED_RUNNING, "TOOL_ABORTED", call.call_seq
            data = tool_result_data(
                turn,
                step,
                call_id,
                [{"type": "text", "text": text}],
                is_error=True,
                error={"name": error_name, "code": code},
            )
            self._append("tool/result", data, surface_op="append", source_event_seqs=[source])
        if step is not None:
            self._append("step/end", {"turn": turn, "step": step})

    def _abort(self, turn: _Turn, reason: dict[str, Any]) -> TurnResult:
        self._close_open("AbortError")
        return self._finish(turn, reason)

    def _close_after_failure(self, turn: _Turn, error: BaseException) -> None:
        """Best effort: log the turn as failed so the session stays usable (repair covers the rest)."""
        try:
            if self.session.open_turn != turn.number:
                return
            self._close_open("AbortError")
            failure = {"message": f"{type(error).__name__}: {error}", "code": "UNKNOWN"}
            self._append("turn/end", {"turn": turn.number, "reason": {"kind": "error", "error": failure}})
            self.session.flush()
        except Exception:
            log.warning("could not close turn %d of %s after a failure", turn.number, self.session.id, exc_info=True)

    # -- the model call -----------------------------------------------------------

    def _request_header(self) -> dict[str, Any]:
        return request_header(
            self.client.provider,
            self.client.model,
            max_tokens=self.max_tokens,
            reasoning_effort=self.reasoning_effort,
            tools=[tool.schema() for tool in self.tools.values()],
            defaults=self.client.request_defaults,
        )

    def _title(self) -> None:
        """dsh's fallback ``session/title``, once, as soon as the session has a prompt to name it by."""
        if not self.fallback_title or self._titled:
            return
        data = fallback_title_data(self.session.events)
        self._titled = data is not None or any(e.type == "session/title" for e in self.session.events)
        if data is not None:
            self._append("session/title", data)

    def _extensions(self, response: ResponseInfo) -> dict[str, Any] | None:
        """dsh's extra request fields (the session log, Messages API only), accepted through ``response``."""
        if self._upload is None or self.client.config.wire_format != "messages":
            return None
        prepared = self._upload.prepare()
        if prepared is None:
            return None
        value, accept = prepared
        response.on_accepted = accept
        return {SESSION_LOG_FIELD: value}

    def _request_context(self) -> dict[str, Any]:
        return request_context_data(self.client.provider, self.client.model, self.client.config.context_window)

    async def _call_model(self, turn: _Turn, step: int, sink: _Sink) -> _ModelOutcome:
        number = turn.number
        tools = [tool.schema() for tool in self.tools.values()]
        attempt = 0
        retry_id: str | None = None
        overflow_recovered = False
        while True:
            attempt += 1
            if self._history is None:
                self._history = self.client.history(self.reasoning_replay)
            self._history.reasoning = self.reasoning_replay
            messages = self._history.convert(self.session.derive_messages())
            self.session.flush()  # checkpoint: before every model request
            response = ResponseInfo()
            if self._hooks.has("model-request"):
                request = ModelRequest(self, number, step, attempt, messages, tools, response)
                await self._hooks.emit("model-request", request)
            accumulator = AssistantStreamAccumulator()
            extensions = self._extensions(response)
            try:
                stream = self.client.stream(
                    messages,
                    tools=tools,
                    max_tokens=self.max_tokens,
                    reasoning_effort=self.reasoning_effort,
                    info=response,
                    **({"extra_body": extensions} if extensions is not None else {}),
                )
                async with contextlib.aclosing(stream) as chunks:
                    async for chunk in chunks:
                        now = _now_ms()
                        accumulator.push(chunk, now)
                        await sink.chunk(ChunkUpdate(number, step, attempt, chunk, now))
            except LlmError as error:
                accumulator.push(c.finish("error", error.failure), _now_ms())
                self._append("assistant/attempt", attempt_data(number, step, accumulator.records))
                add_usage(turn.usage, accumulator.usage)
                if self._hooks.has("request-error"):
                    await self._hooks.emit("request-error", RequestError(self, number, step, attempt, error.failure))
                if error.code == CONTEXT_WINDOW_EXCEEDED and not overflow_recovered:
                    overflow_recovered = True  # one recovery per request, as dsh's maxOverflowRetries
                    if await self.compaction.recover_overflow(error.failure):
                        continue
                if not self.retry.should_retry(error, attempt):
                    return _ModelOutcome(failure=error.failure)
                retry_id = retry_id or f"retry-{uuid.uuid4()}"
                delay = self.retry.delay_ms(error, attempt, self._rng)
                self._append(
                    "llm/retry",
                    retry_data(
                        retry_id,
                        number,
                        step,
                        provider=self.client.provider,
                        policy_key=self.retry.policy_key,
                        retry=attempt,
                        max_retries=self.retry.max_retries,
                        delay_ms=delay,
                        failure=error.failure,
                    ),
                )
                self.session.flush()
                await asyncio.sleep(delay / 1000)
                self._append("llm/retry-started", retry_started_data(retry_id, number, step, attempt))
                continue
            except asyncio.CancelledError:
                self._settle_interrupted(turn, step, accumulator)
                raise
            return self._settle(turn, step, accumulator)

    def _settle(self, turn: _Turn, step: int, accumulator: AssistantStreamAccumulator) -> _ModelOutcome:
        reason = accumulator.finish_reason or {"kind": "stop"}
        finish = str(reason.get("kind"))
        content = accumulator.content()
        replay = accumulator.replay_state
        if finish == "max-tokens":  # a call cut at the limit is unfinished: it is never run
            kept = [index for index, block in enumerate(content) if block["type"] != "tool-call"]
            if replay is not None and len(kept) != len(content):
                blocks = replay.get("blocks")
                if isinstance(blocks, list) and len(blocks) == len(content):
                    replay = {**replay, "blocks": [blocks[i] for i in kept]}
                else:
                    replay = None
            content = [content[index] for index in kept]
        data = assistant_data(
            turn.number,
            step,
            content,
            provider=self.client.provider,
            model=self.client.model,
            stream=accumulator.records,
            usage=accumulator.usage,
            replay_state=replay,
        )
        event = self._append("assistant/message", data, surface_op="append")
        add_usage(turn.usage, accumulator.usage)
        message = Message(event.seq, event.data["message"])
        turn.text = message.text
        return _ModelOutcome(message=message, finish=finish)

    def _settle_interrupted(self, turn: _Turn, step: int, accumulator: AssistantStreamAccumulator) -> None:
        failure = {"message": "the model request was cancelled", "code": "ABORTED"}
        accumulator.push(c.finish("aborted", failure), _now_ms())
        visible = accumulator.visible_content()
        add_usage(turn.usage, accumulator.usage)
        if not visible:
            self._append("assistant/attempt", attempt_data(turn.number, step, accumulator.records))
            return
        data = assistant_data(
            turn.number,
            step,
            visible,
            provider=self.client.provider,
            model=self.client.model,
            stream=accumulator.records,
            usage=accumulator.usage,
            interrupted=True,
        )
        event = self._append("assistant/message", data, surface_op="append")
        turn.text = Message(event.seq, event.data["message"]).text

    # -- tools ----------------------------------------------------------------------

    async def _run_tools(self, turn: _Turn, step: int, calls: list[Any]) -> None:
        number = turn.number
        denials: list[str | None] = []
        for block in calls:
            hook = ToolCallHook(self, number, step, str(block["id"]), str(block["name"]), str(block["arguments"]))
            await self._hooks.emit("tool-call", hook)
            denials.append(hook.denied)
        if not self.parallel_tools:
            for block, denied in zip(calls, denials, strict=True):
                call = self._log_call(number, step, block)
                self.session.flush()  # checkpoint: before the tool body
                outcome = await self._invoke(
                    block, denied, ToolContext(self, self.session, call.data["callId"], number, step)
                )
                self._log_result(number, step, call, outcome)
            return
        started = [self._log_call(number, step, block) for block in calls]
        self.session.flush()  # checkpoint: before the tool bodies
        tasks = [
            asyncio.ensure_future(
                self._invoke(block, denied, ToolContext(self, self.session, str(block["id"]), number, step))
            )
            for block, denied in zip(calls, denials, strict=True)
        ]
        logged = 0
        try:
            for call, task in zip(started, tasks, strict=True):
                self._log_result(number, step, call, await task)
                logged += 1
        except asyncio.CancelledError:
            for call, task in zip(started[logged:], tasks[logged:], strict=True):
                if task.done() and not task.cancelled() and task.exception() is None:
                    self._log_result(number, step, call, task.result())
                else:
                    task.cancel()
                    outcome = ToolOutcome.failure(ABORTED_RUNNING, "AbortError", "TOOL_ABORTED")
                    self._log_result(number, step, call, outcome)
            raise

    def _log_call(self, turn: int, step: int, block: Any) -> SessionEvent:
        return self._append("tool/call", tool_call_data(turn, step, block["id"], block["name"], block["arguments"]))

    def _log_result(self, turn: int, step: int, call: SessionEvent, outcome: ToolOutcome) -> SessionEvent:
        data = tool_result_data(
            turn,
            step,
            str(call.data["callId"]),
            outcome.content,
            is_error=outcome.is_error,
            error=outcome.error,
            meta=outcome.meta,
        )
        return self._append("tool/result", data, surface_op="append", source_event_seqs=[call.seq])

    async def _invoke(self, block: Any, denied: str | None, context: ToolContext) -> ToolOutcome:
        """The call's outcome, between the ``tool-start`` and ``tool-end`` hooks (in the task that runs the body)."""
        hooks = self._hooks
        if not (hooks.has("tool-start") or hooks.has("tool-end")):
            return await self._outcome(block, denied, context)
        turn, step, call_id, name = context.turn, context.step, context.call_id, str(block["name"])
        await hooks.emit("tool-start", ToolStart(self, turn, step, call_id, name, str(block["arguments"])))
        outcome = await self._outcome(block, denied, context)
        await hooks.emit("tool-end", ToolEnd(self, turn, step, call_id, name, outcome))
        return outcome

    async def _outcome(self, block: Any, denied: str | None, context: ToolContext) -> ToolOutcome:
        name = str(block["name"])
        if denied is not None:
            return ToolOutcome.failure(f"Error: tool call denied: {denied}", "ToolDeniedError", "TOOL_DENIED")
        found = self.tools.get(name)
        if found is None:
            known = ", ".join(sorted(self.tools)) or "none"
            return ToolOutcome.failure(
                f'Error: there is no tool named "{name}". Available tools: {known}.',
                "ToolNotFoundError",
                "TOOL_NOT_FOUND",
            )
        return await found.invoke(str(block["arguments"]), context, timeout=self.tool_timeout)

    # -- the inbox ----------------------------------------------------------------

    def _claim_injected(self) -> list[dict[str, Any]]:
        with self._inbox_lock:
            taken, self._inbox = self._inbox, []
            if taken:
                self._append("agent/inbox/spliced", claim_splice("next-step", len(taken)))
        return taken

    def _has_injected(self) -> bool:
        with self._inbox_lock:
            return bool(self._inbox)

    def __repr__(self) -> str:
        return f"<Agent session={self.session.id} model={self.client.model} running={self.running}>"
