"""Lifecycle invariants: the relationships between events that dsh v4 checks on every read.

:class:`Lifecycle` follows a log one event at a time. ``check`` is pure and raises
:class:`~dshpy.errors.InvariantError` naming the seq and the rule; ``apply`` moves
the state on. The live session checks every candidate before it commits and every
stored log is replayed through the same code, so a broken log is refused at its
first bad event, and dshpy never writes a log that dsh would refuse to read.

The rules (dsh's invariant companion plus v4's read-side relationship checks):

* **turns** — ``turn/start`` opens turn n = previous + 1 when none is open;
  ``turn/end`` closes the open turn, never over an open step or an unanswered call.
* **steps** — ``step/start`` opens step k = previous + 1 of the open turn (steps
  restart at 1 each turn); ``step/end`` closes it, never over an unanswered call.
* **enclosure** — ``system/message``, ``developer/message``, ``assistant/message``,
  ``assistant/attempt``, ``tool/call`` and appended ``tool/result`` name the open
  turn and step; ``request/header``, ``request/context`` and replacing
  ``tool/result`` need an open turn. Everything else may occur anywhere.
* **tool pairing** — a ``tool/call`` starts a call advertised by the step's
  assistant message, with the same name and arguments, once; an appended
  ``tool/result`` answers an advertised call once; a call that never started may
  only be answered by the exact ``TOOL_NOT_STARTED`` repair result.
* **retries** — ``llm/retry`` belongs to the current turn and step and the open
  request header's provider, numbers its attempts 1, 2, … per policy chain and keeps
  one ``retryId`` per chain; ``llm/retry-started`` pairs a scheduled attempt once.
* **commands** — ``command/run`` ids are unique; ``command/done`` follows its run.
* **compaction** — brackets do not overlap, belong to the turn that was open at
  ``compaction/start``, are not crossed by ``turn/*`` (except a bracket a crash left
  open before a ``session/end-seed``), summarise exact current surface spans, never
  shadow the protected system head, and succeed only with one summary.
* **titles** — ``session/title`` cites distinct earlier human ``user/message`` events,
  and cites none exactly when the user set the title.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from dshpy.core.events import SessionEvent, SurfaceReplace, is_seq
from dshpy.core.validation import validate_event_data
from dshpy.core.vocabulary import IN_STEP_EVENT_TYPES, IN_TURN_EVENT_TYPES, KNOWN_EVENT_TYPES
from dshpy.errors import InvariantError
from dshpy.log.repair import CLOSER_TEXTS
from dshpy.log.surface import Surface

__all__ = ["Lifecycle", "PendingCall", "orphan_compactions", "validate"]


@dataclass(slots=True)
class PendingCall:
    """A tool call advertised by the open step's assistant message."""

    name: str
    arguments: str
    call_seq: int | None = None


@dataclass(slots=True)
class OpenCompaction:
    compaction_id: str
    command_id: str | None
    turn: int | None
    seq: int
    summarized: bool = False


def orphan_compactions(events: Iterable[SessionEvent], pending: int | None = None) -> set[int]:
    """Seqs of ``compaction/start`` brackets still open when a ``session/end-seed`` arrived.

    A crash can leave a bracket open; the next process marks its start with an
    end-seed, after which turns may cross the stale bracket. ``pending`` is the start
    of a bracket open before ``events`` (when they are the tail of a log).
    """
    orphans: set[int] = set()
    for event in events:
        if event.type == "compaction/start":
            pending = event.seq
        elif event.type == "compaction/end":
            pending = None
        elif event.type == "session/end-seed" and pending is not None:
            orphans.add(pending)
            pending = None
    return orphans


