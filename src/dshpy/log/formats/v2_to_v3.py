"""dsh's v2 → v3 edge: system prompts become a protected surface head; PTC names; canonical envelopes.

Up to v2 the system prompt rode in every ``request/header`` (``header.system``); v3
makes it part of the model-visible surface (dsh-v4 §1.2, §3.8):

* at the log's first ``step/start`` an empty ``system/message`` is appended,
  reserving surface node 0 (the protected head);
* whenever the prompt text changes, a ``system/message`` replaces the current head
  (``surfaceOp {op: replace, startSeq: h, endSeq: h}``, ``sourceEventSeqs: [h]``),
  written just before the ``request/header`` that changed it;
* ids are ``v2-to-v3-system-<sha256 of ["session-format-v2-to-v3", sid, anchorSeq,
  anchorType]>``; the source ``{kind: plugin, plugin: @deepseek-ai/dsh-system-prompt}``
  (the next edge turns it into ``system-prompt``).

A surface event before the first step cannot get a head without changing the
chronology, so such a log is refused, as is a prompt change outside a step. The
edge also renames ``surfaceOp`` ``start``/``end`` to ``startSeq``/``endSeq``, drops
empty ``tools``/``adapterDefaults`` from request headers, and renames code mode to
PTC (``tool/code-dispatch*`` → ``tool/ptc-dispatch*``, preset ``code`` → ``ptc``,
message source plugin ``tools-code-mode`` → ``tools-ptc``). Every event is checked
against the released-v2 inventory before it is converted.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from typing import Any

from dshpy.log.formats.chain import EventRecord, FormatError, HeaderRecord, Migration, MigrationRefusedError
from dshpy.log.formats.payload_semantics import check_payload_semantics
from dshpy.log.formats.physical import decode_header, physical_header
from dshpy.log.formats.references import ReferenceRules, remap_references
from dshpy.log.formats.released import (
    RELEASED_V2_EVENT_DISPOSITIONS,
    check_member_keys,
    count,
    is_object,
    js,
    object_of,
    safe_int,
)

__all__ = ["SURFACE_TYPES", "V2_TO_V3", "check_fields"]

NAME = "@deepseek-ai/dsh-session-format-v2-to-v3"
SURFACE_TYPES = frozenset({"system/message", "user/message", "assistant/message", "tool/result"})
_FEEDBACK = frozenset({"feedback/message-put", "feedback/message-delete"})
_SOURCE_KINDS = frozenset(
    {
        "user",
        "plugin",
        "model",
        "tool",
        "agent-instructions",
        "session-reference",
        "team-message",
        "goal",
        "skill-invocation",
        "skill-catalog",
        "coordinator",
        "subagent-report",
        "subagent-settled",
        "webhook",
        "agent-message",
    }
)
_CONTENT_KINDS = frozenset({"text", "reasoning", "image", "file", "tool-call", "tool-result"})
_SYSTEM_SOURCE = "@deepseek-ai/dsh-system-prompt"


def check_fields(value: dict[str, Any], required: Iterable[str], optional: Iterable[str], label: str) -> None:
    """v2/v3 wording: a missing field is reported before an unexpected one."""
    required, optional = tuple(required), tuple(optional)
    missing = next((key for key in required if key not in value), None)
    if missing is not None:
        raise FormatError(f"{label} lacks required field {missing}")
    unexpected = next((key for key in value if key not in required and key not in optional), None)
    if unexpected is not None:
        raise FormatError(f"{label} has unexpected field {unexpected}")


def _migrate_header(header: HeaderRecord) -> HeaderRecord:
    decode_header(header, 2)
    migrated = physical_header(header, 3)
    if header.get("agentPreset") == "code":
        migrated["agentPreset"] = "ptc"
    return migrated


class _Stage:
    def __init__(self, source: HeaderRecord) -> None:
        self.header = source
        self.seeded = bool(source["isSeeded"])
        self.mapping: list[int] = []
        self.original_ids: set[Any] = set()
        self.generated_ids: set[str] = set()
        self.target_seq = 0
        self.source_cut: int | None = None if self.seeded else 0
        self.target_cut: int | None = None if self.seeded else 0
        self.foreign_delivery: int | None = None
        self.step: dict[str, Any] | None = None
        self.head: int | None = None
        self.prompt = ""
        self.out: list[EventRecord] = []

    def event(self, event: EventRecord) -> None:
        if event["seq"] != len(self.mapping):
            raise FormatError("format v2 source events must be dense")
        _check_event(event)
        self.observe_ids(event)
        source = event
        data = object_of(event["data"], event["type"], suffix=" must be an object")
        if event["type"] == "request/header":
            header = dict(object_of(data.get("header"), "request header", suffix=" must be an object"))
            system = header.pop("system", None)
            prompt = system if isinstance(system, str) else ""
            if prompt != self.prompt:
                self.emit_system(prompt, event)
            source = {**event, "data": {**data, "header": header}}
        if event["type"] in SURFACE_TYPES and self.head is None:
            raise MigrationRefusedError(
                "format v2 surface before first step cannot acquire a system head without changing chronology"
            )
        if event["type"] == "session/end-seed" and data.get("inherited") is True:
            if not self.seeded:
                raise FormatError("format v2 unseeded Session contains an inherited end-seed marker")
            self.source_cut = event["seq"]
            self.target_cut = self.target_seq
        if event["type"] == "session-log-deepseek/delivery-accepted":
            if data.get("sessionFormatVersion") == 3:
                raise FormatError("format v2 delivery marker claims target format v3")
            if data.get("sessionFormatVersion") == 2 and data.get("sessionId") != self.header["id"]:
                self.foreign_delivery = event["seq"]
        target = _remap(source, self.target_seq, self.mapping)
        self.mapping.append(self.target_seq)
        self.target_seq += 1
        self.out.append(_canonical(_rename_ptc(target)))
        if event["type"] == "step/start":
            self.step = {"turn": data["turn"], "step": data["step"]}
            if self.head is None:
                self.emit_system("", event)
        elif event["type"] in ("step/end", "turn/end"):
            self.step = None

    def observe_ids(self, event: EventRecord) -> None:
        data = event["data"]
        kind = event["type"]
        if kind == "user/message":
            messages: list[Any] = [data]
        elif kind in ("assistant/message", "tool/result"):
            messages = [object_of(data.get("message"), "message", suffix=" must be an object")]
        elif kind == "agent/inbox/spliced":
            messages = data["inserted"]
        elif kind == "session/title-llm-request":
            messages = data["messages"]
        else:
            messages = []
        for message in messages:
            message_id = message.get("id")
            if message_id in self.generated_ids:
                raise MigrationRefusedError("source message id collides with a generated system message id")
            if isinstance(message_id, str):
                self.original_ids.add(message_id)

    def emit_system(self, prompt: str, anchor: EventRecord) -> None:
        if self.step is None:
            raise MigrationRefusedError(
                "format v2 changed request prompt outside an open step cannot retain source chronology"
            )
        identity = js(["session-format-v2-to-v3", self.header["id"], anchor["seq"], anchor["type"]])
        message_id = "v2-to-v3-system-" + hashlib.sha256(identity.encode("utf-8", "surrogatepass")).hexdigest()
        if message_id in self.original_ids or message_id in self.generated_ids:
            raise MigrationRefusedError("generated system message id collides with an existing message id")
        self.generated_ids.add(message_id)
        seq = self.target_seq
        self.target_seq += 1
        event: EventRecord = {
            "type": "system/message",
            "seq": seq,
            "time": anchor["time"],
            "data": {
                **self.step,
                "message": {
                    "id": message_id,
                    "role": "system",
                    "source": {"kind": "plugin", "plugin": _SYSTEM_SOURCE},
                    "content": [] if prompt == "" else [{"type": "text", "text": prompt}],
                },
            },
        }
        if self.head is None:
            event["surfaceOp"] = "append"
        else:
            event["surfaceOp"] = {"op": "replace", "start": self.head, "end": self.head}
            event["sourceEventSeqs"] = [self.head]
        self.out.append(_canonical(event))
        self.head = seq
        self.prompt = prompt

    def finish(self) -> None:
        if self.source_cut is None:
            raise FormatError("format v2 inherited end-seed marker must be a non-negative safe integer")
        if self.foreign_delivery is not None and (
            "parentSession" not in self.header or self.foreign_delivery >= self.source_cut
        ):
            raise FormatError("current-generation delivery marker names the wrong Session")


def _check_event(event: EventRecord) -> None:
    """The event is one released v2 admits, with exactly its members (dsh's ``assertEvent(event, 2)``)."""
    kind = event["type"]
    disposition = RELEASED_V2_EVENT_DISPOSITIONS.get(kind)
    feedback = kind in _FEEDBACK
    if disposition is None and not feedback:
        raise MigrationRefusedError(f"format v2 to v3 cannot safely transform unclassified event {kind}")
    surface = kind in SURFACE_TYPES
    check_fields(
        event,
        ("type", "seq", "time", "data"),
        ("ignorable", "sourceEventSeqs", "surfaceOp") if surface else ("ignorable",),
        kind,
    )
    count(event["seq"], "event seq")
    safe_int(event["time"], "event time")
    if "ignorable" in event and event["ignorable"] is not True:
        raise FormatError("ignorable must be true")
    if surface:
        _check_surface(event)
        if "surfaceOp" not in event:
            raise FormatError(f"{kind} requires surfaceOp")
    data = object_of(event["data"], f"{kind} data", suffix=" must be an object")
    if feedback:
        _check_feedback(kind, data)
        return
    assert disposition is not None
    check_fields(data, disposition.required, disposition.optional, f"{kind} data")
    _check_content(event, data)
    if kind != "assistant/attempt":
        check_payload_semantics(event, 2)
    if kind in ("assistant/message", "assistant/attempt"):
        for coordinate in ("turn", "step"):
            if count(data[coordinate], coordinate) == 0:
                raise FormatError(f"{coordinate} must be positive")
    if kind == "session/end-seed" and "inherited" in data and data["inherited"] is not True:
        raise FormatError("session/end-seed inherited must be true")
    if kind == "user/message":
        _check_source(data)
    if kind in ("assistant/message", "tool/result"):
        _check_source(object_of(data["message"], "message", suffix=" must be an object"))
    if kind == "tool/result" and is_object(data.get("error")) and data["error"].get("code") == "TOOL_NOT_STARTED":
        message = object_of(data["message"], "tool result message", suffix=" must be an object")
        call = object_of(message.get("source"), "tool result source", suffix=" must be an object").get("callId")
        if not _repair_identity(message.get("id"), call):
            raise FormatError("TOOL_NOT_STARTED repair requires its canonical historical message id")
    if kind in ("agent/inbox/spliced", "session/title-llm-request"):
        for message in data["inserted" if kind == "agent/inbox/spliced" else "messages"]:
            _check_source(message)


def _check_feedback(kind: str, data: dict[str, Any]) -> None:
    """A message-feedback record (dsh's ``assertFeedback``): who rated which message how, and when."""
    put = kind == "feedback/message-put"
    check_fields(data, ("sessionId", "item") if put else ("sessionId", "messageId"), (), kind)
    if not isinstance(data["sessionId"], str):
        raise FormatError("feedback sessionId must be a string")
    if not put:
        if not isinstance(data["messageId"], str):
            raise FormatError("feedback messageId must be a string")
        return
    item = object_of(data["item"], "feedback item", suffix=" must be an object")
    check_fields(item, ("messageId", "rating", "version", "createdAt", "updatedAt"), ("note",), "feedback item")
    for key in ("messageId", "version"):
        if not isinstance(item[key], str):
            raise FormatError(f"feedback {key} must be a string")
    if item["rating"] not in ("positive", "negative"):
        raise FormatError("invalid feedback rating")
    if "note" in item and not isinstance(item["note"], str):
        raise FormatError("feedback note must be a string")
    count(item["createdAt"], "feedback createdAt")
    count(item["updatedAt"], "feedback updatedAt")


def _check_surface(event: EventRecord) -> None:
    kind, seq = event["type"], event["seq"]
    sources = event.get("sourceEventSeqs")
    if kind == "assistant/message" and sources is not None:
        raise FormatError(f"assistant/message {seq} retains obsolete chunk references")
    if sources is not None:
        if not isinstance(sources, list):
            raise FormatError(f"{kind} {seq} sourceEventSeqs must be an array")
        seen: set[int] = set()
        for source in sources:
            current = count(source, f"{kind} {seq} sourceEventSeqs member")
            if current >= seq or current in seen:
                raise FormatError(f"{kind} {seq} sourceEventSeqs must be unique earlier seqs")
            seen.add(current)
        if not sources:
            raise FormatError(f"{kind} {seq} sourceEventSeqs must be non-empty")
    operation = event.get("surfaceOp")
    if operation is None or operation == "append":
        return
    replacement = object_of(operation, f"{kind} {seq} surfaceOp")
    check_member_keys(replacement, ("op", "start", "end"), (), f"{kind} {seq} surfaceOp")
    if replacement["op"] != "replace":
        raise FormatError(f"{kind} {seq} surfaceOp must replace")
    start = count(replacement["start"], f"{kind} {seq} surface start")
    end = count(replacement["end"], f"{kind} {seq} surface end")
    if start >= seq or end >= seq:
        raise FormatError(f"{kind} {seq} has an invalid surface replacement")


def _check_source(message: Any) -> None:
    source = object_of(
        message.get("source") if is_object(message) else None, "message source", suffix=" must be an object"
    )
    if not isinstance(source.get("kind"), str) or source["kind"] not in _SOURCE_KINDS:
        raise MigrationRefusedError("cannot safely transform unclassified message source")
    if source["kind"] == "agent-message":
        check_fields(source, ("kind", "form", "senderSessionId"), (), "agent-message source")
        if source["form"] != "relay" or not isinstance(source["senderSessionId"], str) or not source["senderSessionId"]:
            raise FormatError("agent-message source requires relay form and senderSessionId")


def _check_content(event: EventRecord, data: dict[str, Any]) -> None:
    kind = event["type"]
    label = f"format v2 {kind} at seq {event['seq']} data"
    if kind in ("user/message", "tool/code-dispatch"):
        _check_blocks(data["content"], f"{label}.content")
    elif kind in ("assistant/message", "tool/result", "team/message/queued"):
        message = object_of(data["message"], f"{label}.message", suffix=" must be an object")
        _check_blocks(message.get("content"), f"{label}.message.content")
    elif kind in ("agent/inbox/spliced", "session/title-llm-request"):
        member = "inserted" if kind == "agent/inbox/spliced" else "messages"
        messages = data[member]
        if not isinstance(messages, list):
            raise FormatError(f"{label}.{member}: content must be an array")
        for index, value in enumerate(messages):
            path = f"{label}.{member}[{index}]"
            _check_blocks(object_of(value, path, suffix=" must be an object").get("content"), f"{path}.content")
    elif kind == "compaction/summary":
        _check_blocks(data["summary"], f"{label}.summary")
        if "rawOutput" in data:
            _check_blocks(data["rawOutput"], f"{label}.rawOutput")
    if kind in ("assistant/message", "assistant/attempt"):
        stream = data["stream"]
        if not isinstance(stream, list):
            raise FormatError(f"{label}.stream: content must be an array")
        for index, value in enumerate(stream):
            path = f"{label}.stream[{index}]"
            entry = object_of(value, path, suffix=" must be an object")
            if entry.get("type") != "chunk":
                continue
            chunk = object_of(entry.get("chunk"), f"{path}.chunk", suffix=" must be an object")
            if chunk.get("type") == "block-end":
                _check_block(chunk.get("block"), f"{path}.chunk.block")
            if chunk.get("type") == "block-start":
                _check_kind(chunk.get("blockType"), f"{path}.chunk.blockType")


def _check_kind(kind: Any, label: str) -> None:
    if not isinstance(kind, str) or kind not in _CONTENT_KINDS:
        raise MigrationRefusedError(f"{label}: cannot safely transform unclassified message content kind {js(kind)}")


def _check_blocks(content: Any, label: str) -> None:
    if not isinstance(content, list):
        raise FormatError(f"{label}: content must be an array")
    for index, block in enumerate(content):
        _check_block(block, f"{label}[{index}]")


def _check_block(value: Any, label: str) -> None:
    block = object_of(value, label, suffix=" must be an object")
    _check_kind(block.get("type"), label)
    if block["type"] == "tool-result":
        if not isinstance(block.get("content"), list):
            raise FormatError(f'{label}.content: invalid message content kind "tool-result": content must be an array')
        _check_blocks(block["content"], f"{label}.content")


def _repair_identity(message_id: Any, call_id: Any) -> bool:
    if not isinstance(call_id, str) or not isinstance(message_id, str):
        return False
    prefix = f"interrupted-tool-result-{call_id}-"
    suffix = message_id.removeprefix(prefix)
    return suffix != message_id and suffix.isascii() and suffix.isdigit() and (suffix == "0" or suffix[0] != "0")


_REFERENCES = ReferenceRules(
    span_keys=("start", "end"),
    offload_targets=False,
    reference="source event reference",
    earlier="reference must name an earlier source event",
    array="sequence references must be an array",
    container="%s must be an object",
)
"""v2's references, in dsh's v2→v3 wording (``remapEvent``)."""


def _remap(event: EventRecord, seq: int, mapping: list[int]) -> EventRecord:
    return remap_references(event, seq, mapping, _REFERENCES)


def _rename_ptc(event: EventRecord) -> EventRecord:
    kind = event["type"]
    data = event["data"]
    if kind == "agent-preset/selected":
        return {**event, "data": {**data, "agentPreset": "ptc"}} if data.get("agentPreset") == "code" else event
    if kind == "tool/code-dispatch-start":
        return {**event, "type": "tool/ptc-dispatch-start"}
    if kind == "tool/code-dispatch":
        return {**event, "type": "tool/ptc-dispatch"}
    if kind == "user/message":
        renamed = _rename_source(data)
        return event if renamed is data else {**event, "data": renamed}
    if kind in ("agent/inbox/spliced", "session/title-llm-request"):
        member = "inserted" if kind == "agent/inbox/spliced" else "messages"
        messages = data[member]
        renamed_all = [_rename_source(message) for message in messages]
        if all(new is old for new, old in zip(renamed_all, messages, strict=True)):
            return event
        return {**event, "data": {**data, member: renamed_all}}
    return event


def _rename_source(message: dict[str, Any]) -> dict[str, Any]:
    source = message["source"]
    if source.get("kind") != "plugin" or source.get("plugin") != "tools-code-mode":
        return message
    return {**message, "source": {**source, "plugin": "tools-ptc"}}


def _canonical(event: EventRecord) -> EventRecord:
    """``start``/``end`` → ``startSeq``/``endSeq``; empty optional request-header fields dropped."""
    target = event
    operation = event.get("surfaceOp")
    if operation is not None and operation != "append":
        label = f"format v2 {event['type']} at seq {event['seq']}"
        if (
            not is_object(operation)
            or len(operation) != 3
            or operation.get("op") != "replace"
            or "start" not in operation
            or "end" not in operation
        ):
            raise FormatError(f"{label} requires exact replace fields op/start/end")
        target = {
            **event,
            "surfaceOp": {
                "op": "replace",
                "startSeq": count(operation["start"], f"{label} replace start"),
                "endSeq": count(operation["end"], f"{label} replace end"),
            },
        }
    if event["type"] == "request/header":
        data = event["data"]
        header = data["header"]
        empty = [
            key
            for key, value in header.items()
            if (key == "tools" and isinstance(value, list) and not value)
            or (key == "adapterDefaults" and is_object(value) and not value)
        ]
        if empty:
            canonical = {key: value for key, value in header.items() if key not in empty}
            target = {**target, "data": {**data, "header": canonical}}
    return target


def _migrate(events: Iterable[EventRecord], source: HeaderRecord, _target: HeaderRecord) -> Iterator[EventRecord]:
    stage = _Stage(source)
    for raw in events:
        stage.event(raw)
        yield from stage.out
        stage.out.clear()
    stage.finish()


V2_TO_V3 = Migration(NAME, 2, 3, _migrate_header, migrate_stream=_migrate)
"""dsh's system-prompt promotion edge v2 → v3."""
