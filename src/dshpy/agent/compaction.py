"""The agent's compaction: the summary call on the session's own route, and the two points the loop calls.

:mod:`dshpy.compaction` decides and writes; it never calls a model. This module
gives it a summarizer and says when to run it, as dsh's ``compaction-basic``
does for its agent:

* **before each model request** (:meth:`AgentCompaction.before_request`) — when
  the next request's estimate reaches the threshold, prune oversized tool results,
  then compact the head, keeping the newest ~16% of the window verbatim. A failure
  is logged and the turn goes on (the request may still fit; if not, the next
  point catches it). dsh checks at ``agent/pre-step``, before the step's entering
  messages; dshpy checks after them, just before the request, so a long new prompt
  is counted before it is sent;
* **after the provider refused a request as too long** (``CONTEXT_WINDOW_EXCEEDED``,
  :meth:`AgentCompaction.recover_overflow`) — prune, then one maximal head
  compaction (only the newest node kept); the loop retries the request once if the
  surface changed, else the original error ends the turn.

Both are off with ``auto=False``; :meth:`AgentCompaction.compact_now` (``/compact``,
``dshpy sessions compact``, ``session.compact``) works either way.

**Budgets at run time.** dsh keeps 65,536 tokens of *headroom* below the window:
room for the summary call's own answer, whose cap defaults to the same number.
Against DeepSeek's 128 Ki-token chat models that would start compacting at 44–50%
of the window (and a small test window could not compact at all). Here the
summary's cap is what the model can really answer — its output limit (8,192 for
``deepseek-chat``; 8,192 for a model the table does not know, dsh's earlier
default), and at most an eighth of the window — and the headroom is that cap plus
the instruction's price. The threshold is then dsh's ``min(0.8 × window, window −
reserved output − headroom)``: 80% of ``deepseek-chat``'s window, as dsh's 80%
applies to its million-token models.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any

from dshpy.compaction import (
    SUMMARY_INSTRUCTION,
    BasicPolicy,
    BasicStrategy,
    CompactionEngine,
    CompactionPlan,
    CompactionResult,
    ContextUsage,
    SummaryOutput,
    SummaryRequest,
    default_output_limit,
    estimate_message,
)
from dshpy.core.events import SurfaceReplace
from dshpy.errors import CompactionConfigError, CompactionError, SummaryFailedError
from dshpy.llm.protocol import ModelClient
from dshpy.llm.stream import AssistantStreamAccumulator
from dshpy.log.messages import Message
from dshpy.log.session import Session

__all__ = [
    "FALLBACK_SUMMARY_TOKENS",
    "MIN_SUMMARY_TOKENS",
    "AgentCompaction",
    "ChatSummarizer",
    "runtime_policy",
    "stated_window",
    "summary_token_cap",
]

log = logging.getLogger("dshpy.agent.compaction")

FALLBACK_SUMMARY_TOKENS = 8_192
"""The summary's cap for a model without a known output limit (dsh rc.8's ``compaction-basic`` default)."""

MIN_SUMMARY_TOKENS = 256
"""A summary is never capped below this, however small the window."""

_INSTRUCTION_TOKENS = estimate_message({"role": "user", "content": [{"type": "text", "text": SUMMARY_INSTRUCTION}]})


def summary_token_cap(window: int | None, model: str) -> int:
    """The summary call's ``max_tokens``: the model's output limit, at most an eighth of the window."""
    limit = default_output_limit(model) or FALLBACK_SUMMARY_TOKENS
    if window is None:
        return limit
    return min(limit, max(MIN_SUMMARY_TOKENS, window // 8))


def runtime_policy(window: int | None, model: str) -> BasicPolicy:
    """dsh's ``compaction-basic`` budgets with the headroom sized to the summary call (module docstring)."""
    cap = summary_token_cap(window, model)
    return BasicPolicy(headroom_tokens=cap + _INSTRUCTION_TOKENS, max_tokens=cap)


def _chat_tools(tools: Sequence[Mapping[str, Any]] | None) -> list[Mapping[str, Any]]:
    """The logged tool schemas in the client's shape; none if any lacks it (a session another runtime wrote)."""
    wanted = {"name", "description", "parameters"}
    if not tools or not all(isinstance(t, Mapping) and wanted <= t.keys() for t in tools):
        return []
    return list(tools)


class ChatSummarizer:
    """Asks the session's model for a summary: the span as the model saw it, then the instruction.

    The request is the conversation's own prefix (system prompt, tools, the span's
    messages), so the provider's prompt cache serves most of it; reasoning is not
    replayed (the request ends in a user message, so no tool-calling turn is open).
    An answer cut at the token cap is refused, as dsh refuses it: a truncated
    summary would silently lose the end of the span.
    """

    def __init__(self, client: ModelClient) -> None:
        self.client = client

    async def __call__(self, request: SummaryRequest) -> SummaryOutput:
        client = self.client
        history = [*request.messages, Message(-1, request.instruction_message())]
        cap = min(request.max_tokens, default_output_limit(client.model) or request.max_tokens)
        accumulator = AssistantStreamAccumulator()
        messages = client.history("none").convert(history)
        stream = client.stream(messages, tools=_chat_tools(request.tools), max_tokens=cap)
        async with contextlib.aclosing(stream) as chunks:  # an LlmError fails the summary (the engine says so)
            async for chunk in chunks:
                accumulator.push(chunk, 0)
        finish = (accumulator.finish_reason or {}).get("kind")
        if finish == "max-tokens":
            raise SummaryFailedError(f"the summary was cut at its {cap}-token cap (an incomplete checkpoint)")
        return SummaryOutput.of(
            accumulator.content(), provider=client.provider, model=client.model, usage=accumulator.usage, max_tokens=cap
        )


