"""Hypothesis strategies that generate valid dsh v4 session logs as replayable scripts.

A script is a list of :class:`AppendOp` s; :func:`replay` appends them, in order, to an
empty session through the ordinary :meth:`~dshpy.Session.append` path. The strategy
simulates the log while it draws (turn and step numbering, advertised, started and
answered tool calls, compaction brackets, the surface with its protected system head),
so every operation is accepted when replayed and the seqs an operation cites are
exactly those the replay assigns (operation ``i`` becomes seq ``i``).

Drawn scripts mix what agents write: turns with steps; user messages inside and
between turns; a system prompt at surface node 0, later replaced only by a system
message over exactly that node, plus in-history system updates (which a later system
message may empty); developer notes; assistant messages with reasoning, text and
tool-call blocks, or no content at all; failed attempts; ``tool/call`` +
``tool/result`` pairs; ``request/context``, ``todo/write`` and ``plugin:dshpy/note``
records; ``user/message`` replacements of any contiguous span of the *current*
surface (by position, never over the protected head), nested freely; content
rewrites of a current ``tool/result`` inside a turn; compaction brackets (start,
summary, checkpoint, failed or successful end), prunes, and ``session/end-seed``
resume markers that leave an open bracket stale. Example::

    @given(session_scripts())
    def test_replays(ops):
        session = Session.new()
        replay(ops, session)
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from hypothesis import strategies as st

from dshpy.core.events import SessionEvent, event_from_parts
from dshpy.core.json import MAX_SAFE_INTEGER
from dshpy.log.session import Session
from dshpy.testing.builders import (
    assistant_data,
    attempt_data,
    system_data,
    tool_result_data,
    user_message,
)

__all__ = ["NOTE_TYPE", "SURROGATES", "AppendOp", "json_values", "replay", "session_scripts", "texts"]

NOTE_TYPE = "plugin:dshpy/note"
"""The plugin record type scripts use for dshpy-only records."""

_TOOLS = (("read_file", '{"path":"a.txt"}'), ("bash", '{"cmd":"ls -la"}'), ("grep", '{"pattern":"x","path":"."}'))


@dataclass(frozen=True, slots=True)
class AppendOp:
    """One ``session.append(type, data, surface_op=..., source_event_seqs=...)`` call."""

    type: str
    data: Any
    surface_op: Literal["append"] | dict[str, Any] | None = None
    source_event_seqs: tuple[int, ...] | None = None

    def apply(self, session: Session) -> SessionEvent:
        """Append this operation to ``session`` and return the committed event."""
        sources = None if self.source_event_seqs is None else list(self.source_event_seqs)
        return session.append(self.type, self.data, surface_op=self.surface_op, source_event_seqs=sources)

    def to_event(self, seq: int, time: int) -> SessionEvent:
        """The event :meth:`apply` would commit at ``seq`` and ``time``, prebuilt (for ``append_events``)."""
        ignorable = self.type.startswith("plugin:")  # plugin records are always ignorable
        return event_from_parts(self.type, seq, time, self.data, self.surface_op, self.source_event_seqs, ignorable)


def replay(ops: Sequence[AppendOp], session: Session) -> list[SessionEvent]:
    """Append ``ops`` to ``session``, which must be empty (the ops cite absolute seqs)."""
    if session.next_seq != 0:
        raise ValueError(f"replay needs an empty session; this one already has {session.next_seq} events")
    return [op.apply(session) for op in ops]


def _lossless_float(value: float) -> float:
    return 0.0 if value == 0.0 else value  # -0.0 is not lossless JSON


SURROGATES = ("\ud800", "\udbff", "\udc00", "\udcff", "\udfff", "\ud83d", "\ude00")
"""Surrogate code points: high and low, range ends, and the two halves of 😀 (which may meet as a pair)."""


def texts(*, max_size: int = 10, surrogates: bool = False) -> st.SearchStrategy[str]:
    """Strings; with ``surrogates``, ones that often hold lone UTF-16 surrogates and split pairs too.

    Hypothesis never draws surrogates by default, yet real data holds them
    (``os.listdir()`` of a non-UTF-8 name, an emoji cut between stream chunks).
    """
    if not surrogates:
        return st.text(max_size=max_size)
    # st.text() drops surrogates from any alphabet, so the characters are drawn and joined here
    return st.lists(st.one_of(st.characters(), st.sampled_from(SURROGATES)), max_size=max_size).map("".join)


def json_values(*, max_leaves: int = 8, surrogates: bool = False) -> st.SearchStrategy[Any]:
    """Plain JSON values ``freeze_json`` accepts: safe integers, finite floats (no ``-0.0``), str keys.

    ``surrogates`` lets strings and keys hold surrogate code points (see :func:`texts`).
    """
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER),
        st.floats(allow_nan=False, allow_infinity=False).map(_lossless_float),
        texts(max_size=10, surrogates=surrogates),
    )
    keys = texts(max_size=6, surrogates=surrogates)
    return st.recursive(
        scalars,
        lambda children: st.lists(children, max_size=3) | st.dictionaries(keys, children, max_size=3),
        max_leaves=max_leaves,
    )


_texts = st.text(max_size=12)
_note_values = json_values()
_todos = st.lists(
    st.fixed_dictionaries({"content": _texts, "status": st.sampled_from(["pending", "in_progress", "completed"])}),
    max_size=3,
)
_user_kinds = st.sampled_from(["user", "runtime-context", "agent-message"])
_end_kinds = st.sampled_from(["completed", "aborted", "blocked", "max-tokens", "error", "interrupted"])
_tool_lists = st.lists(st.sampled_from(_TOOLS), max_size=3)
_reasoning = st.sampled_from(["", "thinking"])


@dataclass(slots=True)
class _Call:
    name: str
    arguments: str
    call_seq: int | None = None


@dataclass(slots=True)
class _Compaction:
    compaction_id: str
    turn: int | None
    start_seq: int
    summary_seq: int | None = None
    shadowed: list[int] = field(default_factory=list)


@dataclass(slots=True)
class _Simulation:
    """The state of the log drawn so far: exactly what admission will check."""

    draw: st.DrawFn
    ops: list[AppendOp] = field(default_factory=list)
    nodes: list[int] = field(default_factory=list)
    head: int | None = None
    open_turn: int | None = None
    last_turn: int = 0
    open_step: int | None = None
    last_step: int = 0
    calls: dict[str, _Call] = field(default_factory=dict)
    tool_results: dict[int, Any] = field(default_factory=dict)
    """Data of every tool/result, by seq (the original a content rewrite copies)."""
    compaction: _Compaction | None = None
    ids: int = 0

    @property
    def seq(self) -> int:
        return len(self.ops)

    def new_id(self, prefix: str) -> str:
        self.ids += 1
        return f"{prefix}-{self.ids}"

    # -- bookkeeping ----------------------------------------------------------------

    def emit(self, op: AppendOp) -> None:
        seq = self.seq
        if isinstance(op.surface_op, dict):
            start = self.nodes.index(op.surface_op["startSeq"])
            end = self.nodes.index(op.surface_op["endSeq"])
            if op.type == "system/message" and self.nodes[start] == self.head:
                self.head = seq
            self.nodes[start : end + 1] = [seq]
        elif op.surface_op == "append":
            if op.type == "system/message" and not self.nodes:
                self.head = seq
            self.nodes.append(seq)
        if op.type == "tool/result":
            self.tool_results[seq] = op.data
        self.ops.append(op)

    @property
    def here(self) -> tuple[int, int]:
        """The open turn and step (in-step actions are only offered while both are open)."""
        assert self.open_turn is not None and self.open_step is not None
        return self.open_turn, self.open_step

    def in_step(self, **fields: Any) -> dict[str, Any]:
        turn, step = self.here
        return {"turn": turn, "step": step, **fields}

    def replace_op(self, start: int, end: int) -> dict[str, Any]:
        return {"op": "replace", "startSeq": self.nodes[start], "endSeq": self.nodes[end]}

    def sources(self, required: Sequence[int]) -> tuple[int, ...]:
        """``required`` plus a few other earlier seqs, sorted or in any order."""
        extra = self.draw(st.lists(st.integers(0, self.seq - 1), max_size=3, unique=True))
        seqs = sorted({*required, *extra})
        if self.draw(st.booleans()):
            seqs = self.draw(st.permutations(seqs))
        return tuple(seqs)

    # -- the actions ----------------------------------------------------------------

    def actions(self) -> list[Callable[[], None]]:
        """The operations valid after the current log, weighted toward agent-like turns.

        Repeats weight an action; the simplest come first, where Hypothesis shrinks to.
        """
        weighted: list[tuple[int, Callable[[], None]]] = [(2, self.user_append), (1, self.todo_write), (1, self.note)]
        bracket = self.compaction
        if self.open_turn is None:
            weighted.append((1, self.end_seed))
            if bracket is None:
                weighted.append((4, self.turn_start))
        elif self.open_step is None:
            weighted.append((4, self.step_start))
            if bracket is None:
                weighted.append((2, self.turn_end))
        else:
            weighted += [(4, self.assistant), (1, self.attempt), (1, self.developer)]
            if not self.calls:
                weighted.append((2, self.step_end))
            if any(c.call_seq is None for c in self.calls.values()):
                weighted.append((5, self.tool_call))
            if any(c.call_seq is not None for c in self.calls.values()):
                weighted.append((5, self.tool_result))
            if not self.nodes:
                weighted.append((3, self.system_append))
            elif self.head is not None:
                weighted += [(1, self.system_append), (1, self.system_replace)]
        if self.open_turn is not None:
            weighted.append((1, self.request_context))
            if any(self.ops[seq].type == "tool/result" for seq in self.nodes):
                weighted.append((2, self.tool_result_rewrite))
        spans = len(self.nodes) > (0 if self.head is None else 1)
        if spans:
            weighted += [(2, self.user_replace), (1, self.prune)]
        if bracket is None:
            weighted.append((1, self.compaction_start))
        else:
            weighted.append((2, self.compaction_end))
            if bracket.summary_seq is None and spans:
                weighted.append((3, self.compaction_summary))
            if bracket.summary_seq is not None and self.is_current_span(bracket.shadowed):
                weighted.append((4, self.checkpoint))
        return [action for weight, action in weighted for _ in range(weight)]

    def span(self) -> tuple[int, int]:
        """Positions ``start <= end`` of a current surface span that leaves a protected head alone."""
        start = self.draw(st.integers(0 if self.head is None else 1, len(self.nodes) - 1))
        return start, self.draw(st.integers(start, len(self.nodes) - 1))

    def is_current_span(self, seqs: list[int]) -> bool:
        if not seqs or seqs[0] not in self.nodes:
            return False
        start = self.nodes.index(seqs[0])
        return self.nodes[start : start + len(seqs)] == seqs

    def user_append(self) -> None:
        kind = self.draw(_user_kinds)
        data = user_message(self.draw(_texts), message_id=self.new_id("user"), kind=kind)
        self.emit(AppendOp("user/message", data, "append"))

    def user_replace(self) -> None:
        start, end = self.span()
        sources = self.sources(self.nodes[start : end + 1])
        data = user_message(self.draw(_texts), message_id=self.new_id("summary"), kind="runtime-context")
        self.emit(AppendOp("user/message", data, self.replace_op(start, end), sources))

    def todo_write(self) -> None:
        self.emit(AppendOp("todo/write", {"todos": self.draw(_todos)}))

    def note(self) -> None:
        self.emit(AppendOp(NOTE_TYPE, {"value": self.draw(_note_values)}))

    def turn_start(self) -> None:
        self.open_turn = self.last_turn = self.last_turn + 1
        self.open_step, self.last_step, self.calls = None, 0, {}
        self.emit(AppendOp("turn/start", {"turn": self.open_turn}))

    def turn_end(self) -> None:
        kind = self.draw(_end_kinds)
        reason: dict[str, Any] = {"kind": kind}
        if kind == "error":
            reason["error"] = {"message": "upstream failed", "code": "HTTP_500", "status": 500}
        elif kind == "aborted":
            reason["reason"] = {"kind": "user"}
        turn, self.open_turn = self.open_turn, None
        self.emit(AppendOp("turn/end", {"turn": turn, "reason": reason}))

    def step_start(self) -> None:
        self.open_step = self.last_step = self.last_step + 1
        self.emit(AppendOp("step/start", self.in_step()))

    def step_end(self) -> None:
        data = self.in_step()
        self.open_step = None
        self.emit(AppendOp("step/end", data))

    def request_context(self) -> None:
        data = {"provider": "deepseek", "model": "deepseek-chat", "contextWindow": 128000}
        self.emit(AppendOp("request/context", data))

    def system_append(self) -> None:
        self.emit(AppendOp("system/message", self.system_data(), "append"))

    def system_data(self) -> dict[str, Any]:
        data = system_data(*self.here, self.draw(_texts))  # empty text: no content, no derived message
        data["message"]["id"] = self.new_id("system")
        return data

    def system_replace(self) -> None:
        """Replace the head (a changed prompt) or empty a later in-history system node, one node each."""
        targets = [i for i, seq in enumerate(self.nodes) if self.ops[seq].type == "system/message"]
        index = self.draw(st.sampled_from(targets))
        op = self.replace_op(index, index)
        self.emit(AppendOp("system/message", self.system_data(), op, self.sources([self.nodes[index]])))

    def developer(self) -> None:
        text = self.draw(_texts)
        message = {
            "id": self.new_id("developer"),
            "role": "developer",
            "content": [{"type": "text", "text": text}] if text else [],
            "source": {"kind": "runtime-context"},
        }
        self.emit(AppendOp("developer/message", self.in_step(message=message), "append"))

    def assistant(self) -> None:
        tools = self.draw(_tool_lists)
        calls = [(self.new_id("call"), name, args) for name, args in tools]
        data = assistant_data(*self.here, self.draw(_texts), tool_calls=calls, reasoning=self.draw(_reasoning))
        data["message"]["id"] = self.new_id("assistant")
        for call_id, name, args in calls:
            self.calls[call_id] = _Call(name, args)
        self.emit(AppendOp("assistant/message", data, "append"))

    def attempt(self) -> None:
        self.emit(AppendOp("assistant/attempt", attempt_data(*self.here)))

    def tool_call(self) -> None:
        call_id = self.draw(st.sampled_from([cid for cid, c in self.calls.items() if c.call_seq is None]))
        call = self.calls[call_id]
        call.call_seq = self.seq
        data = self.in_step(callId=call_id, name=call.name, arguments=call.arguments)
        self.emit(AppendOp("tool/call", data))

    def tool_result(self) -> None:
        call_id = self.draw(st.sampled_from([cid for cid, c in self.calls.items() if c.call_seq is not None]))
        call_seq = self.calls.pop(call_id).call_seq
        assert call_seq is not None
        is_error = self.draw(st.booleans())
        text = self.draw(_texts)
        data = tool_result_data(*self.here, call_id, text, is_error=is_error)
        data["message"]["id"] = self.new_id("tool")
        if not text:
            data["message"]["content"] = []  # a tool result derives even with no content
        if is_error:
            data["error"] = {"name": "ToolError", "code": "TOOL_FAILED"}
        self.emit(AppendOp("tool/result", data, "append", (call_seq,)))

    def tool_result_rewrite(self) -> None:
        targets = [i for i, seq in enumerate(self.nodes) if self.ops[seq].type == "tool/result"]
        index = self.draw(st.sampled_from(targets))
        data = copy.deepcopy(self.tool_results[self.nodes[index]])
        data["message"]["content"] = [{"type": "text", "text": f"[pruned] {self.draw(_texts)}"}]
        self.emit(AppendOp("tool/result", data, self.replace_op(index, index), self.sources([self.nodes[index]])))

    def end_seed(self) -> None:
        """A resume marker: it also leaves an open compaction bracket stale."""
        self.compaction = None
        self.emit(AppendOp("session/end-seed", {}))

    def shadowing(self, start: int, end: int) -> dict[str, Any]:
        seqs = self.nodes[start : end + 1]
        return {"shadowedRange": {"start": seqs[0], "end": seqs[-1]}, "shadowedSeqs": seqs}

    def prune(self) -> None:
        start, end = self.span()
        self.emit(AppendOp("compaction/prune", {**self.shadowing(start, end), "shadowedTokenCount": 10}))

    def compaction_start(self) -> None:
        bracket = _Compaction(self.new_id("compaction"), self.open_turn, self.seq)
        self.compaction = bracket
        self.emit(AppendOp("compaction/start", {"compactionId": bracket.compaction_id, "turn": bracket.turn}))

    def compaction_summary(self) -> None:
        assert self.compaction is not None
        start, end = self.span()
        self.compaction.summary_seq = self.seq
        self.compaction.shadowed = self.nodes[start : end + 1]
        data = {
            "compactionId": self.compaction.compaction_id,
            "summary": [{"type": "text", "text": f"<compacted-summary>{self.draw(_texts)}</compacted-summary>"}],
            **self.shadowing(start, end),
            "shadowedTokenCount": 100,
            "provider": "deepseek",
            "model": "deepseek-chat",
        }
        self.emit(AppendOp("compaction/summary", data))

    def checkpoint(self) -> None:
        bracket = self.compaction
        assert bracket is not None and bracket.summary_seq is not None
        start = self.nodes.index(bracket.shadowed[0])
        end = start + len(bracket.shadowed) - 1
        data = user_message(self.draw(_texts), message_id=self.new_id("checkpoint"), kind="compact-checkpoint")
        data["source"]["compactionId"] = bracket.compaction_id
        sources = (bracket.start_seq, bracket.summary_seq, *bracket.shadowed)  # dsh's order, not increasing
        self.emit(AppendOp("user/message", data, self.replace_op(start, end), sources))

    def compaction_end(self) -> None:
        bracket = self.compaction
        assert bracket is not None
        data: dict[str, Any] = {"compactionId": bracket.compaction_id, "turn": bracket.turn}
        if bracket.summary_seq is None or self.draw(st.booleans()):
            data["error"] = "summarizer failed"
        self.compaction = None
        self.emit(AppendOp("compaction/end", data))

    def close(self) -> None:
        """Finish the open compaction and turn the way a healthy agent would."""
        if self.compaction is not None:
            self.compaction_end()
        while self.open_turn is not None:
            if any(c.call_seq is None for c in self.calls.values()):
                self.tool_call()
            elif self.calls:
                self.tool_result()
            elif self.open_step is not None:
                self.step_end()
            else:
                self.turn_end()


@st.composite
def _scripts(draw: st.DrawFn, min_ops: int, max_ops: int, closed: bool) -> list[AppendOp]:
    sim = _Simulation(draw)
    target = draw(st.integers(min_ops, max_ops))
    if target >= 3 and draw(st.booleans()):  # a system prompt at surface node 0, as dsh's first turn writes it
        sim.turn_start()
        sim.step_start()
        sim.system_append()
    while sim.seq < target:
        draw(st.sampled_from(sim.actions()))()
    if closed:
        sim.close()
    return sim.ops


def session_scripts(*, min_ops: int = 0, max_ops: int = 60, closed: bool = False) -> st.SearchStrategy[list[AppendOp]]:
    """Valid append scripts of ``min_ops``..``max_ops`` operations.

    With ``closed=True`` the script ends outside any turn (a few closing operations
    may follow ``max_ops``); otherwise it may stop anywhere, as a crash would leave it.
    """
    if not 0 <= min_ops <= max_ops:
        raise ValueError("session_scripts needs 0 <= min_ops <= max_ops")
    return _scripts(min_ops, max_ops, closed)
