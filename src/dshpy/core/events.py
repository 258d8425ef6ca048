"""The event envelope of dsh format v4 and its exact wire form.

An event is ``type``, ``seq``, ``time``, ``data`` and, only where the rules allow
them, ``surfaceOp``, ``sourceEventSeqs`` and ``ignorable``. :meth:`SessionEvent.to_wire`
writes those keys in the order dsh's writer uses (``type, seq, time, data,
sourceEventSeqs, surfaceOp, ignorable``), so our lines are byte-compatible with
``JSON.stringify`` of the same event. The JSONL storage form additionally packs
strictly increasing ``sourceEventSeqs`` into ``[start, end]`` ranges
(:func:`encode_seq_ranges`); every reader expands them.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from dshpy.core.json import (
    MAX_DEPTH,
    MAX_SAFE_INTEGER,
    JsonValue,
    NotJsonError,
    _RipeningDict,  # the types seal_cleared builds, for decode_stored's inlined copy of its common case
    _RipeningList,
    dumps,
    freeze_json,
    is_sealed,
    joined_text,
    seal_cleared,
    seal_parsed,
)
from dshpy.errors import EventError, SurfaceError

__all__ = [
    "ENVELOPE_KEYS",
    "SessionEvent",
    "SurfaceOp",
    "SurfaceReplace",
    "assemble_event",
    "checked_event",
    "decode_event",
    "decode_seq_ranges",
    "decode_stored",
    "encode_event",
    "encode_seq_ranges",
    "event_from_parts",
    "is_seq",
    "parse_surface_op",
]

ENVELOPE_KEYS = frozenset({"type", "seq", "time", "data", "surfaceOp", "sourceEventSeqs", "ignorable"})


def is_seq(value: object) -> bool:
    """Whether ``value`` is a non-negative safe integer (bools excluded)."""
    return type(value) is int and 0 <= value <= MAX_SAFE_INTEGER


@dataclass(frozen=True, slots=True)
class SurfaceReplace:
    """``{"op": "replace", "startSeq", "endSeq"}``: swap a visible span for one node.

    ``start_seq`` and ``end_seq`` are looked up by their *position in the current
    surface*, not numerically, because earlier replacements move high seqs forward.
    """

    start_seq: int
    end_seq: int

    def to_wire(self) -> dict[str, Any]:
        return {"op": "replace", "startSeq": self.start_seq, "endSeq": self.end_seq}


SurfaceOp: TypeAlias = Literal["append"] | SurfaceReplace


@dataclass(frozen=True, slots=True)
class SessionEvent:
    """One immutable log entry. ``data`` is frozen JSON (read-only dicts and lists)."""

    type: str
    seq: int
    time: int
    data: JsonValue
    surface_op: SurfaceOp | None = None
    source_event_seqs: tuple[int, ...] | None = None
    ignorable: bool = False

    @property
    def is_surface(self) -> bool:
        """Whether this event joined the model-visible surface."""
        return self.surface_op is not None

    def to_wire(self, *, seq_ranges: bool = False) -> dict[str, Any]:
        """The dsh v4 JSON object, keys in the original writer's order."""
        wire: dict[str, Any] = {"type": self.type, "seq": self.seq, "time": self.time, "data": self.data}
        if self.source_event_seqs is not None:
            seqs = self.source_event_seqs
            wire["sourceEventSeqs"] = encode_seq_ranges(seqs) if seq_ranges else list(seqs)
        if self.surface_op is not None:
            op = self.surface_op
            wire["surfaceOp"] = op if isinstance(op, str) else op.to_wire()
        if self.ignorable:
            wire["ignorable"] = True
        return wire


_new_object = object.__new__
_slot_setters = tuple(SessionEvent.__dict__[field.name].__set__ for field in dataclasses.fields(SessionEvent))


