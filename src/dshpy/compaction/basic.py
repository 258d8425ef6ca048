"""The built-in strategy: dsh's ``compaction-basic`` (0.2.1rc2 defaults and budget arithmetic).

* **When**: the next request's estimate reaches ``threshold_tokens =
  floor(min(window × threshold_ratio, window − reserved − headroom_tokens))``, where
  ``reserved`` is the output the routed request reserves (its header's
  ``maxTokens``) and ``headroom_tokens`` the room kept free for the summary call's
  own answer (which replays the conversation, so it needs window left over).
* **What**: a head-anchored span — from the first node after a system prompt at
  surface node 0 (which is never compacted) up to where the kept tail begins. The
  tail is the newest nodes worth ``retain_tokens`` (``floor((window − reserved) ×
  retain_ratio)``, or a fixed ``retain_tokens``; 0 for a manual or overflow
  compaction, which still keeps the newest node); its start moves toward the head
  until no tool call is separated from its result.
* **How**: the summarizer gets the system prompt, the span's messages and the
  instruction of :mod:`~dshpy.compaction.checkpoint`, capped at ``max_tokens``
  (default: the headroom). A span that holds an earlier checkpoint is condensed
  with it, which is how compactions nest.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dshpy.compaction.checkpoint import SUMMARY_INSTRUCTION, frame_summary
from dshpy.compaction.meter import Measurement
from dshpy.compaction.strategy import Budgets, Span
from dshpy.compaction.summarizer import SummaryRequest
from dshpy.errors import CompactionConfigError
from dshpy.log.messages import Message
from dshpy.log.session import Session

__all__ = ["DEFAULT_RETAIN_RATIO", "BasicPolicy", "BasicStrategy"]

DEFAULT_RETAIN_RATIO = 0.16


@dataclass(frozen=True, slots=True)
class BasicPolicy:
    """``compaction-basic``'s settings; the defaults are dsh 0.2.1rc2's."""

    threshold_ratio: float = 0.8
    retain_ratio: float | None = None
    """Share of the message budget a pressure compaction keeps verbatim (default 0.16 unless ``retain_tokens``)."""
    retain_tokens: int | None = None
    """A fixed verbatim tail instead of ``retain_ratio``."""
    headroom_tokens: int = 65_536
    max_tokens: int | None = None
    """Output cap of the summary call (default: ``headroom_tokens``)."""
    compaction_retries: int = 1
    """Extra rounds a pressure check may run when one compaction is not enough."""

    def __post_init__(self) -> None:
        if not (isinstance(self.threshold_ratio, int | float) and 0 < self.threshold_ratio <= 1):
            raise CompactionConfigError(f"threshold_ratio ({self.threshold_ratio!r}) must be a number in (0, 1]")
        if self.retain_tokens is not None:
            if self.retain_ratio is not None:
                raise CompactionConfigError("retain_ratio and retain_tokens are mutually exclusive")
            _count("retain_tokens", self.retain_tokens)
        else:
            ratio = self.effective_retain_ratio
            if not (isinstance(ratio, int | float) and 0 < ratio <= 1):
                raise CompactionConfigError(f"retain_ratio ({ratio!r}) must be a number in (0, 1]")
            if ratio >= self.threshold_ratio:
                raise CompactionConfigError(
                    f"retain_ratio ({ratio}) must be less than threshold_ratio ({self.threshold_ratio})"
                )
        _count("headroom_tokens", self.headroom_tokens)
        _count("compaction_retries", self.compaction_retries)
        if self.max_tokens is not None:
            _count("max_tokens", self.max_tokens, minimum=1)
        elif self.headroom_tokens < 1:
            raise CompactionConfigError("max_tokens must be set when headroom_tokens is 0")

    @property
    def effective_retain_ratio(self) -> float:
        return DEFAULT_RETAIN_RATIO if self.retain_ratio is None else self.retain_ratio

    @property
    def summary_max_tokens(self) -> int:
        return self.max_tokens if self.max_tokens is not None else self.headroom_tokens

    def budgets(self, window: int, reserved_output_tokens: int = 0) -> Budgets:
        """Threshold and retained tail for a ``window``-token model (raises :class:`CompactionConfigError`
        when the window leaves no room)."""
        _count("window", window, minimum=1)
        _count("reserved_output_tokens", reserved_output_tokens)
        message_budget = window - reserved_output_tokens
        if message_budget <= 0:
            raise CompactionConfigError(
                f"the request reserves {reserved_output_tokens} output tokens of a {window}-token context window, "
                "leaving nothing for messages"
            )
        pressure_budget = message_budget - self.headroom_tokens
        if pressure_budget <= 0:
            raise CompactionConfigError(
                f"{reserved_output_tokens} reserved output tokens and {self.headroom_tokens} headroom tokens leave "
                f"nothing of a {window}-token context window: lower headroom_tokens or the request's max tokens"
            )
        threshold = math.floor(min(window * self.threshold_ratio, pressure_budget))
        if self.retain_tokens is not None:
            retain = self.retain_tokens
        else:
            retain = math.floor(message_budget * self.effective_retain_ratio)
        if retain >= threshold:
            raise CompactionConfigError(f"retained tokens ({retain}) must be less than the threshold ({threshold})")
        return Budgets(threshold, retain)


def _count(name: str, value: object, *, minimum: int = 0) -> None:
    if type(value) is not int or value < minimum:
        raise CompactionConfigError(f"{name} ({value!r}) must be an integer >= {minimum}")


def _route(session: Session) -> tuple[str | None, str | None]:
    """The provider and model the conversation last used (header first, as dsh's summarizer picks it)."""
    header = session.request_header()
    config = header.get("config") if isinstance(header, Mapping) else None
    if isinstance(config, Mapping) and config.get("provider") and config.get("model"):
        return str(config["provider"]), str(config["model"])
    events = session.events
    for seq in range(len(events) - 1, -1, -1):
        event = events[seq]
        if event.type == "request/context":
            return str(event.data["provider"]), str(event.data["model"])
    return None, None


class BasicStrategy:
    """Head-anchored, tool-balanced span; one summary call; the framed checkpoint (see the module doc)."""

    def __init__(self, policy: BasicPolicy | None = None) -> None:
        self.policy = policy if policy is not None else BasicPolicy()

    @property
    def rounds(self) -> int:
        return self.policy.compaction_retries + 1

    def budgets(self, window: int, reserved_output_tokens: int) -> Budgets:
        return self.policy.budgets(window, reserved_output_tokens)

    def select_span(self, session: Session, measurement: Measurement, retain_tokens: int) -> Span | None:
        seqs, prices = measurement.seqs, measurement.prices
        if not seqs:
            return None
        events = session.events
        first = 1 if events[seqs[0]].type == "system/message" else 0
        kept = 0
        keep_from = len(seqs)
        for index in range(len(seqs) - 1, -1, -1):
            kept += prices[index]
            keep_from = index
            if kept >= retain_tokens:
                break
        if keep_from <= first:
            return None
        cuts = measurement.cuts
        while keep_from > first and not cuts[keep_from]:
            keep_from -= 1
        if keep_from <= first:
            return None
        return Span(seqs[first:keep_from], first, sum(prices[first:keep_from]))

    def summary_request(self, session: Session, span: Span, *, compaction_id: str) -> SummaryRequest:
        nodes = session.surface_nodes
        head = nodes[0] if nodes and session.events[nodes[0]].type == "system/message" else None
        chosen = set(span.seqs)
        if head is not None:
            chosen.add(head)
        # the shared message objects of the history the model was sent, system prompt first
        messages: list[Message] = [m for m in session.derive_messages() if m.seq in chosen]
        header = session.request_header()
        tools = header.get("tools") if isinstance(header, Mapping) else None
        provider, model = _route(session)
        return SummaryRequest(
            session_id=session.id,
            compaction_id=compaction_id,
            provider=provider,
            model=model,
            messages=tuple(messages),
            tools=tuple(tools) if tools else None,
            instruction=SUMMARY_INSTRUCTION,
            max_tokens=self.policy.summary_max_tokens,
            shadowed_seqs=span.seqs,
        )

    def build_checkpoint(self, summary: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        return frame_summary(summary)
