"""The physical layout of dsh's released formats: header lines and stored rows, v0 to v3.

v0 and v1 share one layout: the header may carry ``seedLength`` (a fork's inherited
prefix length), ``assistant/chunk`` runs may be packed into one row
(``text-chunks``, ``reasoning-chunks``, ``tool-call-chunks``: dsh-dataplane §6.5),
and ``sourceEventSeqs`` may be range-encoded. From v2 on the header says
``isSeeded`` and the prefix is marked by the last ``session/end-seed {inherited:
true}``; rows are single events, ``sourceEventSeqs`` still range-encoded.

Decoding checks what a reader must know before any edge runs: the header's fields,
each row's envelope basics and a packed row's exact shape. A failure here is damage
to the stored log (:class:`~dshpy.log.formats.chain.FormatError`), not a refusal.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from dshpy.log.formats.chain import FormatError
from dshpy.log.formats.released import (
    PACKED_TAGS,
    check_header_fields,
    check_member_keys,
    count,
    decode_seq_ranges,
    is_object,
    object_of,
    safe_int,
)

__all__ = [
    "decode_header",
    "decode_row",
    "expand_packed",
    "is_packed",
    "packed_run_span",
    "physical_header",
    "row_count",
]

_V0_REQUIRED = ("type", "version", "id", "createdAt", "delegationDepth")
_V0_OPTIONAL = ("cwd", "parentSession", "seedLength", "origin", "agentPreset")
_V2_REQUIRED = ("type", "version", "id", "createdAt", "isSeeded", "delegationDepth")
_V2_OPTIONAL = ("cwd", "parentSession", "origin", "agentPreset")
_EVENT_KEYS = frozenset({"type", "seq", "time", "data", "ignorable", "sourceEventSeqs", "surfaceOp"})


def decode_header(raw: Any, version: int) -> dict[str, Any]:
    """Check a stored header line of ``version`` (0–3); returns it unchanged.

    v0/v1 keep ``seedLength``; v2/v3 say ``isSeeded``. Retired policy keys and unknown
    keys are damage.
    """
    label = f"released v{version} physical header"
    record = object_of(raw, label)
    if "sandboxMode" in record or "approvalPolicy" in record:
        raise FormatError("session header uses retired policy baseline fields")
    if version <= 1:
        check_member_keys(record, _V0_REQUIRED, _V0_OPTIONAL, label)
    else:
        _exact_fields(record, _V2_REQUIRED, _V2_OPTIONAL, label)
        if type(record["isSeeded"]) is not bool:
            raise FormatError(f"released v{version} header isSeeded must be boolean")
    if record.get("type") != "session" or record.get("version") != version:
        raise FormatError(f"expected released v{version} physical Session header")
    check_header_fields(record, f"released v{version} header")
    if "seedLength" in record:
        count(record["seedLength"], f"released v{version} header seedLength")
    return record


def physical_header(logical: dict[str, Any], version: int, *, seed_length: int | None = None) -> dict[str, Any]:
    """A header record in dsh's key order for ``version`` (v0/v1: ``seedLength``; later: ``isSeeded``)."""
    record: dict[str, Any] = {"type": "session", "version": version, "id": logical["id"]}
    record["createdAt"] = logical["createdAt"]
    for key in ("cwd", "parentSession"):
        if key in logical:
            record[key] = logical[key]
    if version <= 1:
        if seed_length is not None:
            record["seedLength"] = seed_length
    else:
        record["isSeeded"] = logical["isSeeded"]
    if "origin" in logical:
        record["origin"] = logical["origin"]
    record["delegationDepth"] = logical.get("delegationDepth", 0)
    if "agentPreset" in logical:
        record["agentPreset"] = logical["agentPreset"]
    return record


def _exact_fields(record: dict[str, Any], required: tuple[str, ...], optional: tuple[str, ...], label: str) -> None:
    missing = next((key for key in required if key not in record), None)
    if missing is not None:
        raise FormatError(f"{label} lacks {missing}")
    unexpected = next((key for key in record if key not in required and key not in optional), None)
    if unexpected is not None:
        raise FormatError(f"{label} has unexpected field {unexpected}")