def assemble_event(
    event_type: str,
    seq: int,
    time: int,
    data: JsonValue,
    surface_op: SurfaceOp | None,
    source_event_seqs: tuple[int, ...] | None,
    ignorable: bool,
) -> SessionEvent:
    """A :class:`SessionEvent` from parts the caller has already checked (sealed data, parsed op).

    Equal to calling the constructor, at about half its cost: a frozen dataclass's
    ``__init__`` goes through ``object.__setattr__`` per field, and every append and
    every replayed event builds one. Not for unchecked input: see :func:`checked_event`.
    """
    event = _new_object(SessionEvent)
    set_type, set_seq, set_time, set_data, set_op, set_sources, set_ignorable = _slot_setters
    set_type(event, event_type)
    set_seq(event, seq)
    set_time(event, time)
    set_data(event, data)
    set_op(event, surface_op)
    set_sources(event, source_event_seqs)
    set_ignorable(event, ignorable)
    return event


def encode_event(event: SessionEvent, *, seq_ranges: bool = True) -> bytes:
    """One event as compact JSON bytes (no newline), in its storage form."""
    return dumps(event.to_wire(seq_ranges=seq_ranges))


def encode_seq_ranges(seqs: Sequence[int]) -> list[int | list[int]]:
    """Pack runs of three or more consecutive seqs as ``[start, end]`` (increasing lists only).

    A list that is not strictly increasing (a compaction checkpoint cites
    ``[start, summary, ...shadowed]``) is stored verbatim, as dsh does.
    """
    if any(b <= a for a, b in itertools.pairwise(seqs)):
        return list(seqs)
    packed: list[int | list[int]] = []
    i = 0
    while i < len(seqs):
        j = i
        while j + 1 < len(seqs) and seqs[j + 1] == seqs[j] + 1:
            j += 1
        if j - i >= 2:
            packed.append([seqs[i], seqs[j]])
        else:
            packed.extend(seqs[i : j + 1])
        i = j + 1
    return packed


def decode_seq_ranges(raw: Any, limit: int) -> tuple[int, ...]:
    """Expand the storage form; ``limit`` (the event's own seq) bounds the expanded length."""
    if not isinstance(raw, list):
        raise ValueError("sourceEventSeqs must be an array")
    out: list[int] = []
    ranged = False
    for entry in raw:
        if is_seq(entry):
            out.append(entry)
        elif isinstance(entry, list) and len(entry) == 2 and is_seq(entry[0]) and is_seq(entry[1]):
            start, end = entry
            if end < start:
                raise ValueError("sourceEventSeqs ranges need start <= end")
            if end - start + 1 > limit - len(out):
                raise ValueError("sourceEventSeqs range exceeds its event's seq")
            out.extend(range(start, end + 1))
            ranged = True
        else:
            raise ValueError("sourceEventSeqs entries must be seqs or [start, end] pairs")
        if len(out) > limit:
            raise ValueError("sourceEventSeqs lists more entries than earlier events")
    if ranged and any(b <= a for a, b in itertools.pairwise(out)):
        raise ValueError("sourceEventSeqs ranges must be strictly increasing")
    return tuple(out)


def _envelope_error(detail: str, raw: Mapping[str, Any]) -> EventError:
    seq = raw.get("seq") if is_seq(raw.get("seq")) else None
    kind = raw.get("type") if isinstance(raw.get("type"), str) else None
    return EventError(f"invalid event envelope: {detail}", event_type=kind, seq=seq)


