"""``usage``: every token the provider billed, failed attempts included, per model.

The seed's point (dsh-05): a failed model attempt still costs money, which is why
``assistant/attempt`` is logged at all. So the totals add up

* each ``assistant/message``'s ``usage`` (or, if it has none, the last usage chunk of
  its stream — never both: the message's ``usage`` repeats that chunk), and
* each ``assistant/attempt``'s last stream usage chunk (an attempt has no top-level
  ``usage``), and
* each ``compaction/summary``'s ``usage``: the summary call was a model call too,
  billed to the ``provider`` and ``model`` the record names. (dsh's ``tokenUsage``
  projection leaves these out; on a log without compactions the totals are the same.)

Buckets follow ``TokenUsage``: ``inputTokens`` is *uncached* input only, and
``cacheReadTokens`` / ``cacheWriteTokens`` are disjoint from it (billed input is the
sum of the three); ``reasoningTokens`` is a part of ``outputTokens``, reported beside
it, never added to a total. Malformed counts are skipped, not guessed.

The per-model breakdown names a message's model from its ``source`` (``provider``,
``model``). An attempt carries no message, so it is billed to the route most recently
logged before it: ``request/context`` (``provider``, ``model``) or a ``request/header``'s
``config`` — dsh logs one of them whenever the route changes. An attempt before any
route is billed to provider and model ``null``. Pricing is not part of the state:
prices change, tokens do not.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dshpy.core.events import SessionEvent
from dshpy.projections.builtins._stream import is_count, last_usage
from dshpy.projections.definition import ProjectionDefinition, ProjectionState

__all__ = ["USAGE", "ModelUsage", "Route", "TokenCounts", "UsageState"]

_BUCKETS = (
    ("input_tokens", "inputTokens"),
    ("output_tokens", "outputTokens"),
    ("cache_read_tokens", "cacheReadTokens"),
    ("cache_write_tokens", "cacheWriteTokens"),
    ("reasoning_tokens", "reasoningTokens"),
)


class TokenCounts(ProjectionState):
    """Token buckets (``TokenUsage`` names): billed input = input + cache read + cache write."""

    input_tokens: int = 0
    """Uncached input tokens."""
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0
    """Part of ``output_tokens``, not in addition to it."""

    def plus(self, other: TokenCounts) -> TokenCounts:
        return TokenCounts(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
        )

    @property
    def billed_input_tokens(self) -> int:
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens


def _sample(usage: Any) -> dict[str, int] | None:
    """A ``TokenUsage`` object's usable buckets by field name; ``None`` if it is not an object."""
    if not isinstance(usage, dict):
        return None
    return {name: usage[wire] for name, wire in _BUCKETS if is_count(usage.get(wire))}


def _add(counts: TokenCounts, sample: dict[str, int]) -> TokenCounts:
    if not sample:
        return counts
    current = counts.__dict__
    return counts.evolve(**{name: current[name] + count for name, count in sample.items()})


class Route(ProjectionState):
    """The provider and model requests currently go to."""

    provider: str | None = None
    model: str | None = None


class ModelUsage(ProjectionState):
    """Usage billed to one (provider, model)."""

    provider: str | None
    model: str | None
    tokens: TokenCounts = TokenCounts()
    messages: int = 0
    """Successful model calls (``assistant/message``)."""
    failed_attempts: int = 0
    """Failed model calls (``assistant/attempt``)."""
    summaries: int = 0
    """Compaction summary calls (``compaction/summary``)."""


class UsageState(ProjectionState):
    """Token totals over the whole log, split by model."""

    total: TokenCounts = TokenCounts()
    messages: int = 0
    failed_attempts: int = 0
    summaries: int = 0
    by_model: tuple[ModelUsage, ...] = ()
    """In order of first use."""
    route: Route | None = None
    """Where an attempt is billed (internal: the latest ``request/context`` or ``request/header`` route)."""


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _route_of(event: SessionEvent) -> Route | None:
    data = event.data
    if event.type == "request/context":
        config = data
    else:  # request/header
        header = data.get("header")
        config = header.get("config") if isinstance(header, dict) else None
    if not isinstance(config, dict):
        return None
    provider, model = config.get("provider"), config.get("model")
    return Route(provider=_text(provider), model=_text(model))