def _replaced_since(session: Session, seq: int) -> bool:
    """Whether an event appended from ``seq`` on replaced surface nodes (a prune or a checkpoint landed)."""
    events = session.events
    return any(isinstance(events[index].surface_op, SurfaceReplace) for index in range(seq, len(events)))


_STATED_WINDOW = re.compile(r"maximum context length is (\d+) tokens", re.IGNORECASE)


def stated_window(failure: Mapping[str, Any]) -> int | None:
    """The window a provider names when it refuses a request as too long (DeepSeek and OpenAI say
    "maximum context length is N tokens"), or ``None``."""
    match = _STATED_WINDOW.search(str(failure.get("message", "")))
    return int(match.group(1)) if match else None


class AgentCompaction:
    """One agent's compaction: its engine (budgets for the agent's model and window) and its summarizer.

    ``window`` is the client's context window (the config file, a ``--context-window``
    flag, or the model's default) — the one the agent logs in ``request/context`` —
    until a provider refusal names a smaller one, which then governs the budgets.
    ``engine`` replaces the runtime policy (tests, custom strategies).
    """

    def __init__(
        self, session: Session, client: ModelClient, *, auto: bool = True, engine: CompactionEngine | None = None
    ) -> None:
        self.session = session
        self.client = client
        self.auto = auto
        self.summarize = ChatSummarizer(client)
        self._custom_engine = engine is not None
        self._engine = engine
        self._stated_window: int | None = None
        self._warned_config = False

    @property
    def window(self) -> int | None:
        """The window budgets are computed for: a provider's stated one, else the client's."""
        return self._stated_window if self._stated_window is not None else self.client.config.context_window

    @property
    def engine(self) -> CompactionEngine:
        """The engine (built for the model and window at first use, and again when a refusal names a window)."""
        if self._engine is None:
            self._engine = CompactionEngine(BasicStrategy(runtime_policy(self.window, self.client.model)))
        return self._engine

    def usage(self) -> ContextUsage:
        """How full the context is ("62% used"), with the agent's window."""
        return self.engine.meter.usage(self.session, window=self.window)

    def plan(self) -> CompactionPlan:
        """What :meth:`compact_now` would replace (writing nothing; raises what it would raise)."""
        return self.engine.plan(self.session)

    async def compact_now(self, *, source_command_id: str | None = None) -> CompactionResult:
        """Compact everything but the newest node now (``/compact``); a :class:`CompactionError` if it cannot."""
        return await self.engine.acompact(self.session, self.summarize, source_command_id=source_command_id)

    async def before_request(self) -> CompactionResult | None:
        """The pressure check before a model request; never raises a compaction failure (it is logged)."""
        if not self.auto:
            return None
        try:
            return await self.engine.acompact_if_needed(self.session, self.summarize, window=self.window)
        except CompactionConfigError as error:
            if not self._warned_config:
                self._warned_config = True
                log.warning("compaction is off for %s: %s", self.session.id, error)
        except CompactionError as error:
            log.warning("step compaction failed on %s: %s; continuing the turn", self.session.id, error)
        return None

    async def recover_overflow(self, failure: Mapping[str, Any]) -> bool:
        """After ``CONTEXT_WINDOW_EXCEEDED``: prune, then one head compaction; whether a retry can help.

        dsh compacts everything but the newest node; but the summary call replays what
        it condenses, and a span as long as the refused request would be refused too.
        So when the window is known the compaction keeps the newest tail verbatim that
        the summary request does not have room for (usually nothing, then it is dsh's
        maximal reduction).
        """
        if not self.auto:
            return False
        self._adopt_window(stated_window(failure))
        session = self.session
        start = session.next_seq
        try:
            if session.open_turn is not None:
                self.engine.prune(session)
            await self.engine.arecover_overflow(session, self.summarize, prune=False, retain_tokens=self._tail())
        except CompactionError as error:
            changed = _replaced_since(session, start)  # a prune landed before the compaction failed
            outcome = "retrying from the pruned surface" if changed else "keeping the original error"
            log.warning("context-overflow compaction failed on %s: %s; %s", session.id, error, outcome)
            return changed
        return _replaced_since(session, start)

    def _adopt_window(self, stated: int | None) -> None:
        """A refusal naming a smaller window than configured: budget with the provider's figure from now on."""
        if stated is None or (self.window is not None and stated >= self.window):
            return
        log.warning(
            "%s/%s refused a request with a %d-token window (configured: %s); compacting for %d from now on",
            self.client.provider,
            self.client.model,
            stated,
            self.window,
            stated,
        )
        self._stated_window = stated
        if not self._custom_engine:
            self._engine = None

    def _tail(self) -> int:
        """Tokens to keep verbatim so that the summary request (span + instruction + answer) fits the window."""
        window = self.window
        if window is None:
            return 0
        total = self.engine.meter.measure(self.session).total_tokens
        needed = total + _INSTRUCTION_TOKENS + summary_token_cap(window, self.client.model) + window // 10
        return max(0, needed - window)
