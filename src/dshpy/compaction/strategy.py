"""The seam a compaction policy plugs into (the seeds' ``CompactionStrategy``).

A strategy makes three decisions and the engine does everything else (pricing,
locking, the transaction, re-planning, the model call through a summarizer):

* **select** the span of the current surface to condense
  (:meth:`CompactionStrategy.select_span`);
* say how to **summarize** it — the request the summarizer gets
  (:meth:`CompactionStrategy.summary_request`);
* **build** the checkpoint that replaces it from the summary
  (:meth:`CompactionStrategy.build_checkpoint`).

Plus its budgets: when the context counts as full, and how much recent history a
pressure compaction keeps verbatim. The built-in strategy is
:class:`~dshpy.compaction.basic.BasicStrategy` (dsh's ``compaction-basic``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from dshpy.compaction.meter import Measurement
from dshpy.compaction.summarizer import SummaryRequest
from dshpy.log.session import Session

__all__ = ["Budgets", "CompactionStrategy", "Span"]


@dataclass(frozen=True, slots=True)
class Span:
    """A run of consecutive current surface nodes that one checkpoint will replace."""

    seqs: tuple[int, ...]
    """The nodes, in model order (what ``compaction/summary.shadowedSeqs`` records)."""
    start_index: int
    """Where the run started on the surface when it was selected."""
    token_count: int
    """The nodes' heuristic price (``shadowedTokenCount``)."""

    @property
    def start_seq(self) -> int:
        return self.seqs[0]

    @property
    def end_seq(self) -> int:
        return self.seqs[-1]


@dataclass(frozen=True, slots=True)
class Budgets:
    """A strategy's token budgets for one model window."""

    threshold_tokens: int
    """At or above this estimate the context needs compacting."""
    retain_tokens: int
    """A pressure compaction keeps at least this many tokens of recent history verbatim."""


class CompactionStrategy(Protocol):
    """Selects, asks for and frames one compaction."""

    @property
    def rounds(self) -> int:
        """How many compactions one pressure check may run before giving up."""
        ...

    def budgets(self, window: int, reserved_output_tokens: int) -> Budgets:
        """The budgets for a ``window``-token model whose request reserves ``reserved_output_tokens`` for output."""
        ...

    def select_span(self, session: Session, measurement: Measurement, retain_tokens: int) -> Span | None:
        """The span to condense, keeping ``retain_tokens`` of recent history; ``None`` if there is none.

        The span must be a run of current surface nodes that starts and ends at
        balanced tool-pairing cuts (the engine checks, and refuses one that does not).
        """
        ...

    def summary_request(self, session: Session, span: Span, *, compaction_id: str) -> SummaryRequest:
        """What the summarizer is asked for ``span``."""
        ...

    def build_checkpoint(self, summary: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """The content of the replacing ``user/message`` for the summary's text blocks."""
        ...