def decode_event(raw: Any, *, parsed: bool = False) -> SessionEvent:
    """Build an event from its wire (or storage) object, checking the envelope only.

    Surface, vocabulary and lifecycle rules are checked when the event joins a log.
    ``parsed=True`` says ``raw`` comes straight from a JSON parser and may be consumed,
    which lets the data be sealed in place instead of copied.
    """
    if not isinstance(raw, Mapping):
        raise EventError("invalid event envelope: an event must be a JSON object")
    extra = set(raw) - ENVELOPE_KEYS
    if extra:
        raise _envelope_error(f"unexpected key {sorted(extra)[0]!r}", raw)
    kind = raw.get("type")
    if not isinstance(kind, str) or not kind:
        raise _envelope_error("type must be a non-empty string", raw)
    seq: Any = raw.get("seq")
    if not is_seq(seq):
        raise _envelope_error("seq must be a non-negative safe integer", raw)
    time = raw.get("time")
    if type(time) is not int or abs(time) > MAX_SAFE_INTEGER:
        raise _envelope_error("time must be a safe integer", raw)
    if not parsed and not kind.isascii():
        kind = joined_text(kind)  # a parser never splits a pair; Python values may (see freeze_json)
    if "data" not in raw:
        raise _envelope_error("data is missing", raw)
    ignorable = raw.get("ignorable", False)
    if "ignorable" in raw and ignorable is not True:
        raise _envelope_error("ignorable must be true when present", raw)
    try:
        data = seal_parsed(raw["data"]) if parsed else freeze_json(raw["data"])
    except NotJsonError as error:
        raise _envelope_error(f"data is not lossless JSON ({error})", raw) from None
    surface_op = parse_surface_op(raw["surfaceOp"], kind, seq) if "surfaceOp" in raw else None
    sources: tuple[int, ...] | None = None
    if "sourceEventSeqs" in raw:
        try:
            sources = decode_seq_ranges(raw["sourceEventSeqs"], seq)
        except ValueError as error:
            raise _envelope_error(str(error), raw) from None
    return assemble_event(kind, seq, time, data, surface_op, sources, ignorable is True)


_NESTING_COUNTED = 2 * MAX_DEPTH
"""Source length from which :func:`~dshpy.core.json.seal_cleared` counts brackets."""


def decode_stored(raw: Any, source: bytes, cleared: bool) -> SessionEvent:
    """:func:`decode_event` of a row a store just parsed from ``source``: the same event, or the same error.

    The replay path, shaped for the envelopes a writer produces: its checks are the
    envelope rules written out for the common case (and :func:`assemble_event` inlined;
    a replay builds tens of thousands of events), and anything out of the ordinary goes
    to :func:`decode_event`, which judges it and words the error. ``cleared`` says
    :func:`~dshpy.core.json.unsafe_number_possible` found nothing to refuse in
    ``source`` (or in a chunk holding it), so the data is sealed as it is reached
    (:func:`~dshpy.core.json.seal_cleared`) instead of all at once.
    """
    if type(raw) is not dict:
        return decode_event(raw, parsed=True)
    try:
        kind = raw["type"]
        seq = raw["seq"]
        time = raw["time"]
        data = raw["data"]
    except KeyError:
        return decode_event(raw, parsed=True)
    if len(raw) == 4:
        op = sources = ignorable = None
    else:
        op = raw.get("surfaceOp")
        sources = raw.get("sourceEventSeqs")
        ignorable = raw.get("ignorable")
        if len(raw) != 4 + (op is not None) + (sources is not None) + (ignorable is not None) or (
            ignorable is not None and ignorable is not True
        ):
            return decode_event(raw, parsed=True)  # an unknown key or a null: judged and worded there
    if (
        type(kind) is not str
        or not kind
        or type(seq) is not int
        or not 0 <= seq <= MAX_SAFE_INTEGER
        or type(time) is not int
        or not -MAX_SAFE_INTEGER <= time <= MAX_SAFE_INTEGER
    ):
        return decode_event(raw, parsed=True)
    data_kind = type(data)
    if cleared and len(source) < _NESTING_COUNTED and (data_kind is dict or data_kind is list):
        sealed = _RipeningDict(data) if data_kind is dict else _RipeningList(data)  # seal_cleared's common case
    else:
        try:  # the checks in decode_event's order, so that the first problem is the one reported
            sealed = seal_cleared(data, source) if cleared else seal_parsed(data)
        except NotJsonError as error:
            raise _envelope_error(f"data is not lossless JSON ({error})", raw) from None
    if op is not None:
        op = "append" if op == "append" and type(op) is str else parse_surface_op(op, kind, seq)
    if sources is not None:
        try:
            sources = decode_seq_ranges(sources, seq)
        except ValueError as error:
            raise _envelope_error(str(error), raw) from None
    event = _new_object(SessionEvent)
    set_type, set_seq, set_time, set_data, set_op, set_sources, set_ignorable = _slot_setters
    set_type(event, kind)
    set_seq(event, seq)
    set_time(event, time)
    set_data(event, sealed)
    set_op(event, op)
    set_sources(event, sources)
    set_ignorable(event, ignorable is True)
    return event


