"""dsh's v3 → v4 edge: producer-owned message sources, first-class tool results, child catalog facts.

v4 attributes every message to the producer that owns it instead of to a plugin
name (dsh-v4 §1.2, §3.3):

* a ``{kind: plugin, plugin: P}`` source becomes ``{kind: K}`` (other fields kept):
  ``compact`` → ``compact-checkpoint``, ``tools-code-mode``/``tools-ptc`` →
  ``ptc-mode``, ``dsh-compaction-basic`` → ``compact-basic``, the system-prompt
  plugin → ``system-prompt`` on a system message and ``runtime-context`` elsewhere,
  25 first-party names unchanged, anything else ``plugin:<P>``;
* a ``tool/result``'s v3 message (role ``user``, one ``tool-result`` wrapper block)
  is lifted to ``{role: tool, source, toolCallId, content, isError?, id}``; fields
  the lift has no place for are kept as ``plugin:message:<k>`` / ``plugin:result:<k>``;
* content blocks and stream ``blockType`` values v3 did not define become
  ``plugin:<type>``, and an ignorable event type v3 did not know ``plugin:<type>``;
* a legacy turn left open before the next queued prompt is closed with
  ``turn/end {interrupted}`` (seqs shift, references follow);
* at the end, one ``subagent/catalog`` fact is appended per historical child the
  parent's catalog lacks (:mod:`dshpy.log.formats.children`).

Refused: a v3 tool definition with ``deferLoading`` (v4-only), a delivery marker
claiming v4, an event type v3 does not know that is not ignorable.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from dshpy.log.formats.chain import EventRecord, FormatError, HeaderRecord, Migration, MigrationRefusedError
from dshpy.log.formats.children import ChildSource, catalog_fact, check_catalog_fact, checked_source, subject
from dshpy.log.formats.physical import decode_header, physical_header
from dshpy.log.formats.references import ReferenceRules, remap_references
from dshpy.log.formats.released import count, is_object, js
from dshpy.log.formats.v3_events import V3Reader, check_v3_row

__all__ = ["RELEASED_V3_EVENT_TYPES", "v3_to_v4"]

NAME = "@deepseek-ai/dsh-session-format-v3-to-v4"

_RENAMED_PRODUCERS = {
    "compact": "compact-checkpoint",
    "tools-code-mode": "ptc-mode",
    "tools-ptc": "ptc-mode",
    "dsh-compaction-basic": "compact-basic",
    "@deepseek-ai/dsh-system-prompt": "runtime-context",
}
_SAME_NAME_PRODUCERS = frozenset(
    {
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
        "model-selection",
        "plan-mode",
        "time-context",
        "tmux-context",
        "user-approval",
        "repeat-tool-reminder",
        "tool-cordis",
        "cordis-host-runner",
        "tool-goal",
        "tool-jobs",
        "hooks-codex",
        "hooks-claude-code",
        "schedule",
        "dsh-session-title-llm",
    }
)
_V3_BLOCK_TYPES = frozenset({"text", "reasoning", "image", "file", "tool-call", "tool-result"})
_WRAPPER_FIELDS = frozenset({"type", "toolCallId", "content", "isError"})
_MESSAGE_FIELDS = frozenset({"id", "role", "source", "content"})

RELEASED_V3_EVENT_TYPES = frozenset(
    {
        "agent-preset/selected",
        "agent/inbox/spliced",
        "approval/asked",
        "approval/decided",
        "approval/policy",
        "assistant/attempt",
        "assistant/message",
        "command/done",
        "command/run",
        "compaction/end",
        "compaction/prune",
        "compaction/start",
        "compaction/summary",
        "deliverables/presented",
        "feedback/message-delete",
        "feedback/message-put",
        "feedback/record",
        "goal/change",
        "hook/invoked",
        "hook/result",
        "image/offload",
        "llm/retry",
        "llm/retry-started",
        "model/selection",
        "permission/preset",
        "plan/mode",
        "request/context",
        "request/header",
        "sandbox/mode",
        "schedule/change",
        "session-log-deepseek/delivery-accepted",
        "session/end-seed",
        "session/title",
        "session/title-llm-request",
        "step/end",
        "step/start",
        "subagent/catalog",
        "subagent/descriptor",
        "subagent/model-selection-policy",
        "system/message",
        "team/member",
        "team/message/delivered",
        "team/message/queued",
        "team/task",
        "todo/write",
        "tool-workflow/agent-end",
        "tool-workflow/agent-start",
        "tool-workflow/run-end",
        "tool-workflow/run-start",
        "tool/call",
        "tool/ptc-dispatch",
        "tool/ptc-dispatch-start",
        "tool/result",
        "turn/end",
        "turn/start",
        "user/message",
        "web/deepseek-search-llm-request",
        "workspace/changes",
    }
)
"""Event types the released v3 reader knows (independent of what this build writes)."""


def map_messages(event: EventRecord, transform: Callable[[dict[str, Any]], dict[str, Any]]) -> EventRecord:
    """``event`` with ``transform`` applied to every message its payload carries (unchanged ones shared)."""
    data = event.get("data")
    if not is_object(data):
        return event
    kind = event["type"]
    if kind == "user/message":
        message = transform(data)
        return event if message is data else {**event, "data": message}
    if kind in ("developer/message", "system/message", "assistant/message", "tool/result"):
        if not is_object(data.get("message")):
            raise FormatError(f"{kind} requires a message")
        message = transform(data["message"])
        return event if message is data["message"] else {**event, "data": {**data, "message": message}}
    member = (
        "inserted" if kind == "agent/inbox/spliced" else "messages" if kind == "session/title-llm-request" else None
    )
    if member is None:
        return event
    messages = data.get(member)
    if not isinstance(messages, list):
        raise FormatError(f"{kind} requires message array")
    mapped = []
    for message in messages:
        if not is_object(message):
            raise FormatError(f"{kind} requires message objects")
        mapped.append(transform(message))
    if all(new is old for new, old in zip(mapped, messages, strict=True)):
        return event
    return {**event, "data": {**data, member: mapped}}


def _producer(plugin: str, role: Any) -> str:
    if plugin == "@deepseek-ai/dsh-system-prompt" and role == "system":
        return "system-prompt"
    if plugin in _RENAMED_PRODUCERS:
        return _RENAMED_PRODUCERS[plugin]
    if plugin in _SAME_NAME_PRODUCERS:
        return plugin
    return f"plugin:{plugin}"


def _source(source: dict[str, Any], seq: int, role: Any) -> dict[str, Any]:
    kind = source.get("kind")
    if not isinstance(kind, str) or not kind:
        raise FormatError(f"message source at seq {seq} requires a nonempty kind")
    if kind != "plugin":
        return source
    plugin = source.get("plugin")
    if not isinstance(plugin, str):
        raise FormatError(f"plugin source at seq {seq} is not canonical: plugin requires a string")
    producer = _producer(plugin, role)
    if len(source) == 2:
        return {"kind": producer}
    return {key: (producer if key == "kind" else value) for key, value in source.items() if key != "plugin"}


def _extension_fields(value: dict[str, Any], known: frozenset[str], owner: str) -> dict[str, Any]:
    return {f"plugin:{owner}:{key}": field for key, field in value.items() if key not in known}


def _lift_tool_result(event: EventRecord) -> EventRecord:
    if event["type"] != "tool/result" or not is_object(event.get("data")):
        return event
    data = event["data"]
    message = data.get("message")
    if not is_object(message) or message.get("role") != "user":
        return event
    label = f"format v3 {event['type']} at seq {event['seq']}"
    source = message.get("source")
    call_id = source.get("callId") if is_object(source) else None
    content = message.get("content")
    wrapper = content[0] if isinstance(content, list) and len(content) == 1 and is_object(content[0]) else None
    message_id = message.get("id")
    if (
        not isinstance(message_id, str)
        or not message_id
        or not is_object(source)
        or source.get("kind") != "tool"
        or not isinstance(call_id, str)
        or not call_id
        or wrapper is None
        or wrapper.get("type") != "tool-result"
        or wrapper.get("toolCallId") != call_id
    ):
        raise FormatError(f"{label} requires exactly one tool-result wrapper matching its tool source")
    is_error = wrapper.get("isError")
    if "isError" in wrapper and type(is_error) is not bool:
        raise FormatError(f"{label} tool-result isError must be boolean")
    inner = wrapper.get("content")
    if not isinstance(inner, list):
        raise FormatError(f"{label} tool-result content must be an array")
    if any(is_object(block) and block.get("type") == "tool-result" for block in inner):
        raise MigrationRefusedError(f"{label} contains a nested tool-result unsupported by this converter")
    lifted: dict[str, Any] = {"role": "tool", "source": source, "toolCallId": call_id, "content": inner}
    if "isError" in wrapper:
        lifted["isError"] = is_error
    lifted["id"] = message_id
    lifted.update(_extension_fields(message, _MESSAGE_FIELDS, "message"))
    lifted.update(_extension_fields(wrapper, _WRAPPER_FIELDS, "result"))
    return {**event, "data": {**data, "message": lifted}}


def _block(value: Any, label: str) -> Any:
    if not is_object(value) or not isinstance(value.get("type"), str):
        raise FormatError(f"{label} requires content blocks with string type tags")
    return value if value["type"] in _V3_BLOCK_TYPES else {**value, "type": f"plugin:{value['type']}"}


def _content(value: Any, label: str) -> Any:
    if not isinstance(value, list):
        raise FormatError(f"{label} content must be an array")
    mapped = [_block(block, f"{label}[{index}]") for index, block in enumerate(value)]
    return value if all(new is old for new, old in zip(mapped, value, strict=True)) else mapped


def _message_content(message: dict[str, Any], label: str) -> dict[str, Any]:
    content = _content(message.get("content"), label)
    return message if content is message.get("content") else {**message, "content": content}


def _chunk(value: Any, label: str) -> Any:
    if not is_object(value):
        return value
    if value.get("type") == "block-end":
        block = _block(value.get("block"), f"{label}.block")
        return value if block is value.get("block") else {**value, "block": block}
    if value.get("type") != "block-start":
        return value
    original = value.get("blockType")
    if not isinstance(original, str):
        raise FormatError(f"{label} blockType must be a string")
    return value if original in _V3_BLOCK_TYPES else {**value, "blockType": f"plugin:{original}"}


def _event_content(event: EventRecord) -> EventRecord:
    """Namespace v3-undefined content tags (dsh's ``migrateV3EventContent``)."""
    kind = event["type"]
    label = f"format v3 {kind} at seq {event['seq']}"
    mapped = map_messages(event, lambda message: _message_content(message, label))
    if not is_object(mapped.get("data")):
        return mapped
    data = original = mapped["data"]
    if kind == "compaction/summary":
        data = _with_content(data, "summary", label)
        if "rawOutput" in data:
            data = _with_content(data, "rawOutput", label)
    elif kind == "tool/ptc-dispatch":
        data = _with_content(data, "content", label)
    elif kind == "team/message/queued" and is_object(data.get("message")):
        message = _message_content(data["message"], label)
        if message is not data["message"]:
            data = {**data, "message": message}
    if kind == "request/header" and is_object(data.get("header")):
        tools = data["header"].get("tools")
        if isinstance(tools, list):
            for index, tool in enumerate(tools):
                if is_object(tool) and "deferLoading" in tool:
                    raise MigrationRefusedError(
                        f"{label}.header.tools[{index}] contains deferLoading, which is only defined in V4"
                    )
    if kind in ("assistant/message", "assistant/attempt") and isinstance(data.get("stream"), list):
        stream = data["stream"]
        converted = [
            entry
            if not is_object(entry) or entry.get("type") != "chunk"
            else _with_chunk(entry, _chunk(entry.get("chunk"), f"{label}.stream[{index}]"))
            for index, entry in enumerate(stream)
        ]
        if any(new is not old for new, old in zip(converted, stream, strict=True)):
            data = {**data, "stream": converted}
    return mapped if data is original else {**mapped, "data": data}


def _with_content(data: dict[str, Any], key: str, label: str) -> dict[str, Any]:
    content = _content(data.get(key), f"{label}.{key}")
    return data if content is data.get(key) else {**data, key: content}


def _with_chunk(entry: dict[str, Any], chunk: Any) -> dict[str, Any]:
    return entry if chunk is entry.get("chunk") else {**entry, "chunk": chunk}


_REFERENCES = ReferenceRules(
    span_keys=("startSeq", "endSeq"),
    offload_targets=True,
    reference="V3 source event reference",
    earlier="V3 reference must name an earlier source event",
    array="V3 event references must be an array",
    container="V3 event reference container must be an object",
)
"""v3's references, in dsh's v3→v4 wording (``remapV3References``)."""


def _remap(event: EventRecord, seq: int, mapping: list[int]) -> EventRecord:
    """Renumber an event after inserted closers; an event that did not move is returned as it is."""
    return event if seq == event["seq"] else remap_references(event, seq, mapping, _REFERENCES)


def _delivery_owner(event: EventRecord) -> str | None:
    """The session id an active-generation delivery marker names (dsh's ``validateDeliveryAccepted(event, 3)``)."""
    if event["type"] != "session-log-deepseek/delivery-accepted":
        return None
    data = event.get("data")
    if not is_object(data):
        raise FormatError("delivery-accepted data must be an object")
    if count(data.get("sessionFormatVersion", 0), "delivery sessionFormatVersion") != 3:
        return None
    if count(data.get("throughSeq"), "delivery throughSeq") >= event["seq"]:
        raise FormatError("delivery throughSeq must precede its marker")
    owner = data.get("sessionId")
    if not isinstance(owner, str) or not owner:
        raise FormatError("delivery requires a nonempty Session id")
    return owner


class _Stage:
    def __init__(self, source: HeaderRecord, children: Sequence[ChildSource]) -> None:
        self.header = source
        checked = [checked_source(child) for child in children]
        self.candidates = sorted(checked, key=lambda c: (c["childCreatedAt"], c["childId"]))
        self.cut: int | None = None if source["isSeeded"] else 0
        self.source_cut = self.cut
        self.catalogs: list[Any] = []
        self.mapping: list[int] = []
        self.turn: Any = None
        self.step_open = False
        self.next_turn_spliced = False
        self.next_seq = 0
        self.time: Any = source["createdAt"]
        self.foreign_delivery: int | None = None
        self.out: list[EventRecord] = []
        self.reader = V3Reader()

    def event(self, event: EventRecord) -> None:
        try:
            check_v3_row(event)
        except FormatError as error:  # dsh's reader refuses these rows at once, in its own words
            raise MigrationRefusedError(str(error)) from error
        if not self.reader.admit(event):
            return
        if event["seq"] != len(self.mapping):
            raise FormatError("V3 source events must be dense")
        interrupted = self.restart(event)
        if interrupted is not None:
            self.out.append(
                {
                    "type": "turn/end",
                    "seq": self.next_seq,
                    "time": event["time"],
                    "data": {"turn": interrupted, "reason": {"kind": "interrupted"}},
                }
            )
            self.next_seq += 1
        target_seq = self.next_seq
        self.next_seq += 1
        self.time = event["time"]
        data = event.get("data")
        if event["type"] == "session/end-seed" and is_object(data) and data.get("inherited") is True:
            if not self.header["isSeeded"]:
                raise FormatError("unseeded format v3 Session contains an inherited end-seed marker")
            self.source_cut = event["seq"]
            self.cut = target_seq
            self.catalogs.clear()
        elif event["type"] == "subagent/catalog":
            self.catalogs.append(data)
        owner = _delivery_owner(event)
        if event["type"] == "session-log-deepseek/delivery-accepted" and is_object(data):
            if data.get("sessionFormatVersion") == 4:
                raise MigrationRefusedError("format v3 delivery marker claims target format v4")
            if owner is not None and owner != self.header["id"]:
                self.foreign_delivery = event["seq"]
        if event.get("ignorable") is True and event["type"] not in RELEASED_V3_EVENT_TYPES:
            self.mapping.append(target_seq)
            self.out.append({**event, "type": f"plugin:{event['type']}", "seq": target_seq, "ignorable": True})
            return
        if event["type"] not in RELEASED_V3_EVENT_TYPES:
            raise MigrationRefusedError(
                f"format v3 contains unknown event type {js(event['type'])} at seq {event['seq']}"
            )
        remapped = _remap(event, target_seq, self.mapping)
        self.mapping.append(target_seq)

        def attribute(message: dict[str, Any]) -> dict[str, Any]:
            source = message.get("source")
            if not is_object(source):
                return message
            converted = _source(source, event["seq"], message.get("role"))
            return message if converted is source else {**message, "source": converted}

        self.out.append(_event_content(_lift_tool_result(map_messages(remapped, attribute))))

    def restart(self, event: EventRecord) -> Any:
        data = event.get("data")
        kind = event["type"]
        interrupted = (
            self.turn
            if kind == "turn/start"
            and self.turn is not None
            and not self.step_open
            and self.next_turn_spliced
            and is_object(data)
            and data.get("turn") == self.turn + 1
            else None
        )
        inserted = data.get("inserted") if is_object(data) else None
        self.next_turn_spliced = (
            kind == "agent/inbox/spliced"
            and is_object(data)
            and data.get("target") == "next-turn"
            and isinstance(inserted, list)
            and len(inserted) > 0
        )
        if kind == "turn/start" and is_object(data) and type(data.get("turn")) in (int, float):
            self.turn = data["turn"]
        elif kind == "turn/end":
            self.turn = None
        elif kind == "step/start":
            self.step_open = True
        elif kind == "step/end":
            self.step_open = False
        return interrupted

    def finish(self) -> None:
        if self.reader.issue is not None and self.header["isSeeded"] and self.source_cut is None:
            raise FormatError("format v3 seeded Session lacks an accepted inherited end-seed marker")
        count(self.cut, "V3 inherited event count")
        source_cut = count(self.source_cut, "V3 source inherited event count")
        existing: dict[str, dict[str, Any]] = {}
        for data in self.catalogs:
            listed = check_catalog_fact(data)
            if listed["childId"] in existing:
                raise MigrationRefusedError(f"duplicate catalog child {listed['childId']}")
            existing[listed["childId"]] = listed
        if self.foreign_delivery is not None and (
            "parentSession" not in self.header or self.foreign_delivery >= source_cut
        ):
            raise FormatError("current-generation delivery marker names the wrong Session")
        for source in self.candidates:
            child_id = source["childId"]
            known = existing.get(child_id)
            fact = catalog_fact(source)
            if known is not None:
                if known["childCreatedAt"] != source["childCreatedAt"] or (
                    fact is not None and any(known.get(key) != fact.get(key) for key in ("mode", "label"))
                ):
                    raise MigrationRefusedError(f"{subject(source)} conflicts with its parent catalog")
                continue
            entry = (
                fact
                if fact is not None
                else {
                    "version": 1,
                    "childId": child_id,
                    "childCreatedAt": source["childCreatedAt"],
                    "mode": "unknown",
                }
            )
            existing[child_id] = entry
            self.out.append({"type": "subagent/catalog", "seq": self.next_seq, "time": self.time, "data": entry})
            self.next_seq += 1


def _migrate_header(header: HeaderRecord) -> HeaderRecord:
    decode_header(header, 3)
    return physical_header(header, 4)


def v3_to_v4(children: Sequence[ChildSource] = ()) -> Migration:
    """The v3 → v4 edge for a parent whose historical subagent children are ``children``.

    ``()`` declares a session without children (dsh insists the evidence be explicit;
    a store passes what it found under the root).
    """
    evidence = tuple(children)

    def migrate(events: Iterable[EventRecord], source: HeaderRecord, _target: HeaderRecord) -> Iterator[EventRecord]:
        stage = _Stage(source, evidence)
        for raw in events:
            stage.event(raw)
            yield from stage.out
            stage.out.clear()
        stage.finish()
        yield from stage.out

    return Migration(NAME, 3, 4, _migrate_header, migrate_stream=migrate)
