"""dsh's v1 → v2 edge: top-level assistant chunks folded into the events that settle their attempt.

v1 logged every stream chunk as its own ``assistant/chunk`` event (or a packed row
of them); v2 embeds the attempt's chunks as stream records (dsh-v4 §1.2, §3.4):

* into ``assistant/message.data.stream`` when the message's ``sourceEventSeqs`` cite
  the whole attempt, in order (the citation is then dropped);
* otherwise into a new ``assistant/attempt {turn, step, stream}`` at the last chunk's
  seq and time, closed by ``llm/retry``, ``llm/retry-started``, ``step/end``,
  ``turn/end``, another step's chunks, or the end of the log.

Chunks vanish, so every seq is renumbered and every reference remapped
(``command/done.sourceEventSeq``, compaction ranges, title citations, surface
operations); a reference into a consumed chunk is refused. A legacy turn an
interrupted process left open is closed with ``turn/end {interrupted}`` before the
``turn/start`` of the next queued prompt; a goal message carrying its change splits
into ``goal/change`` plus the message. The header's ``seedLength`` becomes
``isSeeded``, and the fork cut is marked by a ``session/end-seed {inherited: true}``
(added when the source had none at the cut).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from dshpy.log.formats.attempt_stream import AttemptStream, ChunkAccumulator
from dshpy.log.formats.chain import EventRecord, HeaderRecord, Migration, MigrationRefusedError
from dshpy.log.formats.payload_semantics import check_released_payload
from dshpy.log.formats.physical import decode_header, is_packed, packed_run_span, physical_header
from dshpy.log.formats.released import RELEASED_V0_EVENT_DISPOSITIONS, count, is_object, js

__all__ = ["V1_TO_V2"]

NAME = "@deepseek-ai/dsh-session-format-v1-to-v2"
_CHUNK_REQUIRED = ("type", "seq", "time", "data")
_CHUNK_KEYS = frozenset({*_CHUNK_REQUIRED, "ignorable", "sourceEventSeqs", "surfaceOp"})
_CLOSERS = frozenset({"turn/end", "step/end", "llm/retry", "llm/retry-started"})


def _refuse(message: str) -> MigrationRefusedError:
    return MigrationRefusedError(message)


@dataclass(slots=True)
class _Group:
    """The chunks of one attempt: where they were, and their records."""

    turn: Any
    step: Any
    spans: list[list[int]] = field(default_factory=list)
    stream: AttemptStream = field(default_factory=AttemptStream)
    chunk_count: int = 0
    terminal: bool = False
    last_seq: int = 0
    last_time: int = 0

    def record_span(self, first: int, events: int, last_time: int) -> None:
        if self.spans and self.spans[-1][0] + self.spans[-1][1] == first:
            self.spans[-1][1] += events
        else:
            self.spans.append([first, events])
        self.chunk_count += events
        self.last_seq = first + events - 1
        self.last_time = last_time

    def cited_by(self, sources: list[int]) -> bool:
        if len(sources) != self.chunk_count:
            return False
        expected = [first + offset for first, events in self.spans for offset in range(events)]
        return expected == sources


@dataclass(slots=True)
class _Pending:
    group: _Group
    after_last_chunk: list[EventRecord] = field(default_factory=list)


class _Stage:
    """The edge's state while it streams one log."""

    def __init__(self, source: HeaderRecord, decoded: bool) -> None:
        self.header = source
        self.decoded = decoded
        self.seeded = "seedLength" in source
        self.source_cut: int = source.get("seedLength", 0)
        self.mapping: dict[int, int] = {}
        self.open_turn: Any = None
        self.open_step: Any = None
        self.previous: EventRecord | None = None
        self.pending: _Pending | None = None
        self.target_seq = 0
        self.target_cut: int | None = None if self.seeded else 0
        self.last_time: int = source["createdAt"]
        self.out: list[EventRecord] = []

    # -- emission ---------------------------------------------------------------------

    def emit_source(self, event: EventRecord) -> None:
        source = event
        if self.seeded and event["seq"] == self.source_cut and event["type"] == "session/end-seed":
            source = {**event, "data": {"inherited": True}}
        self.ensure_cut(event["seq"], event["time"], source["type"])
        self.mapping[event["seq"]] = self.target_seq
        self.out.append(self.remap(source))
        self.target_seq += 1

    def emit_generated(self, origin: int, event: EventRecord) -> None:
        self.ensure_cut(origin, event["time"], event["type"])
        self.out.append(self.remap(event))
        self.target_seq += 1

    def ensure_cut(self, origin: int, time: Any, kind: str) -> None:
        if not self.seeded or self.target_cut is not None or origin < self.source_cut:
            return
        self.target_cut = self.target_seq
        if origin == self.source_cut and kind == "session/end-seed":
            return
        self.out.append({"type": "session/end-seed", "seq": self.target_seq, "time": time, "data": {"inherited": True}})
        self.target_seq += 1

    def remap(self, source: EventRecord) -> EventRecord:
        label = f"{source['type']} {source['seq']}"
        event = {key: value for key, value in source.items() if key not in ("sourceEventSeqs", "surfaceOp")}
        event["seq"] = self.target_seq
        event["data"] = self.remap_payload(source)
        if "sourceEventSeqs" in source:
            event["sourceEventSeqs"] = [self.one(seq, f"{label} sources") for seq in source["sourceEventSeqs"]]
        if "surfaceOp" in source:
            operation = source["surfaceOp"]
            if operation != "append":
                operation = {
                    "op": "replace",
                    "start": self.one(operation["start"], f"{label} surface start"),
                    "end": self.one(operation["end"], f"{label} surface end"),
                }
            event["surfaceOp"] = operation
        return event

    def remap_payload(self, event: EventRecord) -> Any:
        data = event["data"]
        kind = event["type"]
        label = f"{kind} {event['seq']}"
        if kind == "command/done":
            if "sourceEventSeq" not in data:
                return data
            return {
                **data,
                "sourceEventSeq": self.one(data["sourceEventSeq"], f"command/done {event['seq']} sourceEventSeq"),
            }
        if kind in ("compaction/prune", "compaction/summary"):
            shadowed = data["shadowedRange"]
            return {
                **data,
                "shadowedRange": {
                    "start": self.one(shadowed["start"], f"{label} shadowedRange start"),
                    "end": self.one(shadowed["end"], f"{label} shadowedRange end"),
                },
                "shadowedSeqs": [self.one(seq, f"{label} shadowedSeqs") for seq in data["shadowedSeqs"]],
            }
        if kind in ("session/title", "session/title-llm-request"):
            return {**data, "messageSeqs": [self.one(seq, f"{label} messageSeqs") for seq in data["messageSeqs"]]}
        return data

    def one(self, value: Any, label: str) -> int:
        mapped = self.mapping.get(value) if type(value) is int else None
        if mapped is None:
            raise _refuse(f"{label} targets consumed assistant/chunk {value}")
        return mapped

    # -- attempts ---------------------------------------------------------------------

    def finish_attempt(self) -> None:
        pending = self.pending
        if pending is None:
            return
        group = pending.group
        attempt = {
            "type": "assistant/attempt",
            "seq": group.last_seq,
            "time": group.last_time,
            "data": {"turn": group.turn, "step": group.step, "stream": group.stream.records()},
        }
        self.emit_generated(group.last_seq, attempt)
        self.flush_buffered(pending)
        self.pending = None

    def flush_buffered(self, pending: _Pending) -> None:
        for event in pending.after_last_chunk:
            self.emit_source(event)
        pending.after_last_chunk.clear()

    def open_group(self, turn: Any, step: Any) -> _Pending:
        pending = self.pending
        if pending is not None and (pending.group.terminal or pending.group.turn != turn or pending.group.step != step):
            self.finish_attempt()
        elif pending is not None:
            self.flush_buffered(pending)
        if self.pending is None:
            self.pending = _Pending(_Group(turn, step))
        return self.pending

    def check_cut(self, first: int, member: int) -> None:
        if (first < self.source_cut) != (member < self.source_cut):
            raise _refuse(f"inherited Session cut {self.source_cut} splits one Assistant attempt")

    # -- input ------------------------------------------------------------------------

    def run(self, row: EventRecord) -> None:
        data = row["data"]
        first, events, last_time = packed_run_span(row)
        self.previous = None
        self.last_time = last_time
        pending = self.open_group(data["turn"], data["step"])
        self.check_cut(first, first + events - 1)
        pending.group.stream.flush()
        pending.group.stream.append(_run_record(row), last_time)
        pending.group.record_span(first, events, last_time)

    def event(self, event: EventRecord) -> None:
        kind = event["type"]
        seq = event["seq"]
        if self.decoded and kind != "assistant/chunk" and kind in RELEASED_V0_EVENT_DISPOSITIONS:
            check_released_payload(event, 1)
        if kind == "assistant/chunk":
            _check_chunk_envelope(event)
        if kind not in RELEASED_V0_EVENT_DISPOSITIONS:
            raise _refuse(f"format v1 contains unknown event type {js(kind)} at seq {seq}")
        interrupted = self.interrupted_turn(event)
        if kind == "turn/start" and self.open_turn is not None and interrupted is None:
            raise _refuse(f"turn/start {js(event['data'].get('turn'))} does not close the prior turn")
        self.check_delivery(event)
        self.observe(event)
        self.last_time = event["time"]
        if interrupted is not None:
            self.finish_attempt()
            self.emit_generated(seq, interrupted)
        goal = _split_goal(event)
        if goal is not None:
            change, message = goal
            self.emit_generated(seq, change)
            self.emit_source(message)
        elif kind == "assistant/chunk":
            self.chunk(event)
        elif kind == "assistant/message":
            self.message(event)
        elif kind in _CLOSERS:
            self.finish_attempt()
            self.emit_source(event)
        elif self.pending is not None:
            self.pending.after_last_chunk.append(event)
        else:
            self.emit_source(event)

    def chunk(self, event: EventRecord) -> None:
        data = event["data"]
        pending = self.open_group(data["turn"], data["step"])
        group = pending.group
        self.check_cut(group.spans[0][0] if group.spans else event["seq"], event["seq"])
        if group.stream.accumulator is None:
            group.stream.accumulator = ChunkAccumulator()
        group.stream.accumulator.push(event["time"], data["chunk"])
        group.record_span(event["seq"], 1, event["time"])
        if is_object(data["chunk"]) and data["chunk"].get("type") == "finish":
            group.terminal = True

    def message(self, event: EventRecord) -> None:
        data = event["data"]
        turn, step = data["turn"], data["step"]
        sources = event.get("sourceEventSeqs")
        pending = self.pending
        if pending is not None and (pending.group.turn != turn or pending.group.step != step):
            self.finish_attempt()
            self.emit_source(_message_event(event, _Group(turn, step)))
            return
        if not isinstance(sources, list):
            if pending is not None:
                raise _refuse(f"assistant/message {event['seq']} does not cite its complete v1 chunk attempt")
            self.emit_source(_message_event(event, _Group(turn, step)))
            return
        if not sources:
            self.finish_attempt()
            self.emit_source(_message_event(event, _Group(turn, step)))
            return
        if pending is None or not pending.group.cited_by(sources):
            raise _refuse(f"assistant/message {event['seq']} chunk references are not one complete ordered attempt")
        group = pending.group
        self.check_cut(group.spans[0][0] if group.spans else event["seq"], event["seq"])
        group.terminal = True
        self.flush_buffered(pending)
        self.emit_source(_message_event(event, group))
        self.pending = None

    def interrupted_turn(self, event: EventRecord) -> EventRecord | None:
        if (
            event["type"] != "turn/start"
            or self.open_turn is None
            or self.open_step is not None
            or event["data"].get("turn") != self.open_turn + 1
            or self.previous is None
            or self.previous["type"] != "agent/inbox/spliced"
        ):
            return None
        splice = self.previous["data"]
        inserted = splice.get("inserted")
        if splice.get("target") != "next-turn" or not isinstance(inserted, list) or not inserted:
            return None
        return {
            "type": "turn/end",
            "seq": event["seq"],
            "time": event["time"],
            "data": {"turn": self.open_turn, "reason": {"kind": "interrupted"}},
        }

    def observe(self, event: EventRecord) -> None:
        kind = event["type"]
        data = event["data"]
        if kind == "turn/start":
            self.open_turn = data.get("turn")
            self.open_step = None
        elif kind == "turn/end":
            self.open_turn = None
            self.open_step = None
        elif kind == "step/start":
            self.open_step = data.get("step")
        elif kind == "step/end":
            self.open_step = None
        self.previous = event

    def check_delivery(self, event: EventRecord) -> None:
        if event["type"] != "session-log-deepseek/delivery-accepted":
            return
        data = event["data"]
        inherited = "parentSession" in self.header and event["seq"] < self.source_cut
        if data.get("sessionFormatVersion") == 1 and not inherited and data.get("sessionId") != self.header["id"]:
            raise _refuse("current-generation delivery marker names the wrong Session")

    def finish(self) -> None:
        self.finish_attempt()
        if self.seeded and self.target_cut is None:
            self.target_cut = self.target_seq
            self.out.append(
                {
                    "type": "session/end-seed",
                    "seq": self.target_seq,
                    "time": self.last_time,
                    "data": {"inherited": True},
                }
            )
            self.target_seq += 1