@dataclass(slots=True)
class Lifecycle:
    """Relationship state after some prefix of a log."""

    open_turn: int | None = None
    open_step: int | None = None
    last_turn: int = 0
    last_step: int = 0
    calls: dict[str, PendingCall] = field(default_factory=dict)
    provider: Any = None
    compaction: OpenCompaction | None = None
    orphans: set[int] = field(default_factory=set)
    commands: set[str] = field(default_factory=set)
    retries: list[Any] = field(default_factory=list)
    started_retries: set[tuple[str, int]] = field(default_factory=set)
    dispatches: dict[str, list[Any]] = field(default_factory=dict)
    """PTC dispatches by subCallId: ``[start data, settled]``."""

    @property
    def next_turn(self) -> int:
        """The number the next ``turn/start`` must carry (forks continue their parent's count)."""
        return self.last_turn + 1

    def copy(self) -> Lifecycle:
        clone = Lifecycle(self.open_turn, self.open_step, self.last_turn, self.last_step)
        clone.calls = {key: PendingCall(c.name, c.arguments, c.call_seq) for key, c in self.calls.items()}
        clone.provider = self.provider
        if self.compaction is not None:
            c = self.compaction
            clone.compaction = OpenCompaction(c.compaction_id, c.command_id, c.turn, c.seq, c.summarized)
        clone.orphans = set(self.orphans)
        clone.commands = set(self.commands)
        clone.retries = list(self.retries)
        clone.started_retries = set(self.started_retries)
        clone.dispatches = {key: list(value) for key, value in self.dispatches.items()}
        return clone

    def unanswered(self) -> list[str]:
        """Call ids the open step advertised and has not answered, in advertised order."""
        return list(self.calls)

    # -- checking -----------------------------------------------------------------

    def check(self, event: SessionEvent, log: Sequence[SessionEvent], surface: Surface) -> None:
        """Raise :class:`InvariantError` if ``event`` may not follow ``log`` (whose surface is ``surface``)."""
        kind = event.type
        if kind not in KNOWN_EVENT_TYPES:
            return
        data: Any = event.data
        if kind.startswith("turn/") and self.compaction is not None and self.compaction.seq not in self.orphans:
            self._fail(
                event, "compaction-crossed", f"{kind} crosses the open compaction started at seq {self.compaction.seq}"
            )
        if kind == "turn/start":
            if self.open_turn is not None:
                self._fail(event, "turn-nesting", f"turn/start while turn {self.open_turn} is still open")
            if data["turn"] != self.next_turn:
                self._fail(event, "turn-numbering", f"turn/start {data['turn']} but the next turn is {self.next_turn}")
        elif kind == "turn/end":
            if self.open_turn is None or data["turn"] != self.open_turn:
                open_turn = "none" if self.open_turn is None else self.open_turn
                self._fail(event, "turn-nesting", f"turn/end {data['turn']} does not match the open turn ({open_turn})")
            if self.open_step is not None:
                self._fail(event, "step-nesting", f"turn/end while step {self.open_step} is still open")
            self._no_unanswered(event)
        elif kind == "step/start":
            self._need_turn(event, data["turn"])
            if self.open_step is not None:
                self._fail(event, "step-nesting", f"step/start while step {self.open_step} is still open")
            if data["step"] != self.last_step + 1:
                self._fail(
                    event, "step-numbering", f"step/start {data['step']} but the next step is {self.last_step + 1}"
                )
        elif kind == "step/end":
            self._need_step(event, data)
            self._no_unanswered(event)
        elif kind in IN_STEP_EVENT_TYPES:
            self._need_step(event, data)
            if kind == "assistant/message":
                self._check_advertised(event, data)
            elif kind == "tool/call":
                self._check_call(event, data)
            elif kind == "developer/message" and "headerSeq" in data:
                self._check_developer(event, data, log)
        elif kind == "tool/result":
            _check_fork_result(self, event, data)
            if event.surface_op == "append":
                self._need_step(event, data)
                self._check_result(event, data)
            elif self.open_turn is None:
                self._fail(event, "outside-turn", "a replacing tool/result needs an open turn")
        elif kind in ("tool/ptc-dispatch-start", "tool/ptc-dispatch"):
            self._check_dispatch(event, data)
        elif kind == "session/title-llm-request":
            self._check_title(event, data, log)
        elif kind in IN_TURN_EVENT_TYPES:
            if self.open_turn is None:
                self._fail(event, "outside-turn", f"{kind} must occur inside a turn")
        elif kind == "llm/retry":
            self._check_retry(event, data)
        elif kind == "llm/retry-started":
            self._check_retry_started(event, data)
        elif kind == "command/run":
            if data["commandId"] in self.commands:
                self._fail(event, "command-pairing", f"command/run repeats commandId {data['commandId']}")
        elif kind == "command/done":
            self._check_command_done(event, data, log)
        elif kind.startswith("compaction/"):
            self._check_compaction(event, data, surface)
        elif kind == "user/message":
            self._check_checkpoint(event, data)
        elif kind == "session/title":
            self._check_title(event, data, log)

    def _fail(self, event: SessionEvent, rule: str, detail: str) -> None:
        raise InvariantError(
            f"seq {event.seq} ({event.type}): {detail}", rule=rule, event_type=event.type, seq=event.seq
        )

    def _need_turn(self, event: SessionEvent, turn: int) -> None:
        if self.open_turn is None:
            self._fail(event, "outside-turn", f"{event.type} outside any turn")
        if turn != self.open_turn:
            self._fail(event, "turn-mismatch", f"{event.type} names turn {turn} but turn {self.open_turn} is open")

    def _need_step(self, event: SessionEvent, data: Any) -> None:
        self._need_turn(event, data["turn"])
        if self.open_step is None:
            self._fail(event, "outside-step", f"{event.type} outside any step")
        if data["step"] != self.open_step:
            self._fail(
                event, "step-mismatch", f"{event.type} names step {data['step']} but step {self.open_step} is open"
            )

    def _no_unanswered(self, event: SessionEvent) -> None:
        if self.calls:
            first = next(iter(self.calls))
            self._fail(event, "unanswered-tool-call", f"{event.type} leaves tool call {first} unanswered")

    def _check_advertised(self, event: SessionEvent, data: Any) -> None:
        seen: set[str] = set()
        for block in data["message"]["content"]:
            if block.get("type") != "tool-call":
                continue
            call_id = block["id"]
            if not call_id:
                self._fail(event, "tool-call-id", "a tool-call block needs a non-empty id")
            if call_id in self.calls or call_id in seen:
                self._fail(event, "duplicate-tool-call", f"assistant/message repeats advertised tool call {call_id}")
            seen.add(call_id)

    def _check_call(self, event: SessionEvent, data: Any) -> None:
        call = self.calls.get(data["callId"])
        if call is None:
            self._fail(event, "unadvertised-tool-call", f"tool/call {data['callId']} has no advertised tool lifecycle")
            return
        if call.call_seq is not None or call.name != data["name"] or call.arguments != data["arguments"]:
            self._fail(
                event, "tool-call-mismatch", f"tool/call {data['callId']} does not match one advertised tool call"
            )

    def _check_result(self, event: SessionEvent, data: Any) -> None:
        message = data["message"]
        call_id = message["toolCallId"]
        call = self.calls.get(call_id)
        if call is None:
            self._fail(event, "orphan-tool-result", f"tool/result {call_id} has no advertised tool lifecycle")
            return
        if call.call_seq is None and not _is_not_started_repair(event, data, call_id):
            self._fail(event, "result-before-call", f"tool/result {call_id} is not the exact TOOL_NOT_STARTED repair")

    def _check_developer(self, event: SessionEvent, data: Any, log: Sequence[SessionEvent]) -> None:
        header_seq = data["headerSeq"]
        if not is_seq(header_seq) or header_seq >= event.seq or log[header_seq].type != "request/header":
            self._fail(
                event, "developer-header", "developer/message headerSeq must reference an earlier request/header"
            )
        tools = log[header_seq].data["header"].get("tools")
        for block in data["message"]["content"]:
            if block.get("type") != "tool-addition":
                continue
            name = block["toolName"]
            matches = [t for t in tools or () if isinstance(t, dict) and t.get("name") == name]
            if len(matches) != 1:
                self._fail(
                    event,
                    "developer-header",
                    f'developer/message tool-addition "{name}" must name exactly one tool in headerSeq {header_seq}',
                )
            if not isinstance(matches[0].get("description"), str) or not isinstance(matches[0].get("parameters"), dict):
                self._fail(
                    event,
                    "developer-header",
                    f'developer/message tool-addition "{name}" requires a complete '
                    f"tool definition in headerSeq {header_seq}",
                )

    def _check_retry(self, event: SessionEvent, data: Any) -> None:
        step = self.open_step if self.open_step is not None else self.last_step
        if self.open_turn is None or data["turn"] != self.open_turn or data["step"] != step:
            self._fail(event, "retry-chain", "llm/retry does not match the current turn and step")
        if data["provider"] != self.provider:
            self._fail(event, "retry-chain", "llm/retry provider does not match the open request/header")
        prior = next(
            (
                r
                for r in reversed(self.retries)
                if r["turn"] == data["turn"]
                and r["step"] == data["step"]
                and r["provider"] == data["provider"]
                and r.get("policyKey") == data.get("policyKey")
            ),
            None,
        )
        expected = 1 if prior is None else prior["retry"] + 1
        if data["retry"] != expected:
            self._fail(event, "retry-chain", "llm/retry skips its policy attempt sequence")
        if prior is None:
            if any(r["retryId"] == data["retryId"] for r in self.retries):
                self._fail(event, "retry-chain", "llm/retry must keep one retryId per policy chain")
        elif prior["retryId"] != data["retryId"]:
            self._fail(event, "retry-chain", "llm/retry must keep one retryId per policy chain")

    def _check_retry_started(self, event: SessionEvent, data: Any) -> None:
        scheduled = next(
            (r for r in self.retries if r["retryId"] == data["retryId"] and r["retry"] == data["retry"]), None
        )
        if scheduled is None:
            self._fail(event, "retry-chain", "llm/retry-started pairs no prior scheduled attempt")
            return
        if scheduled["turn"] != data["turn"] or scheduled["step"] != data["step"]:
            self._fail(event, "retry-chain", "llm/retry-started changes scheduled coordinates")
        if (data["retryId"], data["retry"]) in self.started_retries:
            self._fail(event, "retry-chain", "llm/retry-started repeats one scheduled attempt")

    def _check_command_done(self, event: SessionEvent, data: Any, log: Sequence[SessionEvent]) -> None:
        if data["commandId"] not in self.commands:
            self._fail(event, "command-pairing", "command/done has no prior command/run")
        if "sourceEventSeq" in data:
            source = data["sourceEventSeq"]
            if (
                not is_seq(source)
                or source >= event.seq
                or data["kind"] != "success"
                or log[source].type in ("command/run", "command/done")
            ):
                self._fail(event, "command-pairing", "command/done has invalid sourceEventSeq")

    def _check_compaction(self, event: SessionEvent, data: Any, surface: Surface) -> None:
        kind = event.type
        if kind in ("compaction/prune", "compaction/summary"):
            self._check_span(event, data, surface)
        if kind == "compaction/prune":
            return
        if kind == "compaction/start":
            if self.compaction is not None:
                self._fail(event, "compaction-bracket", "compaction/start overlaps an open compaction")
            if data["turn"] != self.open_turn:
                self._fail(event, "compaction-bracket", "compaction/start does not match the open turn")
            return
        current = self.compaction
        if (
            current is None
            or current.compaction_id != data["compactionId"]
            or current.command_id != data.get("sourceCommandId")
        ):
            self._fail(event, "compaction-bracket", f"{kind} has no matching compaction/start")
            return
        if current.turn != self.open_turn:
            self._fail(event, "compaction-bracket", f"{kind} does not match the open turn")
        if kind == "compaction/summary" and current.summarized:
            self._fail(event, "compaction-bracket", "compaction/summary repeats")
        if kind == "compaction/end":
            if data["turn"] != current.turn:
                self._fail(event, "compaction-bracket", "compaction/end changes its owner turn")
            if "error" not in data and not current.summarized:
                self._fail(event, "compaction-bracket", "successful compaction/end requires one summary")

    def _check_span(self, event: SessionEvent, data: Any, surface: Surface) -> None:
        span = data.get("shadowedRange")
        seqs = data.get("shadowedSeqs")
        nodes = surface.nodes
        ok = isinstance(span, dict) and isinstance(seqs, list)
        if ok:
            start, end = span.get("start"), span.get("end")
            ok = start in nodes and end in nodes
            if ok:
                first, last = nodes.index(start), nodes.index(end)
                ok = first <= last and nodes[first : last + 1] == list(seqs)
        if not ok:
            self._fail(event, "compaction-span", f"{event.type} shadowedSeqs do not name an exact current surface span")
        if surface.protected_head is not None and surface.protected_head in seqs:
            self._fail(event, "compaction-span", "compaction cannot shadow the protected system head")

    def _check_checkpoint(self, event: SessionEvent, data: Any) -> None:
        source = data["source"]
        if event.surface_op == "append" or source.get("kind") != "compact-checkpoint":
            return
        current = self.compaction
        if (
            current is None
            or current.compaction_id != source.get("compactionId")
            or current.command_id != source.get("sourceCommandId")
        ):
            self._fail(event, "compaction-bracket", "compaction checkpoint has no matching compaction/start")

    def _check_dispatch(self, event: SessionEvent, data: Any) -> None:
        if self.open_turn is None:
            self._fail(event, "outside-turn", f"{event.type} is outside an open turn")
        sub, root, parent = data["subCallId"], data["rootCallId"], data["parentCallId"]
        known = self.dispatches.get(sub)
        if known is not None and known[0]["rootCallId"] != root:
            self._fail(event, "ptc-dispatch", "PTC dispatch changes its rootCallId")
        if parent != root:
            owner = self.dispatches.get(parent)
            if owner is None or owner[0]["rootCallId"] != root:
                self._fail(event, "ptc-dispatch", "PTC parentCallId does not belong to rootCallId")
        if event.type == "tool/ptc-dispatch-start":
            if known is not None:
                self._fail(event, "ptc-dispatch", "PTC dispatch repeats subCallId")
            return
        if known is None or known[1]:
            self._fail(event, "ptc-dispatch", "PTC dispatch has no unique start")
            return
        start = known[0]
        if any(start.get(key) != data.get(key) for key in ("rootCallId", "parentCallId", "name", "arguments")):
            self._fail(event, "ptc-dispatch", "PTC dispatch does not match its start")

    def _check_title(self, event: SessionEvent, data: Any, log: Sequence[SessionEvent]) -> None:
        refs = data["messageSeqs"]
        if event.type == "session/title-llm-request":
            messages = data["messages"]
            message = messages[0] if len(messages) == 1 else None
            content = message.get("content") if isinstance(message, dict) else None
            if (
                not refs
                or message is None
                or message.get("role") != "user"
                or not isinstance(message.get("source"), dict)
                or message["source"].get("kind") != "dsh-session-title-llm"
                or not isinstance(content, list)
                or len(content) != 1
                or not isinstance(content[0], dict)
                or content[0].get("type") != "text"
            ):
                self._fail(event, "title-citation", "session/title-llm-request messages do not represent messageSeqs")
        elif (not refs) != (data["source"].get("kind") == "user"):
            self._fail(event, "title-citation", "session/title messageSeqs must be empty exactly for a user title")
        seen: set[int] = set()
        for ref in refs:
            valid = is_seq(ref) and ref < event.seq and ref not in seen
            if valid:
                cited = log[ref]
                valid = cited.type == "user/message" and cited.data["source"].get("kind") == "user"
            if not valid:
                self._fail(
                    event,
                    "title-citation",
                    f"{event.type} messageSeqs must cite distinct earlier human user/message events",
                )
            seen.add(ref)

    # -- applying -----------------------------------------------------------------

    def apply(self, event: SessionEvent) -> None:
        """Advance past ``event`` (which :meth:`check` accepted)."""
        kind = event.type
        if kind not in KNOWN_EVENT_TYPES:
            return
        data: Any = event.data
        if kind == "turn/start":
            self.open_turn = data["turn"]
            self.last_turn = data["turn"]
            self.open_step = None
            self.last_step = 0
            self.calls = {}
        elif kind == "turn/end":
            self.open_turn = None
            self.open_step = None
            self.calls = {}
        elif kind == "step/start":
            self.open_step = data["step"]
            self.last_step = data["step"]
        elif kind == "step/end":
            self.open_step = None
        elif kind == "assistant/message":
            for block in data["message"]["content"]:
                if block.get("type") == "tool-call":
                    self.calls[block["id"]] = PendingCall(block["name"], block["arguments"])
        elif kind == "tool/call":
            self.calls[data["callId"]].call_seq = event.seq
        elif kind == "tool/result" and event.surface_op == "append":
            self.calls.pop(data["message"]["toolCallId"], None)
        elif kind == "request/header":
            config = data["header"].get("config")
            self.provider = config.get("provider") if isinstance(config, dict) else None
        elif kind == "llm/retry":
            self.retries.append(data)
        elif kind == "llm/retry-started":
            self.started_retries.add((data["retryId"], data["retry"]))
        elif kind == "command/run":
            self.commands.add(data["commandId"])
        elif kind == "tool/ptc-dispatch-start":
            self.dispatches[data["subCallId"]] = [data, False]
        elif kind == "tool/ptc-dispatch":
            self.dispatches[data["subCallId"]][1] = True
        elif kind == "compaction/start":
            self.compaction = OpenCompaction(data["compactionId"], data.get("sourceCommandId"), data["turn"], event.seq)
        elif kind == "compaction/summary" and self.compaction is not None:
            self.compaction.summarized = True
        elif kind == "compaction/end":
            self.compaction = None
        elif kind == "session/end-seed":
            if self.compaction is not None:
                self.orphans.add(self.compaction.seq)
            self.compaction = None