def decode_row(raw: Any, version: int, row: int) -> dict[str, Any]:
    """One stored row of ``version`` (0–3) as a logical record: ranges expanded, packed rows checked.

    A packed v0/v1 row stays a row (the v1→v2 edge folds it whole); everything else
    is an event whose ``sourceEventSeqs`` is a plain list. Idempotent.
    """
    record = object_of(raw, f"released Session row {row}")
    kind = record.get("type")
    if version <= 1 and isinstance(kind, str) and kind in PACKED_TAGS:
        _check_packed(record, kind, row)
        return record
    if version >= 2:
        missing = next((key for key in ("type", "seq", "time", "data") if key not in record), None)
        if missing is not None:
            raise FormatError(f"released v2 row {row} lacks required field {missing}")
        unexpected = next((key for key in record if key not in _EVENT_KEYS), None)
        if unexpected is not None:
            raise FormatError(f"released v2 row {row} has unexpected field {unexpected}")
        if not isinstance(kind, str):
            raise FormatError(f"released v2 row {row} type must be a string")
        safe_int(record.get("time"), f"released v2 row {row} time")
        if "ignorable" in record and record["ignorable"] is not True:
            raise FormatError(f"released v2 row {row} ignorable must be true when present")
    seq = record.get("seq")
    if "sourceEventSeqs" in record:
        seq = count(seq, f"released Session row {row} seq")
        seqs = record["sourceEventSeqs"]
        if not isinstance(seqs, list) or not all(type(entry) is int for entry in seqs):
            record = {**record, "sourceEventSeqs": decode_seq_ranges(seqs, seq)}
    if type(seq) is not int:
        raise FormatError(f"released Session row {row} seq must be an integer")
    return record


def decode_rows(rows: Iterable[Any], version: int) -> Iterator[dict[str, Any]]:
    """Every stored row of ``version`` decoded (:func:`decode_row`); the current format's pass unchanged."""
    if version >= 4:
        yield from rows
        return
    for index, raw in enumerate(rows):
        yield decode_row(raw, version, index)


def _check_packed(row: dict[str, Any], kind: str, index: int) -> None:
    label = f"released {kind} row {index}"
    check_member_keys(row, ("type", "seq0", "time0", "data"), (), label)
    seq0 = count(row["seq0"], f"{label} seq0")
    time0 = safe_int(row["time0"], f"{label} time0")
    data = object_of(row["data"], f"{label} data")
    tool = kind == "tool-call-chunks"
    if tool:
        check_member_keys(data, ("turn", "step", "index", "id", "dt", "args"), ("name",), f"{label} data")
    else:
        check_member_keys(data, ("turn", "step", "index", "dt", "texts"), (), f"{label} data")
    payload = data["args" if tool else "texts"]
    if not isinstance(payload, list) or not payload or not all(isinstance(member, str) for member in payload):
        raise FormatError(f"{label} payload must be a non-empty string array")
    gaps = data["dt"]
    if not isinstance(gaps, list) or len(gaps) != len(payload) - 1:
        raise FormatError(f"{label} dt length must match its payload")
    last = time0
    for gap in gaps:
        last = safe_int(last + safe_int(gap, f"{label} dt member"), f"{label} member time")
    count(data["turn"], f"{label} turn")
    count(data["step"], f"{label} step")
    count(data["index"], f"{label} index")
    if tool and (
        not isinstance(data["id"], str) or not data["id"] or ("name" in data and not isinstance(data["name"], str))
    ):
        raise FormatError(f"{label} id and optional name must be strings")
    count(seq0 + len(payload) - 1, f"{label} final seq")


def row_count(record: dict[str, Any]) -> int:
    """How many events a decoded row holds (a packed row holds one per member)."""
    kind = record.get("type")
    if kind in PACKED_TAGS and "seq0" in record:
        data = record["data"]
        return len(data["args" if kind == "tool-call-chunks" else "texts"])
    return 1


def packed_run_span(record: dict[str, Any]) -> tuple[int, int, int]:
    """``(first seq, member count, last member time)`` of a decoded packed row."""
    data = record["data"]
    members = data["args" if record["type"] == "tool-call-chunks" else "texts"]
    return record["seq0"], len(members), record["time0"] + sum(data["dt"])


def is_packed(record: Any) -> bool:
    return is_object(record) and record.get("type") in PACKED_TAGS and "seq0" in record


def expand_packed(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``assistant/chunk`` events a decoded packed row stands for (dsh's ``expandAssistantChunkRun``)."""
    data = record["data"]
    kind = record["type"]
    members = data["args" if kind == "tool-call-chunks" else "texts"]
    time = record["time0"]
    events = []
    for index, member in enumerate(members):
        if index:
            time += data["dt"][index - 1]
        if kind == "tool-call-chunks":
            chunk: dict[str, Any] = {"type": "tool-call-delta", "index": data["index"], "id": data["id"]}
            if "name" in data:
                chunk["name"] = data["name"]
            chunk["argumentsDelta"] = member
        else:
            delta = "text-delta" if kind == "text-chunks" else "reasoning-delta"
            chunk = {"type": delta, "index": data["index"], "text": member}
        events.append(
            {
                "type": "assistant/chunk",
                "seq": record["seq0"] + index,
                "time": time,
                "data": {"turn": data["turn"], "step": data["step"], "chunk": chunk},
            }
        )
    return events
