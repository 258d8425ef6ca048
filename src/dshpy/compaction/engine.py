"""The compaction engine: when to compact, and compacting (the seeds' ``CompactionEngine``).

Every operation is planned, summarized and committed in that order:

1. **plan** (read-only): refuse a session another compaction holds (an unmatched
   ``compaction/start`` of this lifecycle), price the surface, let the strategy
   select a span and check it is a current, tool-balanced run that leaves a system
   prompt at node 0 alone; build the summary request.
2. **summarize**: the injected summarizer (sync or async) answers; a failure is
   raised as :class:`~dshpy.errors.SummaryFailedError` and nothing is written.
3. **commit**: the summary must have text and its framed checkpoint must cost
   fewer tokens than the span; the span must still be the same current nodes at the
   same prices (appends elsewhere are fine — the session may have moved on while
   the model wrote); then the four events land as one batch
   (:mod:`~dshpy.compaction.transaction`). A span that changed is re-planned
   (``replans`` times, a new summary each time) before the engine gives up with
   :class:`~dshpy.errors.CompactionChangedError`.

The bracket belongs to the turn open at commit (an automatic compaction between
steps), or to none (``turn: null``: a manual compaction of an idle session).

The flows are written once as generators that yield summary requests and receive
answers; :meth:`CompactionEngine.compact` drives them with a plain function,
:meth:`CompactionEngine.acompact` awaits an async one, so both share every rule.
"""

from __future__ import annotations

import inspect
import time
import uuid
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from dshpy.compaction.basic import BasicStrategy
from dshpy.compaction.checkpoint import summary_text_blocks
from dshpy.compaction.estimate import estimate_message
from dshpy.compaction.meter import DEFAULT_METER, Measurement, TokenMeter
from dshpy.compaction.pruner import PruneResult, ToolResultPruner
from dshpy.compaction.strategy import Budgets, CompactionStrategy, Span
from dshpy.compaction.summarizer import AsyncSummarizer, Summarizer, SummaryOutput, SummaryRequest
from dshpy.compaction.transaction import CompactionPlan, CompactionResult, checkpoint_message, compaction_events
from dshpy.errors import (
    CompactionBusyError,
    CompactionChangedError,
    CompactionError,
    ContextStillFullError,
    EmptySummaryError,
    EventError,
    NothingToCompactError,
    ReadOnlySessionError,
    SummaryFailedError,
    SummaryRejectedError,
    SummaryTooLargeError,
    UnbalancedSpanError,
)
from dshpy.log.session import Session
from dshpy.telemetry.switch import compaction_span

__all__ = [
    "DEFAULT_ENGINE",
    "CompactionEngine",
    "OverflowRecovery",
    "acompact",
    "compact",
    "needs_compaction",
    "prune_tool_results",
]

T = TypeVar("T")
Flow = Generator[SummaryRequest, "SummaryOutput | str", T]


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class OverflowRecovery:
    """What :meth:`CompactionEngine.recover_overflow` did to a request the provider found too long."""

    pruned: PruneResult
    compaction: CompactionResult | None

    @property
    def changed(self) -> bool:
        """Whether the surface shrank, i.e. whether retrying the request can help."""
        return bool(self.pruned) or self.compaction is not None


