"""Compaction and context management (layer L4): long sessions never die of a full context window.

Compaction never deletes or rewrites: it appends. A span of the model-visible
surface is replaced by one checkpoint ``user/message`` holding a summary, and an
oversized tool result by its head and tail; the log keeps everything the model
ever saw, and ``derive_messages()`` simply stops showing what was replaced.

* :mod:`~dshpy.compaction.meter` — the token meter: the next request's size from
  the log, calibrated by provider usage; :func:`context_usage` ("62% used");
* :mod:`~dshpy.compaction.engine` — :class:`CompactionEngine`:
  ``needs_compaction``, ``compact`` / ``acompact``, ``compact_if_needed``,
  ``recover_overflow``, ``prune``;
* :mod:`~dshpy.compaction.strategy` — the :class:`CompactionStrategy` seam;
  :mod:`~dshpy.compaction.basic` — dsh's ``compaction-basic`` as
  :class:`BasicStrategy` / :class:`BasicPolicy`;
* :mod:`~dshpy.compaction.pruner` — :class:`ToolResultPruner`;
* :mod:`~dshpy.compaction.summarizer` — the injected model call;
* :mod:`~dshpy.compaction.transaction` — the one-batch event transaction.

Imports only :mod:`dshpy.core`, :mod:`dshpy.log` and :mod:`dshpy.errors`.

The module-level helpers use one shared default engine::

    from dshpy.compaction import compact, context_usage, needs_compaction

    if needs_compaction(session):
        result = compact(session, summarizer, retain_tokens=...)
"""

from dshpy.compaction.basic import DEFAULT_RETAIN_RATIO, BasicPolicy, BasicStrategy
from dshpy.compaction.checkpoint import (
    CHECKPOINT_PREAMBLE,
    SUMMARY_CLOSE_TAG,
    SUMMARY_INSTRUCTION,
    SUMMARY_OPEN_TAG,
    SUMMARY_SECTIONS,
    frame_summary,
)
from dshpy.compaction.engine import (
    DEFAULT_ENGINE,
    CompactionEngine,
    OverflowRecovery,
    acompact,
    compact,
    needs_compaction,
    prune_tool_results,
)
from dshpy.compaction.estimate import estimate_content, estimate_message, estimate_tools
from dshpy.compaction.meter import DEFAULT_METER, ContextUsage, Measurement, PricedNode, TokenMeter, context_usage
from dshpy.compaction.pairing import balanced_cuts
from dshpy.compaction.pruner import PRUNE_MARKER, PrunedResult, PruneResult, ToolResultPruner
from dshpy.compaction.strategy import Budgets, CompactionStrategy, Span
from dshpy.compaction.summarizer import AsyncSummarizer, Summarizer, SummaryOutput, SummaryRequest
from dshpy.compaction.transaction import CompactionPlan, CompactionResult
from dshpy.compaction.window import (
    DEFAULT_CONTEXT_WINDOWS,
    DEFAULT_OUTPUT_LIMITS,
    default_context_window,
    default_output_limit,
)

__all__ = [
    "CHECKPOINT_PREAMBLE",
    "DEFAULT_CONTEXT_WINDOWS",
    "DEFAULT_ENGINE",
    "DEFAULT_METER",
    "DEFAULT_OUTPUT_LIMITS",
    "DEFAULT_RETAIN_RATIO",
    "PRUNE_MARKER",
    "SUMMARY_CLOSE_TAG",
    "SUMMARY_INSTRUCTION",
    "SUMMARY_OPEN_TAG",
    "SUMMARY_SECTIONS",
    "AsyncSummarizer",
    "BasicPolicy",
    "BasicStrategy",
    "Budgets",
    "CompactionEngine",
    "CompactionPlan",
    "CompactionResult",
    "CompactionStrategy",
    "ContextUsage",
    "Measurement",
    "OverflowRecovery",
    "PricedNode",
    "PruneResult",
    "PrunedResult",
    "Span",
    "Summarizer",
    "SummaryOutput",
    "SummaryRequest",
    "TokenMeter",
    "ToolResultPruner",
    "acompact",
    "balanced_cuts",
    "compact",
    "context_usage",
    "default_context_window",
    "default_output_limit",
    "estimate_content",
    "estimate_message",
    "estimate_tools",
    "frame_summary",
    "needs_compaction",
    "prune_tool_results",
]