def _check_chunk_envelope(event: EventRecord) -> None:
    seq = event["seq"]
    unexpected = next((key for key in event if key not in _CHUNK_KEYS), None)
    if unexpected is not None:
        raise _refuse(f"assistant/chunk {seq} has unexpected member {unexpected}")
    missing = next((key for key in _CHUNK_REQUIRED if key not in event), None)
    if missing is not None:
        raise _refuse(f"assistant/chunk {seq} lacks required member {missing}")
    if "ignorable" in event and event["ignorable"] is not True:
        raise _refuse(f"assistant/chunk {seq} ignorable must be true when present")


def _split_goal(event: EventRecord) -> tuple[EventRecord, EventRecord] | None:
    if event["type"] != "user/message":
        return None
    data = event["data"]
    source = data.get("source")
    if not is_object(source) or source.get("kind") != "goal" or "change" not in source:
        return None
    change = {"type": "goal/change", "seq": event["seq"], "time": event["time"], "data": source["change"]}
    message = {**event, "data": {**data, "source": {"kind": "plugin", "plugin": "goal"}}}
    return change, message


def _run_record(row: EventRecord) -> dict[str, Any]:
    """A packed row's stream record (a fresh object: later runs merge into it)."""
    data = row["data"]
    if row["type"] == "tool-call-chunks":
        record: dict[str, Any] = {
            "type": row["type"],
            "time0": row["time0"],
            "index": data["index"],
            "dt": list(data["dt"]),
        }
        record["id"] = data["id"]
        if "name" in data:
            record["name"] = data["name"]
        record["args"] = list(data["args"])
        return record
    return {
        "type": row["type"],
        "time0": row["time0"],
        "index": data["index"],
        "dt": list(data["dt"]),
        "texts": list(data["texts"]),
    }


