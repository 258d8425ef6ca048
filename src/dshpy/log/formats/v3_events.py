"""What dsh's released v3 reader checks in each stored event before the v3 → v4 edge sees it.

dsh's v3 codec admits a row in two steps. Structural rows are checked strictly, as
soon as they are read: a ``request/header`` may not carry the retired ``header.system``
(v3 moved it to ``system/message``), and a ``system/message`` must be a plugin-sourced
system message whose content passes the released payload checks (read as a user
message at seq 0, as dsh does). Then every event envelope is checked
(``assertV3Event``): surface events carry a ``surfaceOp`` with ``startSeq``/``endSeq``
that point back, unique earlier ``sourceEventSeqs`` (never on an assistant message,
which embeds its stream), no empty optional header fields, and tool-result error
metadata only on an error result. That second check is *recoverable*: the first
invalid event ends the readable log, and is refused only if a ``turn/end`` follows it
(a torn tail is dropped, as dsh's reader drops it). :class:`V3Reader` keeps that state.
The messages are dsh's; they carry no edge prefix because dsh raises them in its reader.
"""

from __future__ import annotations

from typing import Any

from dshpy.log.formats.chain import EventRecord, FormatError, MigrationRefusedError
from dshpy.log.formats.payload_semantics import check_payload_semantics
from dshpy.log.formats.released import count, is_object, object_of
from dshpy.log.formats.v2_to_v3 import check_fields

__all__ = ["V3Reader", "check_v3_row"]

_SURFACE = frozenset({"system/message", "user/message", "assistant/message", "tool/result"})


def _record(value: Any, label: str) -> dict[str, Any]:
    return object_of(value, label, suffix=" must be an object")


def _keys(value: dict[str, Any], required: tuple[str, ...], label: str) -> None:
    check_fields(value, required, (), label)


def _check_system(data: dict[str, Any]) -> None:
    """dsh's ``assertSystem``: a plugin-owned system message at a real step."""
    _keys(data, ("turn", "step", "message"), "system/message data")
    for coordinate in ("turn", "step"):
        if count(data[coordinate], coordinate) == 0:
            raise FormatError(f"{coordinate} must be positive")
    message = _record(data["message"], "system message")
    _keys(message, ("id", "role", "source", "content"), "system message")
    if not isinstance(message["id"], str) or not message["id"] or message["role"] != "system":
        raise FormatError("system message requires an id and system role")
    source = _record(message["source"], "system source")
    if source.get("kind") != "plugin" or not isinstance(source.get("plugin"), str) or not source["plugin"]:
        raise FormatError("system message requires plugin source")
    probe = {"type": "user/message", "seq": 0, "time": 0, "data": {**message, "role": "user"}}
    check_payload_semantics(probe, 3)


def check_v3_row(row: Any) -> None:
    """The strict structural check of one stored v3 row (dsh's ``assertV3StructuralRow``)."""
    if not is_object(row):
        return
    if row.get("type") == "request/header":
        data = _record(row.get("data"), "request/header data")
        if "system" in _record(data.get("header"), "request header"):
            raise MigrationRefusedError("format v3 request/header rejects retired header.system")
    elif row.get("type") == "system/message":
        _check_system(_record(row.get("data"), "system/message data"))


def _check_surface(event: EventRecord, subject: str) -> None:
    operation = event.get("surfaceOp")
    if operation is None:
        raise FormatError(f"{subject} requires a surfaceOp marker")
    if operation != "append":
        replace = _record(operation, f"{subject} surfaceOp")
        if len(replace) != 3 or replace.get("op") != "replace" or "startSeq" not in replace or "endSeq" not in replace:
            raise FormatError(f"{subject} requires exact replace fields op/startSeq/endSeq")
        for key in ("startSeq", "endSeq"):
            if count(replace[key], f"{subject} surfaceOp {key}") >= event["seq"]:
                raise FormatError(f"{subject} replacement endpoints must reference earlier events")
    sources = event.get("sourceEventSeqs")
    if event["type"] == "assistant/message" and sources is not None:
        raise FormatError(f"{subject} embeds its stream and cannot carry sourceEventSeqs")
    if sources is not None:
        if not isinstance(sources, list) or not sources:
            raise FormatError(f"{subject} sourceEventSeqs must be a non-empty array")
        seen: set[int] = set()
        for source in sources:
            seq = count(source, f"{subject} sourceEventSeqs member")
            if seq >= event["seq"] or seq in seen:
                raise FormatError(f"{subject} sourceEventSeqs must be unique earlier seqs")
            seen.add(seq)


def _check_canonical(event: EventRecord, subject: str) -> None:
    """dsh's ``assertCanonicalPayload``: one spelling per meaning."""
    if event["type"] == "request/header":
        header = _record(_record(event.get("data"), f"{subject} data").get("header"), f"{subject} header")
        tools, defaults = header.get("tools"), header.get("adapterDefaults")
        if (isinstance(tools, list) and not tools) or (is_object(defaults) and not defaults):
            raise FormatError(f"{subject} empty optional header fields must be omitted")
    if event["type"] != "tool/result":
        return
    data = _record(event.get("data"), f"{subject} data")
    if "error" not in data:
        return
    content = _record(data.get("message"), f"{subject} message").get("content")
    if (
        not isinstance(content, list)
        or len(content) != 1
        or not is_object(content[0])
        or content[0].get("type") != "tool-result"
        or content[0].get("isError") is not True
    ):
        raise FormatError(f"{subject} carries error metadata for a non-error tool result")


def check_v3_event(event: EventRecord) -> None:
    """One v3 event envelope and its canonical payload (dsh's ``assertV3Event``)."""
    subject = f"format v3 {event['type']} at seq {event['seq']}"
    if event["type"] in _SURFACE:
        _check_surface(event, subject)
    check_v3_row(event)
    _check_canonical(event, subject)


class V3Reader:
    """dsh's recoverable v3 event admission: the first invalid event ends the log, a later turn end refuses it."""

    def __init__(self) -> None:
        self.issue: FormatError | None = None

    def admit(self, event: EventRecord) -> bool:
        """Whether ``event`` is part of the readable log; raises the held issue when a turn end follows it."""
        if self.issue is None:
            try:
                check_v3_event(event)
            except FormatError as error:
                self.issue = error
        if self.issue is None:
            return True
        if event["type"] == "turn/end":
            raise MigrationRefusedError(str(self.issue)) from self.issue
        return False