def parse_surface_op(raw: Any, event_type: str, seq: int | None) -> SurfaceOp:
    """Accept ``"append"``, a :class:`SurfaceReplace`, or the exact 3-key replace object."""
    if isinstance(raw, SurfaceReplace):
        if not (is_seq(raw.start_seq) and is_seq(raw.end_seq)):
            raise SurfaceError(
                f'session event "{event_type}" carries an invalid replace surfaceOp', event_type=event_type, seq=seq
            )
        return raw
    if raw == "append" and type(raw) is str:
        return "append"
    if not isinstance(raw, Mapping):
        raise SurfaceError(f'session event "{event_type}" carries an invalid surfaceOp', event_type=event_type, seq=seq)
    if (
        set(raw) != {"op", "startSeq", "endSeq"}
        or raw["op"] != "replace"
        or not is_seq(raw["startSeq"])
        or not is_seq(raw["endSeq"])
    ):
        raise SurfaceError(
            f'session event "{event_type}" carries an invalid replace surfaceOp', event_type=event_type, seq=seq
        )
    return SurfaceReplace(raw["startSeq"], raw["endSeq"])


def checked_event(event: SessionEvent) -> SessionEvent:
    """``event`` itself if its envelope is sound and its data sealed, else a sealed copy.

    Events built by :func:`decode_event` or :func:`event_from_parts` pass for free; a
    ``SessionEvent`` constructed by hand is checked like wire input, so nothing unchecked
    reaches a log.
    """
    kind, seq = event.type, event.seq
    if not isinstance(kind, str) or not kind:
        raise EventError("invalid event envelope: type must be a non-empty string")
    if not is_seq(seq):
        raise EventError("invalid event envelope: seq must be a non-negative safe integer", event_type=kind)
    if type(event.time) is not int or abs(event.time) > MAX_SAFE_INTEGER:
        raise EventError("invalid event envelope: time must be a safe integer", event_type=kind, seq=seq)
    if type(event.ignorable) is not bool:
        raise EventError("invalid event envelope: ignorable must be a boolean", event_type=kind, seq=seq)
    if event.surface_op is not None:
        parse_surface_op(event.surface_op, kind, seq)
    sources = event.source_event_seqs
    if sources is not None and (not isinstance(sources, tuple) or not all(is_seq(s) for s in sources)):
        raise SurfaceError(
            f'session event "{kind}" sourceEventSeqs must densely contain non-negative safe integers',
            event_type=kind,
            seq=seq,
        )
    joined = kind if kind.isascii() else joined_text(kind)
    if joined is kind and is_sealed(event.data):
        return event
    try:
        data = freeze_json(event.data)
    except NotJsonError as error:
        raise EventError(
            f'session event "{kind}" carries non-JSON-serializable data: {error}', event_type=kind, seq=seq
        ) from None
    return dataclasses.replace(event, type=joined, data=data)


def event_from_parts(
    event_type: str,
    seq: int,
    time: int,
    data: Any,
    surface_op: Any = None,
    source_event_seqs: Sequence[int] | None = None,
    ignorable: bool = False,
) -> SessionEvent:
    """Build an event from Python values (freezing ``data``); used by synthesizers like repair."""
    frozen = freeze_json(data)
    op = None if surface_op is None else parse_surface_op(surface_op, event_type, seq)
    sources = None if source_event_seqs is None else tuple(source_event_seqs)
    return assemble_event(event_type, seq, time, frozen, op, sources, ignorable)
