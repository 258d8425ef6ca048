"""Renumbering an event and the same-log references it carries, for edges that insert or drop events.

When an edge adds events (v2→v3's system heads, v3→v4's interrupted-turn closers),
every later event moves, and so must each seq an event cites: ``command/done``'s
``sourceEventSeq``, a compaction's shadowed range and seqs, a title's message seqs,
``image/offload`` targets (v3 on), ``sourceEventSeqs`` and a replacing ``surfaceOp``.
Each must name an earlier source event; other fields of the objects they sit in are
kept in place (dsh's ``remapEvent`` and ``remapV3References``; v1→v2, which also
drops events, has its own rules in its module).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dshpy.log.formats.chain import EventRecord, FormatError
from dshpy.log.formats.released import count

__all__ = ["ReferenceRules", "remap_references"]


@dataclass(frozen=True, slots=True)
class ReferenceRules:
    """What one generation's events cite, and how its edge words a bad reference."""

    span_keys: tuple[str, str]
    """The keys of a replacing ``surfaceOp`` (``start``/``end`` up to v2, ``startSeq``/``endSeq`` from v3)."""
    offload_targets: bool
    """Whether ``image/offload.targets[].seq`` are references (v3 on)."""
    reference: str
    """Label of one reference in a count error."""
    earlier: str
    """Error for a reference that is not an earlier source event."""
    array: str
    """Error for a reference list that is not an array."""
    container: str
    """Error for a reference container that is not an object (a ``%s`` names it, when the message has one)."""


def remap_references(event: EventRecord, seq: int, mapping: Sequence[int], rules: ReferenceRules) -> EventRecord:
    """``event`` at ``seq``, every reference ``r`` it carries replaced by ``mapping[r]``."""
    origin = event["seq"]

    def one(value: Any) -> int:
        source = count(value, rules.reference)
        if source >= origin or source >= len(mapping):
            raise FormatError(rules.earlier)
        return mapping[source]

    def many(value: Any) -> list[int]:
        if not isinstance(value, list):
            raise FormatError(rules.array)
        return [one(item) for item in value]

    def container(value: Any, name: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise FormatError(rules.container.replace("%s", name))
        return value

    def span(value: Any, keys: tuple[str, str], name: str) -> dict[str, Any]:
        source = container(value, name)
        return {**source, keys[0]: one(source.get(keys[0])), keys[1]: one(source.get(keys[1]))}

    data = event.get("data")
    kind = event["type"]
    if kind == "command/done":
        source = container(data, kind)
        if "sourceEventSeq" in source:
            data = {**source, "sourceEventSeq": one(source["sourceEventSeq"])}
    elif kind in ("compaction/summary", "compaction/prune"):
        source = container(data, kind)
        shadowed = span(source.get("shadowedRange"), ("start", "end"), "sequence range")
        data = {**source, "shadowedRange": shadowed, "shadowedSeqs": many(source.get("shadowedSeqs"))}
    elif kind in ("session/title", "session/title-llm-request"):
        source = container(data, kind)
        data = {**source, "messageSeqs": many(source.get("messageSeqs"))}
    elif kind == "image/offload" and rules.offload_targets:
        source = container(data, kind)
        targets = source.get("targets")
        if not isinstance(targets, list):
            raise FormatError("V3 image offload targets must be an array")
        data = {
            **source,
            "targets": [{**container(t, kind), "seq": one(container(t, kind).get("seq"))} for t in targets],
        }
    out = {**event, "seq": seq, "data": data}
    if "sourceEventSeqs" in event:
        out["sourceEventSeqs"] = many(event["sourceEventSeqs"])
    operation = event.get("surfaceOp")
    if operation is not None and operation != "append":
        out["surfaceOp"] = span(operation, rules.span_keys, "sequence range")
    return out