def _message_event(source: EventRecord, group: _Group) -> EventRecord:
    event = {key: value for key, value in source.items() if key != "sourceEventSeqs"}
    event["data"] = {**source["data"], "stream": group.stream.records()}
    return event


def _migrate_header(header: HeaderRecord) -> HeaderRecord:
    decode_header(header, 1)
    logical = {**header, "isSeeded": "seedLength" in header}
    return physical_header(logical, 2)


def _migrate(events: Iterable[EventRecord], source: HeaderRecord, _target: HeaderRecord) -> Iterator[EventRecord]:
    # dsh checks payloads here only for a log stored as v1; one converted from v0 passed
    # the stricter v0 check already, so checking every input again refuses nothing new.
    stage = _Stage(source, decoded=True)
    for record in events:
        if is_packed(record):
            stage.run(record)
        else:
            _require(record)
            stage.event(record)
        if stage.out:
            yield from stage.out
            stage.out.clear()
    stage.finish()
    yield from stage.out


def _require(event: EventRecord) -> None:
    if not isinstance(event.get("type"), str) or not is_object(event.get("data")):
        raise MigrationRefusedError(f"format v1 row {event.get('seq')} needs a string type and object data")
    count(event.get("seq"), "v1 event seq")


V1_TO_V2 = Migration(NAME, 1, 2, _migrate_header, migrate_stream=_migrate)
"""dsh's attempt-embedding edge v1 → v2."""
