"""Rich rendering of sessions for people: tables, the header card, transcripts, log lines, progress.

Everything shown comes from session data, which is untrusted: it is always wrapped
in :class:`rich.text.Text` (never parsed as markup) and passed through :func:`clean`,
which makes terminal control characters visible instead of letting a logged tool
output move the cursor or recolour the screen.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.progress import (
    BarColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.rule import Rule
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from dshpy.core.events import SessionEvent
from dshpy.core.json import dumps
from dshpy.log.messages import Message
from dshpy.log.session import Session
from dshpy.storage.base import SessionInfo

from .summary import SessionSummary, message_text, preview

__all__ = [
    "PROGRESS_MIN_BYTES",
    "PROGRESS_MIN_EVENTS",
    "Activity",
    "activity",
    "clean",
    "context_text",
    "event_line",
    "event_summary",
    "format_time",
    "plural",
    "session_card",
    "sessions_table",
    "show_progress",
    "state_label",
    "stats_view",
    "transcript",
    "turn_outcomes",
]

PROGRESS_MIN_EVENTS = 5_000
"""Sessions with fewer events export without a progress bar."""
PROGRESS_MIN_BYTES = 4 << 20
"""Import files smaller than this load without a progress bar."""

_CLIP_LINES = 12
_CLIP_CHARS = 1_500

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")

ROLE_STYLES = {
    "user": "bold green",
    "assistant": "bold cyan",
    "tool": "bold yellow",
    "system": "bold magenta",
    "developer": "bold magenta",
}


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def clean(text: str) -> str:
    """``text`` with control characters (ESC, CR, bidi overrides, …) shown as ``\\x1b``-style escapes."""
    return _CONTROL.sub(_escape, text)


_ID_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def shown_id(session_id: str) -> str:
    """A session id on one line and one column width: tabs, newlines and lone surrogates as ``\\x09``/``\\ud83d``."""
    return _ID_CONTROL.sub(_escape, session_id)


def format_time(ms: int, *, precise: bool = False) -> str:
    """Local time of an epoch-ms stamp: ``2024-05-01 14:03`` (``…:07.123`` when ``precise``)."""
    try:
        moment = datetime.fromtimestamp(ms / 1000)
    except (OverflowError, OSError, ValueError):
        return str(ms)
    if precise:
        return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{moment.microsecond // 1000:03d}"
    return moment.strftime("%Y-%m-%d %H:%M")


# -- list ---------------------------------------------------------------------------------


NARROW_WIDTH = 120
"""Below this many columns ``sessions list`` drops the event count and parent and shortens the rest."""


def _tail(text: str, width: int) -> str:
    """The end of ``text`` in ``width`` characters (a path's last parts say the most), ``…`` marking the cut."""
    return text if len(text) <= width else "…" + text[len(text) - width + 1 :]


def state_label(state: str | None, last_outcome: str | None) -> Text:
    """A list row's state: the lifecycle, and how the last turn ended when that was not a plain completion."""
    label = Text(state or "", style=LIFECYCLE_STYLES.get(state or "", ""))
    if last_outcome and last_outcome != "completed" and not (state == "failed" and last_outcome == "error"):
        label.append(f"{' · ' if state else ''}{last_outcome}", style="yellow" if last_outcome != "error" else "red")
    return label


def sessions_table(rows: Sequence[SessionSummary], width: int | None = None) -> Table:
    """The ``sessions list`` table: newest activity first, as the store lists them.

    ``width`` is the terminal's (``None``: unlimited, for a pipe). Ids are never
    shortened, so on a narrow terminal the table keeps id, turns, state and title and
    gives way elsewhere, as ``gh`` does: the event count and parent go, the creation
    time shrinks to five characters (the time today, else the day), and the cwd (its
    tail) and the title are cut to fit. Widths are then fixed here, because rich,
    asked to squeeze, would squeeze whole columns away.
    """
    narrow = width is not None and width < NARROW_WIDTH
    id_width = max((len(shown_id(row.info.id)) for row in rows), default=2)  # ids are never shortened
    states = [_state_cell(row) for row in rows]
    state_width = max([5, *(cell.cell_len for cell in states)])  # a state is never cut: the title gives way
    padding = (0, 1, 0, 0) if narrow else (0, 1)
    table = Table(box=None, header_style="bold", pad_edge=False, expand=False, padding=padding)
    if narrow and width is not None:
        fixed = id_width + 5 + 5 + state_width + 6  # six one-space gaps
        cwd_width = max(4, min(24, (width - fixed) // 3))
        title_width = max(6, width - fixed - cwd_width)
        table.add_column("id", no_wrap=True, style="cyan", width=id_width)
        table.add_column("date", no_wrap=True, width=5)
        table.add_column("cwd", no_wrap=True, overflow="ellipsis", width=cwd_width)
        table.add_column("turns", justify="right", no_wrap=True, width=5)
        table.add_column("state", no_wrap=True, width=state_width)
        table.add_column("title", overflow="ellipsis", no_wrap=True, width=title_width)
    else:
        cwd_width = 32
        table.add_column("id", no_wrap=True, style="cyan", min_width=id_width)
        table.add_column("created", no_wrap=True, min_width=16)
        table.add_column("cwd", overflow="ellipsis", no_wrap=True, max_width=cwd_width)
        table.add_column("turns", justify="right", no_wrap=True, min_width=5)
        table.add_column("events", justify="right", no_wrap=True, min_width=6)
        table.add_column("state", no_wrap=True, min_width=state_width)
        table.add_column("title / first prompt", overflow="ellipsis", no_wrap=True, ratio=1, min_width=10)
        table.add_column("parent", overflow="ellipsis", no_wrap=True, style="dim")
    for row, shown_state in zip(rows, states, strict=True):
        info = row.info
        if row.error is not None:
            label = Text(clean(f"unreadable: {row.error}"), style="red")
        else:  # a title from the first prompt is shown in italics, a real one upright
            label = Text(clean(row.title or ""), style="italic" if row.title_source == "prompt" else "")
        created = format_time(info.created_at)
        cells: list[Text | str] = [shown_id(info.id), _compact_time(created) if narrow else created]
        cells.append(Text(_tail(clean(info.cwd or ""), cwd_width)))
        cells.append(str(row.turns))
        if not narrow:
            cells.append(str(info.event_count))
        cells.extend([shown_state, label])
        if not narrow:
            cells.append(shown_id(info.parent_session or ""))
        table.add_row(*cells)
    return table


def _compact_time(shown: str) -> str:
    """``2024-05-01 14:03`` in five characters: the time if it is today, else the month and day."""
    today = datetime.now().strftime("%Y-%m-%d")
    return shown[11:16] if shown.startswith(today) else shown[5:10]


def _state_cell(row: SessionSummary) -> Text:
    shown_state = state_label(row.lifecycle, row.last_outcome)
    if row.info.stored_version < 4:  # an old dsh generation, read through its in-memory upgrade
        shown_state.append(f"{' ' if row.lifecycle else ''}(v{row.info.stored_version})", style="dim")
    return shown_state


LIFECYCLE_STYLES = {
    "created": "dim",
    "active": "green",
    "paused": "yellow",
    "completed": "",
    "failed": "red",
    "archived": "dim",
}
"""How a lifecycle state is shown in tables and cards."""


# -- stats ----------------------------------------------------------------------------------


def format_ms(ms: int | float) -> str:
    """A duration for people: ``850 ms``, ``12.3 s``, ``4 min 05 s``."""
    if ms < 1000:
        return f"{ms:.0f} ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    minutes, seconds = divmod(round(ms / 1000), 60)
    return f"{minutes} min {seconds:02d} s"


def format_usd(usd: float) -> str:
    """Dollars with the digits a small amount needs: ``$0.000147``, ``$0.0213``, ``$12.40``."""
    if usd >= 1:
        return f"${usd:,.2f}"
    return f"${usd:.4f}" if usd >= 0.01 or usd == 0 else f"${usd:.6f}"


def plural(count: int, noun: str, many: str | None = None) -> str:
    """``1 turn``, ``2 turns`` (``many`` for nouns that do not just take an s)."""
    return f"{count:,} {noun}" if count == 1 else f"{count:,} {many or noun + 's'}"


_plural = plural


def _int(value: Any, name: str) -> int:
    found = value.get(name) if isinstance(value, dict) else None
    return found if type(found) is int else 0


def stats_view(result: dict[str, Any], *, price_hint: str | None) -> RenderableType:
    """``sessions stats``: lifecycle, work and time counts, then tokens (and cost) per model."""
    lifecycle, work, usage, cost = result["lifecycle"], result["stats"], result["usage"], result["cost"]
    rows: list[tuple[str, Text | str]] = []
    if result.get("title"):
        rows.append(
            ("title", Text(clean(str(result["title"])), style="italic" if result["titleSource"] == "prompt" else ""))
        )
    state = str(lifecycle.get("state"))
    since = lifecycle.get("sinceTime")
    line = Text(state, style=LIFECYCLE_STYLES.get(state, ""))
    if isinstance(since, int):
        line.append(f"  since {format_time(since, precise=True)} (seq {lifecycle.get('sinceSeq')})", style="dim")
    if isinstance(lifecycle.get("reason"), str):
        line.append(f"  {clean(lifecycle['reason'])}")
    rows.append(("state", line))
    failed = _int(work, "failedModelCalls")
    errors = _int(work, "toolErrors")
    rows.append(
        (
            "work",
            f"{_plural(_int(work, 'turns'), 'turn')} · {_plural(_int(work, 'steps'), 'step')} · "
            f"{_plural(_int(work, 'modelCalls') + failed, 'model call')}"
            + (f" ({failed} failed)" if failed else "")
            + f" · {_plural(_int(work, 'toolCalls'), 'tool call')}"
            + (f" ({_plural(errors, 'error')})" if errors else ""),
        )
    )
    ttft_count = _int(work, "ttftCount")
    timing = f"model {format_ms(_int(work, 'modelMs'))} · tools {format_ms(_int(work, 'toolMs'))}"
    if ttft_count:
        timing += f" · first token {format_ms(_int(work, 'ttftMs') / ttft_count)} (mean of {ttft_count})"
    rows.append(("time", timing))
    rows.append(("as of", f"seq {result['asOfSeq']}"))
    parts: list[RenderableType] = [Text.assemble(("session ", "bold"), (str(result["id"]), "bold cyan"))]
    parts.extend(Text.assemble((f"{label:<9}", "dim"), value) for label, value in rows)

    table = Table(box=None, header_style="bold", pad_edge=False, expand=False, title_justify="left")
    table.add_column("model", no_wrap=True)
    for name in ("calls", "input", "cache read", "cache write", "output", "reasoning"):
        table.add_column(name, justify="right", no_wrap=True)
    if cost is not None:
        table.add_column("cost", justify="right", no_wrap=True)
    prices = {(c.get("provider"), c.get("model")): c.get("usd") for c in cost["byModel"]} if cost else {}

    def counts(tokens: Any) -> list[str]:
        return [
            f"{_int(tokens, name):,}"
            for name in ("inputTokens", "cacheReadTokens", "cacheWriteTokens", "outputTokens", "reasoningTokens")
        ]

    for entry in usage.get("byModel") or ():
        provider, model = entry.get("provider"), entry.get("model")
        name = "/".join(str(part) for part in (provider, model) if part is not None) or "(unknown)"
        calls = f"{_int(entry, 'messages')}" + (
            f" +{_int(entry, 'failedAttempts')} failed" if _int(entry, "failedAttempts") else ""
        )
        row: list[Text | str] = [Text(clean(name)), calls, *counts(entry.get("tokens"))]
        if cost is not None:
            usd = prices.get((provider, model))
            row.append(format_usd(usd) if isinstance(usd, float) else Text("no price", style="yellow"))
        table.add_row(*row)
    total_calls = f"{_int(usage, 'messages')}" + (
        f" +{_int(usage, 'failedAttempts')} failed" if _int(usage, "failedAttempts") else ""
    )
    total: list[Text | str] = [Text("total", style="bold"), total_calls, *counts(usage.get("total"))]
    if cost is not None:
        total.append(format_usd(cost["total"]) + ("" if cost["complete"] else " +?"))
    table.add_row(*total)
    parts.extend([Text(), Indent(table, 0)])
    if cost is not None:
        note = f"cost estimated from {', '.join(cost['sources'])} (USD per 1M tokens; failed attempts billed)"
        if not cost["complete"]:
            note += f"; no price for {', '.join(cost['unpriced'])}"
        parts.append(Text(note, style="dim"))
    elif price_hint is not None:
        parts.append(Text(f"cost: {price_hint}", style="dim"))
    return Group(*parts)


# -- show -----------------------------------------------------------------------------------


def context_text(context: Mapping[str, Any]) -> str:
    """``ContextUsage.to_dict()`` for people: "62% used (81,234 of 131,072 tokens)"."""
    used, window = context["used"], context.get("window")
    if not window:
        return f"{used:,} tokens (context window unknown)"
    return f"{min(100, round(used / window * 100))}% used ({used:,} of {window:,} tokens)"


def session_card(
    info: SessionInfo,
    stats: dict[str, Any],
    title: str | None,
    context: Mapping[str, Any] | None = None,
    *,
    title_source: str | None = None,
) -> RenderableType:
    """Header fields and counts of one session (a title from the first prompt in italics, as in ``list``)."""
    header = info.header
    rows: list[tuple[str, Text | str]] = []
    if title:
        rows.append(("title", Text(clean(title), style="italic" if title_source == "prompt" else "")))
    rows.append(("created", format_time(info.created_at, precise=True)))
    rows.append(("updated", format_time(info.updated_at, precise=True)))
    if header.cwd:
        rows.append(("cwd", Text(clean(header.cwd))))
    if header.parent_session:
        inherits = f"  (inherits {stats['inherited']} events)"
        rows.append(("parent", Text.assemble(shown_id(header.parent_session), (inherits, "dim"))))
    if header.origin:
        rows.append(("origin", f"{header.origin} (delegation depth {header.delegation_depth})"))
    if header.agent_preset:
        rows.append(("preset", Text(clean(header.agent_preset))))
    stored = f"  (stored as v{info.stored_version}, read through dsh's upgrade)" if info.stored_version < 4 else ""
    rows.append(("format", Text.assemble(f"v{header.version}", (stored, "dim"))))
    rows.append(
        (
            "stats",
            f"{_plural(stats['events'], 'event')} · {_plural(stats['turns'], 'turn')} · "
            f"{_plural(stats['messages'], 'message')} · {stats['inherited']:,} inherited · "
            f"{_plural(len(stats['forks']), 'fork')}",
        )
    )
    if stats["forks"]:
        rows.append(("forks", ", ".join(stats["forks"])))
    if context is not None:
        rows.append(("context", context_text(context)))
    parts: list[RenderableType] = [Text.assemble(("session ", "bold"), (shown_id(info.id), "bold cyan"))]
    parts.extend(Text.assemble((f"{label:<9}", "dim"), value) for label, value in rows)
    if stats["pendingRepair"]:
        parts.append(
            Text(
                "The last turn was interrupted (the process running it stopped). It is shown below closed, as "
                f"`dshpy sessions repair {info.id}` would close it, with "
                f"{_plural(stats['pendingRepair'], 'closing event')} not stored yet.",
                style="yellow",
            )
        )
    return Indent(Group(*parts), 0)


class Indent:
    """Render ``renderable`` indented by ``width`` spaces, wrapped lines included, without right padding."""

    def __init__(self, renderable: RenderableType, width: int = 2) -> None:
        self.renderable = renderable
        self.width = width

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        inner = options.update(width=max(1, options.max_width - self.width))
        margin = Segment(" " * self.width)
        for line in console.render_lines(self.renderable, inner, pad=False):
            yield margin
            yield from _rstrip(line)
            yield Segment.line()


def _rstrip(line: list[Segment]) -> list[Segment]:
    """A rendered line without trailing spaces (wrapping leaves them at the cut)."""
    line = list(line)
    while line and not line[-1].control and line[-1].text.endswith(" "):
        last = line.pop()
        text = last.text.rstrip(" ")
        if text:
            line.append(Segment(text, last.style, last.control))
            break
    return line


def _clip(text: str, full: bool) -> tuple[str, str | None]:
    """``text`` cut to a few lines unless ``full``, with a note on what was left out."""
    if full:
        return text, None
    lines = text.splitlines()
    if len(lines) <= _CLIP_LINES and len(text) <= _CLIP_CHARS:
        return text, None
    kept = "\n".join(lines[:_CLIP_LINES])[:_CLIP_CHARS]
    hidden_lines = len(lines) - kept.count("\n") - 1
    note = f"… {hidden_lines} more lines" if hidden_lines > 0 else f"… {len(text) - len(kept)} more characters"
    return kept, note + " (--full shows everything)"


def _block_lines(block: Any, full: bool) -> Iterator[RenderableType]:
    kind = block.get("type") if isinstance(block, dict) else None
    if kind == "text":
        body, note = _clip(str(block.get("text", "")), full)
        yield Text(clean(body))
        if note:
            yield Text(note, style="dim")
    elif kind == "reasoning":
        body, note = _clip(str(block.get("text", "")), full)
        yield Text(clean(body), style="dim italic")
        if note:
            yield Text(note, style="dim")
    elif kind == "tool-call":
        arguments, _ = _clip(str(block.get("arguments", "")), full)
        yield Text.assemble(
            ("→ ", "yellow"),
            (clean(str(block.get("name", "?"))), "bold yellow"),
            "(",
            clean(arguments),
            ")",
            (f"  [{clean(str(block.get('id', '')))}]", "dim"),
        )
    elif kind in ("tool-addition", "tool-removal"):
        sign = "+" if kind == "tool-addition" else "-"
        yield Text(f"{sign} tool {clean(str(block.get('toolName', '?')))}", style="magenta")
    else:
        yield Text(f"[{clean(str(kind))} block]", style="dim")


def _message_heading(message: Message, event: SessionEvent | None, tool_names: dict[str, str]) -> Text:
    data: Any = message.data
    role = message.role
    heading = Text(role, style=ROLE_STYLES.get(role, "bold"))
    if role == "tool":
        call_id = str(data.get("toolCallId", ""))
        name = tool_names.get(call_id)
        if name:
            heading.append(f" {clean(name)}", style="yellow")
        heading.append(f" [{clean(call_id)}]", style="dim")
        if data.get("isError"):
            error: Any = event.data.get("error") if event is not None and isinstance(event.data, dict) else None
            code = error.get("code") if isinstance(error, dict) else None
            heading.append("  ✗ error" + (f" {clean(str(code))}" if code else ""), style="bold red")
    if event is not None and event.type == "assistant/message" and event.data.get("interrupted") is True:
        heading.append("  (cut off: its turn was stopped while it streamed)", style="yellow")
    source = data.get("source")
    kind = source.get("kind") if isinstance(source, dict) else None
    if kind and kind not in ("user", "model", "tool"):
        heading.append(f"  ({clean(str(kind))})", style="dim")
    heading.append(f"  #{message.seq}", style="dim")
    return heading


@dataclass(frozen=True, slots=True)
class TurnOutcome:
    """How one turn ended: its ``turn/end`` reason, and whether that event is stored or only repair's view."""

    turn: int
    kind: str
    """``completed``, ``error``, ``aborted``, ``interrupted``, ``max-tokens``, ``blocked``, ``forked`` or ``open``."""
    message: str | None = None
    """The error's message (``error``) or the abort's cause (``aborted``)."""
    stored: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {"turn": self.turn, "outcome": self.kind, "message": self.message, "stored": self.stored}

    def text(self) -> Text:
        """The line ``show`` prints under the turn."""
        words = {
            "completed": ("✓ completed", "dim green"),
            "error": ("✗ error", "bold red"),
            "aborted": ("⊘ aborted", "yellow"),
            "interrupted": ("⚠ interrupted", "yellow"),
            "max-tokens": ("✂ cut at the token limit (max-tokens)", "yellow"),
            "blocked": ("⊘ blocked", "yellow"),
            "forked": ("⑂ closed by a fork", "dim"),
            "open": ("… still running (or its process died; `repair` closes it)", "yellow"),
        }
        label, style = words.get(self.kind, (self.kind, "dim"))
        line = Text(f"turn {self.turn}: ", style="dim")
        line.append(label, style=style)
        if self.message:
            line.append(f": {clean(self.message)}", style=style)
        if not self.stored:
            line.append(" (not stored: `repair` appends it)", style="dim")
        return line


def turn_outcomes(session: Session) -> list[TurnOutcome]:
    """Each turn's ending, read from its ``turn/end`` (a turn still open reads ``open``)."""
    stored = len(session) - session.pending_count
    outcomes: dict[int, TurnOutcome] = {}
    for event in session.events:
        data: Any = event.data
        if event.type == "turn/start":
            outcomes[int(data["turn"])] = TurnOutcome(int(data["turn"]), "open")
        elif event.type == "turn/end":
            reason = data.get("reason") if isinstance(data, dict) else None
            kind = str(reason.get("kind")) if isinstance(reason, dict) else "?"
            message: str | None = None
            if isinstance(reason, dict) and isinstance(reason.get("error"), dict):
                found = reason["error"].get("message")
                message = found if isinstance(found, str) else None
            elif isinstance(reason, dict) and isinstance(reason.get("reason"), dict):
                cause = reason["reason"].get("kind")
                message = f"by {cause}" if isinstance(cause, str) else None
            number = int(data["turn"])
            outcomes[number] = TurnOutcome(number, kind, message, stored=event.seq < stored)
    return [outcomes[number] for number in sorted(outcomes)]


def transcript(console: Console, session: Session, *, full: bool = False) -> None:
    """Print the derived messages, one block per message, with a rule at each new turn and each turn's outcome."""
    events = session.events
    turn_of: dict[int, int] = {}
    tool_names: dict[str, str] = {}
    turn = 0
    for event in events:
        if event.type == "turn/start":
            turn = int(event.data["turn"])
        if event.surface_op is not None:
            turn_of[event.seq] = turn
    messages = session.derive_messages()
    outcomes = {outcome.turn: outcome for outcome in turn_outcomes(session)}
    if not messages:
        console.print(Text("(no messages)", style="dim"))
    shown_turn: int | None = None

    def close(turn: int | None) -> None:
        outcome = outcomes.pop(turn, None) if turn else None
        if outcome is not None:
            console.print(Indent(outcome.text(), 0), "")

    for message in messages:
        turn = turn_of.get(message.seq, 0)
        if turn != shown_turn:
            close(shown_turn)
            console.print(Rule(f"turn {turn}" if turn else "before the first turn", style="dim"))
            shown_turn = turn
        for block in message.content:
            if isinstance(block, dict) and block.get("type") == "tool-call":
                tool_names[str(block.get("id"))] = str(block.get("name"))
        source_event = events[message.seq] if message.seq < len(events) else None
        body: list[RenderableType] = []
        for block in message.content:
            body.extend(_block_lines(block, full))
        if message.role in ("system", "developer") and not full:
            body = body[:2]
        console.print(Group(_message_heading(message, source_event, tool_names), Indent(Group(*body)), ""))
    close(shown_turn)
    for outcome in outcomes.values():  # turns none of whose messages is visible (compacted away)
        console.print(Indent(outcome.text(), 0))


# -- log ------------------------------------------------------------------------------------


def event_summary(event: SessionEvent, width: int = 100) -> str:
    """A short, one-line description of an event's data."""
    data: Any = event.data
    kind = event.type
    if not isinstance(data, dict):
        return preview(dumps(data).decode(), width)
    if kind in ("turn/start", "step/start", "step/end"):
        return " ".join(f"{key} {data[key]}" for key in ("turn", "step") if key in data)
    if kind == "turn/end":
        reason = data.get("reason")
        return f"turn {data.get('turn')} {reason.get('kind') if isinstance(reason, dict) else reason}"
    if kind == "user/message":
        source = data.get("source")
        kind_of = source.get("kind") if isinstance(source, dict) else "?"
        return preview(f"[{kind_of}] {message_text(data)}", width)
    if kind in ("assistant/message", "system/message", "developer/message", "tool/result"):
        message = data.get("message")
        text = message_text(message)
        calls = [
            f"→{block.get('name')}"
            for block in (message.get("content") or [] if isinstance(message, dict) else [])
            if isinstance(block, dict) and block.get("type") == "tool-call"
        ]
        flag = "✗ " if isinstance(message, dict) and message.get("isError") else ""
        return preview(flag + " ".join([text, *calls]).strip(), width)
    if kind == "tool/call":
        return preview(f"{data.get('name')}({data.get('arguments')}) [{data.get('callId')}]", width)
    if kind == "session/title":
        return preview(str(data.get("title")), width)
    return preview(dumps(data).decode(), width)


def event_line(event: SessionEvent) -> Text:
    """One event as ``seq  time  type  [surface]  summary``."""
    line = Text()
    line.append(f"{event.seq:>6}  ", style="dim")
    line.append(format_time(event.time, precise=True) + "  ", style="dim")
    style = "bold" if event.surface_op is not None else ""
    if event.type.startswith(("turn/", "step/")):
        style = "blue"
    line.append(f"{event.type:<20}", style=style)
    if event.surface_op is not None and event.surface_op != "append":
        line.append(" [replace]", style="magenta")
    if event.ignorable:
        line.append(" [ignorable]", style="dim")
    line.append("  " + clean(event_summary(event)))
    return line


# -- progress -------------------------------------------------------------------------------


def show_progress(console: Console, size: int, threshold: int) -> bool:
    """Progress bars are for people: only on a terminal, and only for large work."""
    return console.is_terminal and not console.is_dumb_terminal and size >= threshold


class Activity:
    """Steps of a long command, shown as progress bars on stderr when enabled, else silent."""

    def __init__(self, bar: Progress | None) -> None:
        self._bar = bar

    @contextmanager
    def step(self, description: str, total: int | None = None) -> Iterator[Callable[[int], None]]:
        """One step; yields ``advance(n)``. ``total=None`` shows an indeterminate (pulsing) bar."""
        bar = self._bar
        if bar is None:
            yield _ignore
            return
        task = bar.add_task(description, total=total)
        yield lambda amount: bar.advance(task, amount)
        bar.update(task, total=total or 1, completed=total or 1)


def _ignore(_amount: int) -> None:
    pass


@contextmanager
def activity(console: Console, *, enabled: bool) -> Iterator[Activity]:
    """An :class:`Activity` drawing on ``console`` (stderr) while the block runs, erased afterwards."""
    if not enabled:
        yield Activity(None)
        return
    columns: list[ProgressColumn] = [
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        TaskProgressColumn(),
        TimeElapsedColumn(),
    ]
    with Progress(*columns, console=console, transient=True) as bar:
        yield Activity(bar)