def _check_fork_result(lifecycle: Lifecycle, event: SessionEvent, data: Any) -> None:
    """dsh v4 checks every ``forked-tool-result-*`` TOOL_NOT_STARTED result exactly (its own seq in the id)."""
    error = data.get("error")
    message = data["message"]
    message_id = message.get("id")
    if not (
        isinstance(error, dict)
        and error.get("code") == "TOOL_NOT_STARTED"
        and isinstance(message_id, str)
        and message_id.startswith("forked-tool-result-")
    ):
        return
    call_id = message["source"].get("callId")
    prefix = f"forked-tool-result-{call_id}-"
    suffix = message_id[len(prefix) :] if message_id.startswith(prefix) else ""
    number = int(suffix) if suffix.isdigit() and (suffix == "0" or not suffix.startswith("0")) else None
    replacement = isinstance(event.surface_op, SurfaceReplace)
    content = message["content"]
    ok = (
        isinstance(call_id, str)
        and number is not None
        and (number < event.seq if replacement else number == event.seq)
        and error.get("name") == "ToolNotStartedError"
        and (event.source_event_seqs == (number,) if replacement else event.source_event_seqs is None)
        and (replacement or event.surface_op == "append")
        and message.get("isError") is True
        and message.get("toolCallId") == call_id
        and len(content) == 1
        and isinstance(content[0], dict)
        and content[0].get("type") == "text"
        and isinstance(content[0].get("text"), str)
    )
    if not ok:
        lifecycle._fail(event, "fork-result", "invalid V4 not-started fork result")