class CompactionEngine:
    """Decides when a session's context is full and compacts it with a strategy and a summarizer."""

    def __init__(
        self,
        strategy: CompactionStrategy | None = None,
        *,
        meter: TokenMeter | None = None,
        pruner: ToolResultPruner | None = None,
        clock: Callable[[], int] = _now_ms,
    ) -> None:
        self.strategy: CompactionStrategy = strategy if strategy is not None else BasicStrategy()
        self.meter = meter if meter is not None else DEFAULT_METER
        self.pruner = pruner if pruner is not None else ToolResultPruner()
        self._clock = clock

    # -- when -----------------------------------------------------------------------

    def budgets(self, session: Session, *, window: int | None = None) -> Budgets | None:
        """The strategy's budgets for the session's model window (``None`` when no window is known)."""
        window = window if window is not None else self.meter.window(session)
        if window is None:
            return None
        return self.strategy.budgets(window, self.meter.reserved_output_tokens(session))

    def needs_compaction(self, session: Session, *, window: int | None = None) -> bool:
        """Whether the next request's estimate has reached the strategy's threshold."""
        budgets = self.budgets(session, window=window)
        return budgets is not None and self.meter.usage(session).used >= budgets.threshold_tokens

    # -- plan and commit -------------------------------------------------------------

    def plan(
        self,
        session: Session,
        *,
        retain_tokens: int = 0,
        span: tuple[int, int] | None = None,
        source_command_id: str | None = None,
    ) -> CompactionPlan:
        """Select a span (or check ``span``: its first and last surface seq) and build its summary request.

        Read-only: nothing is appended, and a read-only view (``store.inspect``) can be
        planned — a dry run. ``retain_tokens`` of recent history stay verbatim (0: only
        the newest node, dsh's manual and overflow compaction).
        """
        _check_idle(session)
        measurement = self.meter.measure(session)
        if span is None:
            chosen = self.strategy.select_span(session, measurement, retain_tokens)
            if chosen is None:
                raise NothingToCompactError(_nothing(session, measurement))
        else:
            chosen = _explicit_span(measurement, *span)
        _check_span(session, measurement, chosen)
        compaction_id = str(uuid.uuid4())
        request = self.strategy.summary_request(session, chosen, compaction_id=compaction_id)
        return CompactionPlan(session.id, compaction_id, chosen, request, source_command_id)

    def commit(
        self, session: Session, plan: CompactionPlan, answer: SummaryOutput | str, *, flush: bool = True
    ) -> CompactionResult:
        """Check the summary and the span, then append and flush the four events as one batch."""
        if plan.session_id != session.id:
            raise CompactionError(f'this plan is for session "{plan.session_id}", not "{session.id}"', code="plan")
        output = _output(answer, plan.request)
        if any(block.get("type") == "image" for block in output.content):
            raise SummaryRejectedError("a compaction summary cannot contain image output")
        summary = summary_text_blocks(output.content)
        if not any(str(block.get("text", "")).strip() for block in summary):
            raise EmptySummaryError("the summarizer produced no summary text")
        message = checkpoint_message(plan, self.strategy.build_checkpoint(summary))
        checkpoint_tokens = estimate_message(message)
        if checkpoint_tokens >= plan.span.token_count:
            raise SummaryTooLargeError(
                f"the summary is not smaller than what it would replace ({checkpoint_tokens} estimated tokens "
                f">= {plan.span.token_count})"
            )
        _check_writable(session)
        _check_idle(session)
        _check_unchanged(session, self.meter.measure(session), plan.span)
        seq, turn = session.next_seq, session.open_turn
        events = compaction_events(plan, summary, message, output, seq=seq, time=self._clock(), turn=turn)
        try:
            session.append_events(events)
        except EventError:
            if session.next_seq != seq:  # another thread appended between the check and the batch
                raise CompactionChangedError("the session grew while the compaction was being committed") from None
            raise
        if flush:
            session.flush()
        return CompactionResult(
            compaction_id=plan.compaction_id,
            turn=turn,
            start_seq=seq,
            summary_seq=seq + 1,
            checkpoint_seq=seq + 2,
            end_seq=seq + 3,
            summary=tuple(summary),
            shadowed_seqs=plan.span.seqs,
            shadowed_token_count=plan.span.token_count,
            checkpoint_token_count=checkpoint_tokens,
            usage=output.usage,
            source_command_id=plan.source_command_id,
        )

    # -- the flows --------------------------------------------------------------------

    def _compact_flow(
        self,
        session: Session,
        retain_tokens: int,
        span: tuple[int, int] | None,
        source_command_id: str | None,
        flush: bool,
        replans: int,
    ) -> Flow[CompactionResult]:
        attempt = 0
        while True:
            _check_writable(session)  # before the model is asked for a summary that could not be stored
            plan = self.plan(session, retain_tokens=retain_tokens, span=span, source_command_id=source_command_id)
            answer = yield plan.request
            try:
                return self.commit(session, plan, answer, flush=flush)
            except CompactionChangedError:
                attempt += 1
                if attempt > replans:
                    raise

    def _pressure_flow(self, session: Session, *, window: int | None, prune: bool) -> Flow[CompactionResult | None]:
        budgets = self.budgets(session, window=window)
        if budgets is None:
            return None
        threshold = budgets.threshold_tokens
        measurement = self.meter.measure(session)
        if measurement.total_tokens < threshold:
            return None
        _check_idle(session)
        if prune and session.open_turn is not None and self.pruner.prune(session, clock=self._clock):
            measurement = self.meter.measure(session)
            if measurement.total_tokens < threshold:
                return None
        result: CompactionResult | None = None
        for _ in range(self.strategy.rounds):
            if self.strategy.select_span(session, measurement, budgets.retain_tokens) is None:
                if result is None:
                    return None
                break
            result = yield from self._compact_flow(session, budgets.retain_tokens, None, None, True, 1)
            measurement = self.meter.measure(session)
            if measurement.total_tokens < threshold:
                return result
        raise ContextStillFullError(
            f"the context is still over the threshold after {self.strategy.rounds} compaction round(s) "
            f"({measurement.total_tokens} estimated tokens >= {threshold})",
            result=result,
        )

    def _overflow_flow(self, session: Session, *, prune: bool, retain_tokens: int) -> Flow[OverflowRecovery]:
        pruned = PruneResult()
        if prune and session.open_turn is not None:
            pruned = self.pruner.prune(session, clock=self._clock)
        try:
            result: CompactionResult | None = yield from self._compact_flow(session, retain_tokens, None, None, True, 1)
        except NothingToCompactError:
            result = None
        return OverflowRecovery(pruned, result)

    # -- public operations (sync and async drivers of the flows) ------------------------

    def compact(
        self,
        session: Session,
        summarizer: Summarizer,
        *,
        retain_tokens: int = 0,
        span: tuple[int, int] | None = None,
        source_command_id: str | None = None,
        flush: bool = True,
        replans: int = 1,
    ) -> CompactionResult:
        """Compact now: condense the head of the surface (or ``span``) into one checkpoint.

        Raises a :class:`~dshpy.errors.CompactionError` (nothing written) when there is
        nothing to compact, another compaction holds the session, the span would split
        a tool pair, or the summary is unusable.
        """
        flow = self._compact_flow(session, retain_tokens, span, source_command_id, flush, replans)
        with compaction_span(session, reason="manual"):
            return _drive(flow, summarizer)

    async def acompact(
        self,
        session: Session,
        summarizer: Summarizer | AsyncSummarizer,
        *,
        retain_tokens: int = 0,
        span: tuple[int, int] | None = None,
        source_command_id: str | None = None,
        flush: bool = True,
        replans: int = 1,
    ) -> CompactionResult:
        """:meth:`compact` with an async (or sync) summarizer."""
        flow = self._compact_flow(session, retain_tokens, span, source_command_id, flush, replans)
        with compaction_span(session, reason="manual"):
            return await _adrive(flow, summarizer)

    def compact_if_needed(
        self, session: Session, summarizer: Summarizer, *, window: int | None = None, prune: bool = True
    ) -> CompactionResult | None:
        """The automatic check before a model request (dsh's pre-step pressure compaction).

        Below the threshold: nothing. Above it: prune oversized tool results (inside a
        turn), and if that is not enough compact the head, keeping the strategy's
        retained tail, for up to ``strategy.rounds`` rounds. Returns the last
        compaction (``None`` if none was needed or possible); raises
        :class:`~dshpy.errors.ContextStillFullError` when the rounds ran out.
        """
        return _drive(self._pressure_flow(session, window=window, prune=prune), summarizer)

    async def acompact_if_needed(
        self,
        session: Session,
        summarizer: Summarizer | AsyncSummarizer,
        *,
        window: int | None = None,
        prune: bool = True,
    ) -> CompactionResult | None:
        """:meth:`compact_if_needed` with an async (or sync) summarizer."""
        return await _adrive(self._pressure_flow(session, window=window, prune=prune), summarizer)

    def recover_overflow(
        self, session: Session, summarizer: Summarizer, *, prune: bool = True, retain_tokens: int = 0
    ) -> OverflowRecovery:
        """After the provider refused a request as too long: prune, then one maximal head compaction.

        Retry the request only if :attr:`OverflowRecovery.changed`; otherwise the
        original error stands (dsh's overflow recovery). ``retain_tokens`` keeps a
        tail verbatim instead (0: only the newest node, dsh's choice) — for a caller
        that knows the whole span would not fit the summary call's own window.
        """
        with compaction_span(session, reason="context-window"):
            return _drive(self._overflow_flow(session, prune=prune, retain_tokens=retain_tokens), summarizer)

    async def arecover_overflow(
        self,
        session: Session,
        summarizer: Summarizer | AsyncSummarizer,
        *,
        prune: bool = True,
        retain_tokens: int = 0,
    ) -> OverflowRecovery:
        """:meth:`recover_overflow` with an async (or sync) summarizer."""
        flow = self._overflow_flow(session, prune=prune, retain_tokens=retain_tokens)
        with compaction_span(session, reason="context-window"):
            return await _adrive(flow, summarizer)

    def prune(self, session: Session, *, flush: bool = True) -> PruneResult:
        """Prune every oversized tool result of the current surface (needs an open turn)."""
        return self.pruner.prune(session, clock=self._clock, flush=flush)


