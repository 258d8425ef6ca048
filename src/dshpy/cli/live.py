"""Printing a running turn: the answer on stdout as it streams, everything else on stderr.

stdout gets only the model's answer text, so ``dshpy run "…" > answer.txt`` captures
exactly the answer; reasoning (with ``--reasoning``), tool calls, failed tools,
retries and compactions are progress notes on stderr. Model text is printed as plain
text, never interpreted as markup, with control characters escaped.

A model try can fail after it has streamed some text; the model never sees that
try (it is an ``assistant/attempt``), so the user's stdout must not keep it either.
On a terminal the text is shown live and, if its try fails, marked discarded on
stderr; anywhere else (a pipe, a file) each try's text is held back until the try
settles as an ``assistant/message``, so a pipe receives exactly the answers the log
keeps.
"""

from __future__ import annotations

import sys
from typing import IO

import click

from dshpy.agent.updates import ChunkUpdate, EventUpdate

from .render import clean

__all__ = ["LivePrinter"]


class LivePrinter:
    """Callbacks for :meth:`dshpy.agent.Agent.run` that write to a terminal (or pipes)."""

    def __init__(self, *, reasoning: bool = False, out: IO[str] | None = None, err: IO[str] | None = None) -> None:
        self.reasoning = reasoning
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self._line_open = False
        self._in_reasoning = False
        isatty = getattr(self.out, "isatty", None)
        self.live = bool(isatty()) if callable(isatty) else False
        """Whether answer text is shown as it streams (a terminal) or held until its try settles."""
        self._held: list[str] = []
        self._shown_partial = False

    def _write(self, text: str, *, err: bool = False) -> None:
        click.echo(text, nl=False, file=self.err if err else self.out)

    def end_line(self) -> None:
        """Finish the answer's last line, if one is open."""
        if self._line_open:
            self._write("\n")
            self._line_open = False
        if self._in_reasoning:
            self._write("\n", err=True)
            self._in_reasoning = False

    def note(self, text: str) -> None:
        """A progress line on stderr (after closing the answer's open line)."""
        self.end_line()
        click.secho(clean(text), dim=True, file=self.err)

    def on_chunk(self, update: ChunkUpdate) -> None:
        chunk = update.chunk
        kind = chunk.get("type")
        if kind == "text-delta":
            if self._in_reasoning:
                self._write("\n", err=True)
                self._in_reasoning = False
            text = clean(str(chunk["text"]))
            if not self.live:
                self._held.append(text)
                return
            self._write(text)
            self._shown_partial = True
            self._line_open = not text.endswith("\n")
        elif kind == "reasoning-delta" and self.reasoning:
            click.secho(clean(str(chunk["text"])), nl=False, dim=True, file=self.err)
            self._in_reasoning = True

    def on_event(self, update: EventUpdate) -> None:
        event = update.event
        data = event.data
        if event.type == "tool/call":
            arguments = str(data["arguments"])
            shown = arguments if len(arguments) <= 200 else arguments[:199] + "…"
            self.note(f"→ {data['name']}({shown})")
        elif event.type == "tool/result" and event.surface_op == "append" and data["message"].get("isError"):
            error = data.get("error") or {}
            self.note(f"✗ tool error {error.get('code', '')}".rstrip())
        elif event.type == "assistant/message":
            self._settled()
        elif event.type == "assistant/attempt":
            self._discard()
        elif event.type == "compaction/summary":
            count, tokens = len(data["shadowedSeqs"]), data["shadowedTokenCount"]
            self.note(f"(compacted {count} history items, ~{tokens:,} tokens, into a summary)")
        elif event.type == "compaction/prune":
            self.note(f"(pruned a long tool result, ~{data['shadowedTokenCount']:,} tokens)")
        elif event.type == "llm/retry":
            failure = data.get("failure") or {}
            limit = data.get("maxRetries")
            of = f" of {limit}" if isinstance(limit, int) else ""
            self.note(
                f"the model call failed: {failure.get('message', 'unknown error')} — "
                f"retrying ({data['retry']}{of}) in {int(data.get('delayMs', 0)) / 1000:g} s…"
            )

    def _settled(self) -> None:
        """A try became the answer: text held back for a pipe is written now."""
        self._shown_partial = False
        if self._held:
            text = "".join(self._held)
            self._held = []
            self._write(text)
            self._line_open = not text.endswith("\n")

    def _discard(self) -> None:
        """A try failed: its text is not part of the answer (held text is dropped, shown text is marked)."""
        self._held = []
        if self._shown_partial:
            self._shown_partial = False
            self.note("↑ discarded: that model try failed and is not part of the answer")