def _is_not_started_repair(event: SessionEvent, data: Any, call_id: str) -> bool:
    """Whether a result for a never-started call is the exact synthetic repair dsh accepts."""
    error = data.get("error")
    message = data["message"]
    if not (
        isinstance(error, dict)
        and error.get("name") == "ToolNotStartedError"
        and error.get("code") == "TOOL_NOT_STARTED"
        and message.get("isError") is True
        and event.source_event_seqs is None
    ):
        return False
    message_id = str(message["id"])
    if message_id.startswith(f"forked-tool-result-{call_id}-"):
        return True
    suffix = message_id.removeprefix(f"interrupted-tool-result-{call_id}-")
    content = message["content"]
    return (
        suffix != message_id
        and suffix.isdigit()
        and (suffix == "0" or not suffix.startswith("0"))
        and len(content) == 1
        and content[0].get("type") == "text"
        and content[0].get("text") == CLOSER_TEXTS["interrupted"]["not_started"]
    )


def validate(events: Iterable[SessionEvent]) -> Lifecycle:
    """Check a whole log's surface and lifecycle rules; return the final lifecycle state.

    Raises :class:`InvariantError` (or another :class:`~dshpy.errors.EventError`: a
    surface rule, or malformed data for a known type) at the first event that breaks a rule.
    """
    log = list(events)
    lifecycle = Lifecycle(orphans=orphan_compactions(log))
    surface = Surface()
    for index, event in enumerate(log):
        if event.seq != index:
            raise InvariantError(
                f"seq {event.seq} at position {index} is not contiguous",
                rule="seq-contiguous",
                event_type=event.type,
                seq=event.seq,
            )
        if event.type in KNOWN_EVENT_TYPES:
            validate_event_data(event.type, event.data, event.seq)
        plan = surface.plan(event, log)
        lifecycle.check(event, log, surface)
        surface.commit(plan)
        lifecycle.apply(event)
    return lifecycle