# -- checks ---------------------------------------------------------------------------


def _check_writable(session: Session) -> None:
    if session.read_only:
        raise ReadOnlySessionError(f'session "{session.id}" is read-only: compaction appends to the log')


def _check_idle(session: Session) -> None:
    open_bracket = session.lifecycle.compaction
    if open_bracket is not None:
        raise CompactionBusyError(
            f'session "{session.id}" has an open compaction (compaction/start at seq {open_bracket.seq} '
            f'"{open_bracket.compaction_id}" is unmatched in this lifecycle)'
        )


def _nothing(session: Session, measurement: Measurement) -> str:
    if not measurement.seqs:
        return f'session "{session.id}" has nothing to compact: no message is visible to the model yet'
    return (
        f'session "{session.id}" has no compactable span: the newest message is always kept, a system prompt at '
        "the head is never compacted, and a tool call is never separated from its result"
    )


def _explicit_span(measurement: Measurement, start_seq: int, end_seq: int) -> Span:
    seqs = measurement.seqs
    if start_seq not in seqs or end_seq not in seqs:
        missing = start_seq if start_seq not in seqs else end_seq
        raise CompactionError(f"seq {missing} is not on the current surface", code="invalid-span")
    first, last = seqs.index(start_seq), seqs.index(end_seq)
    if first > last:
        raise CompactionError(
            f"span start {start_seq} (position {first}) comes after its end {end_seq} (position {last})",
            code="invalid-span",
        )
    return Span(seqs[first : last + 1], first, sum(measurement.prices[first : last + 1]))