_TYPES = frozenset(
    {"assistant/message", "assistant/attempt", "compaction/summary", "request/context", "request/header"}
)


def fold_usage(state: UsageState, events: Sequence[SessionEvent]) -> UsageState:
    """``state`` after ``events``: token deltas summed in plain dicts, the models rebuilt once at the end."""
    route = state.route
    total: dict[str, int] = {}
    messages = failed_attempts = summaries = 0
    billed: dict[tuple[str | None, str | None], list[Any]] = {}  # by first use: [tokens, messages, failed, summaries]
    changed = False
    for event in events:
        kind = event.type
        if kind not in _TYPES:
            continue
        data = event.data
        if not isinstance(data, dict):
            continue
        if kind == "assistant/message":
            usage = data.get("usage")
            sample = _sample(usage if isinstance(usage, dict) else last_usage(data.get("stream")))
            message = data.get("message")
            source = message.get("source") if isinstance(message, dict) else None
            if not isinstance(source, dict):
                source = {}
            key = (_text(source.get("provider")), _text(source.get("model")))
            failed = False
        elif kind == "assistant/attempt":
            key = (None, None) if route is None else (route.provider, route.model)
            sample = _sample(last_usage(data.get("stream")))
            failed = True
        elif kind == "compaction/summary":
            key = (_text(data.get("provider")), _text(data.get("model")))
            sample = _sample(data.get("usage"))
            failed = None
        else:  # request/context, request/header
            new_route = _route_of(event)
            if new_route is not None and new_route != route:
                route = new_route
                changed = True
            continue
        tally = billed.get(key)
        if tally is None:
            tally = billed[key] = [{}, 0, 0, 0]
        if sample:
            tokens = tally[0]
            for name, count in sample.items():
                total[name] = total.get(name, 0) + count
                tokens[name] = tokens.get(name, 0) + count
        if failed is None:
            tally[3] += 1
            summaries += 1
        elif failed:
            tally[2] += 1
            failed_attempts += 1
        else:
            tally[1] += 1
            messages += 1
        changed = True
    if not changed:
        return state
    if not billed:
        return state.evolve(route=route)
    by_model = list(state.by_model)
    positions: dict[tuple[str | None, str | None], int] = {}
    for index, known in enumerate(by_model):
        positions.setdefault((known.provider, known.model), index)
    for (provider, model), (tokens, billed_messages, billed_failures, billed_summaries) in billed.items():
        found = positions.get((provider, model))
        if found is None:
            by_model.append(
                ModelUsage(
                    provider=provider,
                    model=model,
                    tokens=TokenCounts(**tokens),
                    messages=billed_messages,
                    failed_attempts=billed_failures,
                    summaries=billed_summaries,
                )
            )
            continue
        entry = by_model[found]
        by_model[found] = entry.evolve(
            tokens=_add(entry.tokens, tokens),
            messages=entry.messages + billed_messages,
            failed_attempts=entry.failed_attempts + billed_failures,
            summaries=entry.summaries + billed_summaries,
        )
    return state.evolve(
        total=_add(state.total, total),
        messages=state.messages + messages,
        failed_attempts=state.failed_attempts + failed_attempts,
        summaries=state.summaries + summaries,
        by_model=tuple(by_model),
        route=route,
    )


def apply_usage(state: UsageState, event: SessionEvent) -> UsageState:
    return fold_usage(state, (event,))


USAGE: ProjectionDefinition[UsageState] = ProjectionDefinition(
    key="usage",
    state_version=2,
    state_schema=UsageState,
    init=UsageState,
    apply=apply_usage,
    types=_TYPES,
    apply_many=fold_usage,
)
"""Token usage of successful messages, failed attempts and summary calls, with a per-model breakdown.

Version 2 added the summary calls (``compaction/summary``); cached version-1 states are refolded."""
