"""A resume point: what a session needs to go on from seq n without replaying the events before it.

Restoring a session replays every event through admission (the surface fold, the
lifecycle checks, the derived history), which costs the whole log every time it is
opened. A :class:`ResumePoint` is that replay's result after the first ``length``
events, in a form a store can keep beside the log:

* the **lifecycle** state (open turn and step, unanswered calls, retry chains,
  compaction bracket, command and dispatch ids): what the next event is checked
  against;
* the **surface** (the seqs the model sees, the protected system head) and which of
  those nodes derive no message: enough to hand out the message history without
  reading a single surface event until a message is actually read;
* the positions a session remembers by seq (the latest ``request/header``, the
  inherited end-seed marker, the open turn's ``turn/start``);
* a **fingerprint** of event ``length - 1``, so a reader can tell that the log it
  holds is the log this point was taken from.

It is pure data with an exact JSON form (:meth:`ResumePoint.to_state`,
:func:`parse_resume_point`): anything malformed is refused with :class:`ResumeError`,
and a reader then replays the log instead. Trusting a point is the store's decision
(:mod:`dshpy.storage.resume_cache`); this module only guarantees that a point parsed
back is the point that was written.
"""

from __future__ import annotations

import hashlib
import itertools
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from dshpy.core.events import SessionEvent, encode_event, is_seq
from dshpy.core.json import JsonValue, dumps, loads, seal_parsed
from dshpy.errors import DshError
from dshpy.log.invariants import Lifecycle, OpenCompaction, PendingCall

__all__ = [
    "RESUME_FORMAT",
    "ResumeError",
    "ResumePoint",
    "event_fingerprint",
    "nodes_with_messages",
    "parse_resume_point",
]

RESUME_FORMAT = 1
"""Version of the JSON form; a point of another version is not read (the log is replayed instead)."""


class ResumeError(DshError):
    """A stored resume point cannot be used (damaged, another format, or not this log's): replay instead."""


def event_fingerprint(event: SessionEvent) -> str:
    """SHA-256 of the event's canonical wire bytes: what ties a resume point to the log it was taken from."""
    return hashlib.sha256(encode_event(event, seq_ranges=False)).hexdigest()


@dataclass(frozen=True, slots=True)
class ResumePoint:
    """A session's admission state after its first ``length`` events (see the module docs)."""

    length: int
    last_event: str
    """:func:`event_fingerprint` of event ``length - 1``."""
    lifecycle: Lifecycle
    nodes: list[int]
    """Seqs of the surface nodes, in model order."""
    silent: list[int]
    """Indexes into ``nodes`` of the nodes that derive no message (empty assistant, system or developer content)."""
    protected_head: int | None
    request_header_seq: int | None
    inherited: int
    seeded: bool
    turn_start: int | None
    """Seq of the open turn's ``turn/start`` (``None``: no turn open): where crash repair starts looking."""

    def to_state(self) -> dict[str, Any]:
        """The point as a JSON object a store keeps: its body as JSON text, with a digest of it (so damage is
        never read as state) and the format version."""
        body = dumps(
            {
                "length": self.length,
                "lastEvent": self.last_event,
                "lifecycle": _lifecycle_json(self.lifecycle),
                "nodes": _deltas(self.nodes),
                "silent": self.silent,
                "protectedHead": self.protected_head,
                "requestHeaderSeq": self.request_header_seq,
                "inherited": self.inherited,
                "seeded": self.seeded,
                "turnStart": self.turn_start,
            }
        )
        return {"format": RESUME_FORMAT, "sha256": hashlib.sha256(body).hexdigest(), "body": body.decode()}


def parse_resume_point(raw: JsonValue) -> ResumePoint:
    """A point from :meth:`ResumePoint.to_state` (as a store gives it back); raises :class:`ResumeError`."""
    if not isinstance(raw, dict) or set(raw) != {"format", "sha256", "body"}:
        raise ResumeError("a resume point needs exactly format, sha256 and body")
    if raw["format"] != RESUME_FORMAT:
        raise ResumeError(f"resume point format {raw['format']!r} is not {RESUME_FORMAT}")
    body = raw["body"]
    if not isinstance(body, str):
        raise ResumeError("resume point body must be a JSON string")
    encoded = body.encode("utf-8", "surrogatepass")
    if hashlib.sha256(encoded).hexdigest() != raw["sha256"]:
        raise ResumeError("resume point digest mismatch: the point is damaged")
    try:
        fields = loads(encoded)
        return _point(fields)
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, IndexError) as error:
        raise ResumeError(f"malformed resume point: {type(error).__name__}: {error}") from None


def _int(value: Any, *, optional: bool = False) -> Any:
    if value is None and optional:
        return None
    if not is_seq(value):
        raise ValueError(f"expected a non-negative integer, got {value!r}")
    return value


def _ints(values: Any) -> list[int]:
    if type(values) is not list or not all(is_seq(v) for v in values):
        raise ValueError("expected a list of non-negative integers")
    return values


def _deltas(nodes: list[int]) -> list[int]:
    """``nodes`` as differences from the previous node (the first from 0): mostly small numbers, which are a third
    of the JSON and parse into Python's shared small ints; a surface of 35k nodes is read back in about a ms."""
    return list(map(operator.sub, nodes, [0, *nodes[:-1]]))