def _check_span(session: Session, measurement: Measurement, span: Span) -> None:
    """A strategy's (or caller's) span must be current, balanced, and leave the system head alone."""
    seqs = measurement.seqs
    first, count = span.start_index, len(span.seqs)
    if count == 0 or seqs[first : first + count] != span.seqs:
        raise CompactionError(f"span {list(span.seqs)} is not a run of current surface nodes", code="invalid-span")
    events = session.events
    if first == 0 and events[span.start_seq].type == "system/message":
        raise CompactionError("the system prompt at surface node 0 is never compacted", code="invalid-span")
    cuts = measurement.cuts
    if not cuts[first]:
        raise UnbalancedSpanError(f"span start {span.start_seq} would separate a tool call from its result")
    if not cuts[first + count]:
        raise UnbalancedSpanError(f"span end {span.end_seq} would separate a tool call from its result")


def _check_unchanged(session: Session, measurement: Measurement, span: Span) -> None:
    """The summary was written for ``span``: the same nodes, at the same prices, still a balanced run."""
    seqs = measurement.seqs
    first = seqs.index(span.start_seq) if span.start_seq in seqs else -1
    end = first + len(span.seqs)
    if first < 0 or seqs[first:end] != span.seqs:
        raise CompactionChangedError("the compacted span is no longer a run of current surface nodes")
    if sum(measurement.prices[first:end]) != span.token_count:
        raise CompactionChangedError("the compacted span was rewritten while its summary was being written")
    try:
        _check_span(session, measurement, Span(span.seqs, first, span.token_count))
    except UnbalancedSpanError as error:
        raise CompactionChangedError(f"the compacted span is no longer tool-balanced: {error}") from error


