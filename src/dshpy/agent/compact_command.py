"""dsh's ``/compact`` slash command: a manual compaction logged as ``command/run`` … ``command/done``.

What the 0.2.1rc2 runtime does (its ``dsh-commands`` registry and
``dsh-command-compact``), and so what this writes:

* ``command/run {commandId, name: "compact", args, source: {kind: "user"}}`` before
  anything else — ``args`` is the raw text after ``/compact`` (``""`` when bare);
* any arguments: ``command/done {kind: "error", text: "Usage: /compact (no
  arguments)"}`` and nothing else;
* a compaction: its four events, their bracket and checkpoint carrying
  ``sourceCommandId``, then ``command/done {kind: "success", text: "Compacted N
  history items (~T tokens).", sourceEventSeq: <the compaction/summary seq>}``;
* nothing to compact: ``command/done {kind: "success", text: "No compactable
  history yet."}`` (no compaction events);
* a refusal or failure: ``command/done {kind: "error"}`` with dsh's fixed text for
  its code (``busy``, ``changed``, ``summary``; dshpy's other codes say what the
  error says); an unexpected error or a cancellation is settled the same way
  (``Compaction cancelled.``) and then raised.

Both records are log-only and need no turn. Command ids are dsh's
``cmd-<8 hex digits of this process>-<n>``, so a resumed log never repeats one.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import uuid
from dataclasses import dataclass

from dshpy.errors import CompactionError, NothingToCompactError
from dshpy.log.records import command_done_data, command_run_data
from dshpy.log.session import Session

from .compaction import AgentCompaction

__all__ = ["COMPACT_ERROR_TEXTS", "COMPACT_USAGE", "CommandOutcome", "new_command_id", "run_compact_command"]

COMPACT_USAGE = "Usage: /compact (no arguments)"
NOTHING_TO_COMPACT = "No compactable history yet."

COMPACT_ERROR_TEXTS = {
    "busy": "Compaction is unavailable because this process has an active compaction, or the agent is not idle.",
    "cancelled": "Compaction cancelled.",
    "changed": (
        "The history selected for compaction changed before it could be replaced. "
        "The attempt is recorded in the session log."
    ),
    "summary": "Compaction could not produce a useful summary. The attempt is recorded in the session log.",
    "commit": (
        "Compaction did not finish cleanly; some session history may have changed. "
        "Inspect the current session state before retrying."
    ),
    "persistence": "Compaction finished, but the session could not be saved.",
}
"""dsh's texts for ``ManualCompactionError`` codes (``dsh-command-compact``), verbatim."""

_INSTANCE = uuid.uuid4().hex[:8]
_NUMBERS = itertools.count(1)


def new_command_id() -> str:
    """A fresh ``cmd-<instance>-<n>`` id (unique within this process, and across processes on one log)."""
    return f"cmd-{_INSTANCE}-{next(_NUMBERS)}"


@dataclass(frozen=True, slots=True)
class CommandOutcome:
    """How a command settled: what ``command/done`` says (and the compaction it made, if any)."""

    command_id: str
    kind: str
    text: str
    source_event_seq: int | None = None

    @property
    def ok(self) -> bool:
        return self.kind == "success"


def _failure_text(error: CompactionError) -> str:
    return COMPACT_ERROR_TEXTS.get(error.code, f"Compaction failed: {error}")


async def run_compact_command(session: Session, compaction: AgentCompaction, args: str = "") -> CommandOutcome:
    """Run ``/compact`` (``args``: what followed the name, verbatim) on an idle session, logging it as dsh does."""
    command_id = new_command_id()
    session.append("command/run", command_run_data(command_id, "compact", args))
    seq: int | None = None
    if args.strip():
        kind, text = "error", COMPACT_USAGE
    else:
        try:
            result = await compaction.compact_now(source_command_id=command_id)
        except NothingToCompactError:
            kind, text = "success", NOTHING_TO_COMPACT
        except CompactionError as error:
            kind, text = "error", _failure_text(error)
        except (Exception, asyncio.CancelledError) as error:  # settled as an error, then raised (as dsh does)
            failed = COMPACT_ERROR_TEXTS["cancelled"] if isinstance(error, asyncio.CancelledError) else str(error)
            with contextlib.suppress(Exception):  # the handler's own error stays the one reported
                session.append("command/done", command_done_data(command_id, "error", failed))
            raise
        else:
            count, tokens = len(result.shadowed_seqs), result.shadowed_token_count
            kind, text, seq = "success", f"Compacted {count} history items (~{tokens} tokens).", result.summary_seq
    session.append("command/done", command_done_data(command_id, kind, text, source_event_seq=seq))
    session.flush()
    return CommandOutcome(command_id, kind, text, seq)
