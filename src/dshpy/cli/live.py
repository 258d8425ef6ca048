"""Printing a running turn: the answer on stdout as it streams, everything else on stderr.

stdout gets only the model's answer text, so ``dshpy run "…" > answer.txt`` captures
exactly the answer; reasoning (with ``--reasoning``), tool calls, failed tools,
retries and compactions are progress notes on stderr. Model text is printed as plain
text, never interpreted as markup, with control characters escaped.
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
            self._write(text)
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
        elif event.type == "assistant/attempt":
            self.note("(the model call failed)")
        elif event.type == "compaction/summary":
            count, tokens = len(data["shadowedSeqs"]), data["shadowedTokenCount"]
            self.note(f"(compacted {count} history items, ~{tokens:,} tokens, into a summary)")
        elif event.type == "compaction/prune":
            self.note(f"(pruned a long tool result, ~{data['shadowedTokenCount']:,} tokens)")
        elif event.type == "llm/retry":
            failure = data.get("failure") or {}
            self.note(
                f"retry {data['retry']} in {int(data.get('delayMs', 0)) / 1000:g} s: {failure.get('message', '')}"
            )