# -- summaries and drivers ----------------------------------------------------------------


def _output(answer: SummaryOutput | str, request: SummaryRequest) -> SummaryOutput:
    """A summarizer's answer as a :class:`SummaryOutput` (a string: text made without a model call)."""
    if isinstance(answer, SummaryOutput):
        if answer.model_call and answer.max_tokens is None:
            return SummaryOutput(
                answer.content, answer.provider, answer.model, answer.usage, request.max_tokens, answer.model_call
            )
        return answer
    if not isinstance(answer, str):
        raise SummaryRejectedError(f"a summarizer must return a SummaryOutput or a str, not {type(answer).__name__}")
    if request.provider is None or request.model is None:
        raise SummaryRejectedError(
            "the session has no route to credit a plain-text summary to: "
            "return a SummaryOutput naming provider and model"
        )
    return SummaryOutput.text(answer, provider=request.provider, model=request.model, model_call=False)


def _summarize(summarizer: Callable[[SummaryRequest], Any], request: SummaryRequest) -> Any:
    try:
        return summarizer(request)
    except Exception as error:
        raise SummaryFailedError(f"the summarizer failed: {error}") from error


def _drive(flow: Flow[T], summarizer: Summarizer) -> T:
    try:
        request = next(flow)
        while True:
            answer = _summarize(summarizer, request)
            if inspect.isawaitable(answer):
                if inspect.iscoroutine(answer):
                    answer.close()  # never awaited: close it instead of leaking a warning
                raise TypeError("this summarizer is async: use the engine's a-prefixed method (acompact, …)")
            request = flow.send(answer)
    except StopIteration as done:
        return cast("T", done.value)
    finally:
        flow.close()


async def _adrive(flow: Flow[T], summarizer: Summarizer | AsyncSummarizer) -> T:
    try:
        request = next(flow)
        while True:
            answer = _summarize(summarizer, request)
            if inspect.isawaitable(answer):
                try:
                    answer = await answer
                except Exception as error:
                    raise SummaryFailedError(f"the summarizer failed: {error}") from error
            request = flow.send(answer)
    except StopIteration as done:
        return cast("T", done.value)
    finally:
        flow.close()


# -- the default engine ---------------------------------------------------------------------

DEFAULT_ENGINE = CompactionEngine()
"""dsh's defaults: :class:`BasicStrategy`, the shared meter, the default pruner."""


def needs_compaction(session: Session, *, window: int | None = None) -> bool:
    """Whether ``session``'s next request has reached the default strategy's threshold."""
    return DEFAULT_ENGINE.needs_compaction(session, window=window)


def compact(session: Session, summarizer: Summarizer, **options: Any) -> CompactionResult:
    """:meth:`CompactionEngine.compact` with the default engine."""
    return DEFAULT_ENGINE.compact(session, summarizer, **options)


async def acompact(session: Session, summarizer: Summarizer | AsyncSummarizer, **options: Any) -> CompactionResult:
    """:meth:`CompactionEngine.acompact` with the default engine."""
    return await DEFAULT_ENGINE.acompact(session, summarizer, **options)


def prune_tool_results(session: Session, *, flush: bool = True) -> PruneResult:
    """Prune ``session``'s oversized tool results with dsh's default budgets (needs an open turn)."""
    return DEFAULT_ENGINE.prune(session, flush=flush)