def _nodes(deltas: Any, length: int) -> list[int]:
    """The nodes :func:`_deltas` encoded, checked to be seqs below ``length`` (at C speed: no per-node Python)."""
    if type(deltas) is not list or not set(map(type, deltas)) <= {int}:
        raise ValueError("resume point nodes must be a list of integers")
    nodes = list(itertools.accumulate(deltas))
    if nodes and (min(nodes) < 0 or max(nodes) >= length):
        raise ValueError("resume point nodes lie outside its log")
    return nodes


def _point(fields: Any) -> ResumePoint:
    expected = {
        "length", "lastEvent", "lifecycle", "nodes", "silent", "protectedHead", "requestHeaderSeq", "inherited",
        "seeded", "turnStart",
    }  # fmt: skip
    if not isinstance(fields, dict) or set(fields) != expected:
        raise ValueError("resume point body has the wrong fields")
    length = _int(fields["length"])
    if length < 1:
        raise ValueError("a resume point covers at least one event")
    nodes = _nodes(fields["nodes"], length)
    silent = _ints(fields["silent"])
    if silent != sorted(set(silent)) or any(index >= len(nodes) for index in silent[-1:]):
        raise ValueError("resume point silent nodes must be increasing indexes into its nodes")
    if not isinstance(fields["lastEvent"], str) or type(fields["seeded"]) is not bool:
        raise ValueError("resume point lastEvent must be a string and seeded a boolean")
    return ResumePoint(
        length=length,
        last_event=fields["lastEvent"],
        lifecycle=_lifecycle(fields["lifecycle"]),
        nodes=nodes,
        silent=silent,
        protected_head=_int(fields["protectedHead"], optional=True),
        request_header_seq=_int(fields["requestHeaderSeq"], optional=True),
        inherited=_int(fields["inherited"]),
        seeded=fields["seeded"],
        turn_start=_int(fields["turnStart"], optional=True),
    )


def _lifecycle_json(lifecycle: Lifecycle) -> dict[str, Any]:
    compaction = lifecycle.compaction
    return {
        "openTurn": lifecycle.open_turn,
        "openStep": lifecycle.open_step,
        "lastTurn": lifecycle.last_turn,
        "lastStep": lifecycle.last_step,
        "calls": [[key, c.name, c.arguments, c.call_seq] for key, c in lifecycle.calls.items()],
        "provider": lifecycle.provider,
        "compaction": None
        if compaction is None
        else [compaction.compaction_id, compaction.command_id, compaction.turn, compaction.seq, compaction.summarized],
        "orphans": list(lifecycle.orphans),
        "commands": list(lifecycle.commands),
        "retries": lifecycle.retries,
        "startedRetries": [list(pair) for pair in lifecycle.started_retries],
        "dispatches": [[key, value[0], value[1]] for key, value in lifecycle.dispatches.items()],
    }


def _lifecycle(raw: Any) -> Lifecycle:
    expected = {
        "openTurn", "openStep", "lastTurn", "lastStep", "calls", "provider", "compaction", "orphans", "commands",
        "retries", "startedRetries", "dispatches",
    }  # fmt: skip
    if not isinstance(raw, dict) or set(raw) != expected:
        raise ValueError("resume point lifecycle has the wrong fields")
    lifecycle = Lifecycle(raw["openTurn"], raw["openStep"], raw["lastTurn"], raw["lastStep"])
    for value in (lifecycle.last_turn, lifecycle.last_step):
        if type(value) is not int:
            raise ValueError("lastTurn and lastStep must be integers")
    for maybe in (lifecycle.open_turn, lifecycle.open_step):
        if maybe is not None and type(maybe) is not int:
            raise ValueError("openTurn and openStep must be integers or null")
    for key, name, arguments, call_seq in raw["calls"]:
        if not isinstance(key, str) or not isinstance(name, str) or not isinstance(arguments, str):
            raise ValueError("a pending call needs string id, name and arguments")
        lifecycle.calls[key] = PendingCall(name, arguments, _int(call_seq, optional=True))
    lifecycle.provider = seal_parsed(raw["provider"])
    compaction = raw["compaction"]
    if compaction is not None:
        compaction_id, command_id, turn, seq, summarized = compaction
        if type(summarized) is not bool:
            raise ValueError("an open compaction's summarized flag must be a boolean")
        lifecycle.compaction = OpenCompaction(compaction_id, command_id, turn, _int(seq), summarized)
    lifecycle.orphans = set(_ints(raw["orphans"]))
    commands = raw["commands"]
    if type(commands) is not list or not all(isinstance(c, str) for c in commands):
        raise ValueError("commands must be a list of strings")
    lifecycle.commands = set(commands)
    retries = raw["retries"]
    if type(retries) is not list or not all(isinstance(r, dict) for r in retries):
        raise ValueError("retries must be a list of objects")
    lifecycle.retries = list(seal_parsed(retries))
    lifecycle.started_retries = {(retry_id, number) for retry_id, number in raw["startedRetries"]}
    for key, data, settled in raw["dispatches"]:
        if not isinstance(key, str) or not isinstance(data, dict) or type(settled) is not bool:
            raise ValueError("a dispatch needs a string id, its start data and a settled flag")
        lifecycle.dispatches[key] = [seal_parsed(data), settled]
    return lifecycle


def nodes_with_messages(nodes: Sequence[int], silent: Sequence[int]) -> list[int]:
    """The seqs of ``nodes`` that derive a message (all but the ``silent`` indexes), in order."""
    if not silent:
        return list(nodes)
    out: list[int] = []
    at = 0
    for index in silent:
        out.extend(nodes[at:index])
        at = index + 1
    out.extend(nodes[at:])
    return out
