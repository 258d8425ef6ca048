"""dsh's v0 → v1 edge: the normalizations rc.8 applied on every read, made once.

v0 and v1 share one physical layout, so this "identity edge" changes no structure.
It rewrites the legacy shapes rc.8 still accepted into the shapes it wrote itself
(dsh-v4 §1.2, dsh-dataplane §5):

* ``compact/*`` → ``compaction/*``, a missing ``compactionId`` filled as
  ``legacy-compaction:<sid>:<seq>`` (and carried to the bracket's summary, end and
  checkpoint message); ``steering/message`` → ``user/message``; a
  ``turn/start.trigger`` dropped;
* legacy ``turn/end`` reasons: bare ``aborted`` → ``aborted/legacy``, ``disposed`` →
  ``aborted/disposed``, old-style ``error`` → ``{kind: error, error: {message, code}}``;
* messages from before message identities get ``legacy-message:<sid>:<seq>`` (a
  replacing tool result inherits the id of the node it replaces); an ``llm/retry``
  without ``retryId`` gets the chain's id, else ``legacy-retry:<sid>:<seq>``;
  ``request/header.header.messagePrefix`` is dropped.

It refuses ``request/header-delta``, ``mode/set``, a ``request/header`` with reason
``fallback``, and any event type outside the released inventory, even an ignorable one.
Packed chunk rows pass through untouched; the next edge folds them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from dshpy.log.formats.chain import EventRecord, FormatError, HeaderRecord, Migration, MigrationRefusedError
from dshpy.log.formats.payload_semantics import check_released_payload
from dshpy.log.formats.physical import decode_header, is_packed, physical_header
from dshpy.log.formats.released import check_member_keys, count, is_object, js, object_of

__all__ = ["V0_TO_V1"]

NAME = "@deepseek-ai/dsh-session-format-v0-to-v1"
_LEGACY_ASSISTANT_SOURCE = "provenance"
_COMPACT_RENAMES = {
    "compact/start": "compaction/start",
    "compact/summary": "compaction/summary",
    "compact/end": "compaction/end",
    "compact/prune": "compaction/prune",
}


class _State:
    __slots__ = ("compaction_id", "message_ids", "retry_ids")

    def __init__(self) -> None:
        self.message_ids: dict[int, str] = {}
        self.retry_ids: dict[str, str] = {}
        self.compaction_id: str | None = None


def _migrate_header(header: HeaderRecord) -> HeaderRecord:
    decode_header(header, 0)
    return physical_header(header, 1, seed_length=header.get("seedLength"))


def _migrate(events: Iterable[EventRecord], source: HeaderRecord, _target: HeaderRecord) -> Iterator[EventRecord]:
    session_id = source["id"]
    cut = source.get("seedLength", 0)
    state = _State()
    for record in events:
        if is_packed(record):
            yield record
            continue
        event = _normalize(record, session_id, state)
        _check_delivery(event, source, cut)
        yield event


def _normalize(event: EventRecord, session_id: str, state: _State) -> EventRecord:
    named = _compaction_type(event)
    _refuse_legacy(named, session_id)
    message = _turn_start(named, session_id)
    message = _turn_end(message, session_id)
    message = _request_header(message, session_id)
    message = _steering(message, session_id)
    message = _retry(message, session_id, state.retry_ids)
    message = _compaction(message, session_id, state)
    message = _message(message, session_id, state.message_ids)
    if message["type"] != "assistant/chunk":
        check_released_payload(message, 0)
    message_id = _message_id(message)
    if message_id is not None:
        state.message_ids[message["seq"]] = message_id
    return message


def _data(event: EventRecord) -> dict[str, Any]:
    return object_of(event.get("data"), f"{event['type']} {event['seq']} data")


def _compaction_type(event: EventRecord) -> EventRecord:
    renamed = _COMPACT_RENAMES.get(event.get("type"))  # type: ignore[arg-type]
    return event if renamed is None else {**event, "type": renamed}


def _refuse_legacy(event: EventRecord, session_id: str) -> None:
    kind = event.get("type")
    if kind in ("request/header-delta", "mode/set"):
        raise MigrationRefusedError(
            f"session {js(session_id)} contains unsupported legacy {kind} event at seq {event['seq']}"
        )
    if kind == "request/header" and _data(event).get("reason") == "fallback":
        raise MigrationRefusedError(
            f'session {js(session_id)} contains unsupported request/header reason "fallback" at seq {event["seq"]}'
        )


def _malformed(session_id: str, kind: str, seq: int) -> FormatError:
    return FormatError(f"session {js(session_id)} contains malformed pre-react-loop {kind} at seq {seq}")


def _retry(event: EventRecord, session_id: str, retry_ids: dict[str, str]) -> EventRecord:
    if event["type"] != "llm/retry":
        return event
    data = object_of(event.get("data"), f"llm/retry {event['seq']} data")
    # JSON.stringify of a missing member is undefined, which join() writes as "".
    chain = "\0".join(js(data[key]) if key in data else "" for key in ("turn", "step", "provider", "policyKey"))
    retry_id = data.get("retryId")
    if isinstance(retry_id, str) and retry_id:
        retry_ids[chain] = retry_id
        return event
    if "retryId" in data:
        return event
    migrated = retry_ids.get(chain) or f"legacy-retry:{session_id}:{event['seq']}"
    retry_ids[chain] = migrated
    return {**event, "data": {**data, "retryId": migrated}}


def _compaction(event: EventRecord, session_id: str, state: _State) -> EventRecord:
    kind = event["type"]
    if kind == "session/end-seed":
        state.compaction_id = None
        return event
    if kind == "compaction/start":
        data = object_of(event.get("data"), f"compaction/start {event['seq']} data")
        existing = data.get("compactionId")
        if isinstance(existing, str) and existing:
            state.compaction_id = existing
            return event
        if "compactionId" in data:
            return event
        minted = f"legacy-compaction:{session_id}:{event['seq']}"
        state.compaction_id = minted
        return {**event, "data": {**data, "compactionId": minted}}
    compaction_id = state.compaction_id
    if compaction_id is None:
        return event
    if kind in ("compaction/summary", "compaction/end"):
        data = object_of(event.get("data"), f"{kind} {event['seq']} data")
        if kind == "compaction/end":
            state.compaction_id = None
        return event if "compactionId" in data else {**event, "data": {**data, "compactionId": compaction_id}}
    if kind != "user/message":
        return event
    data = object_of(event.get("data"), f"user/message {event['seq']} data")
    source = data.get("source")
    if (
        not is_object(source)
        or source.get("kind") != "plugin"
        or source.get("plugin") != "compact"
        or "compactionId" in source
    ):
        return event
    return {**event, "data": {**data, "source": {**source, "compactionId": compaction_id}}}


def _request_header(event: EventRecord, session_id: str) -> EventRecord:
    if event["type"] != "request/header":
        return event
    data = object_of(event.get("data"), f"request/header {event['seq']} data")
    header = object_of(data.get("header"), f"request/header {event['seq']} header")
    if "messagePrefix" not in header:
        return event
    if not isinstance(header["messagePrefix"], list):
        raise FormatError(
            f"session {js(session_id)} contains malformed request/header messagePrefix at seq {event['seq']}"
        )
    current = {key: value for key, value in header.items() if key != "messagePrefix"}
    return {**event, "data": {**data, "header": current}}


def _steering(event: EventRecord, session_id: str) -> EventRecord:
    if event["type"] != "steering/message":
        return event
    seq = event["seq"]
    data = object_of(event.get("data"), f"steering/message {seq} data")
    if "message" in data:
        check_member_keys(data, ("turn", "message"), (), f"steering/message {seq} data")
        count(data["turn"], f"steering/message {seq} turn")
        return {**event, "type": "user/message", "data": data["message"]}
    check_member_keys(data, ("turn", "content", "source"), (), f"steering/message {seq} data")
    count(data["turn"], f"steering/message {seq} turn")
    message = {key: value for key, value in data.items() if key != "turn"}
    return {**event, "type": "user/message", "data": {**message, "id": _legacy_id(session_id, seq), "role": "user"}}


def _turn_start(event: EventRecord, session_id: str) -> EventRecord:
    if event["type"] != "turn/start":
        return event
    seq = event["seq"]
    data = object_of(event.get("data"), f"turn/start {seq} data")
    if "trigger" not in data:
        return event
    check_member_keys(data, ("turn", "trigger"), (), f"turn/start {seq} data")
    turn = count(data["turn"], f"turn/start {seq} turn")
    trigger = object_of(data["trigger"], f"turn/start {seq} trigger")
    if turn < 1 or not isinstance(trigger.get("kind"), str) or not trigger["kind"]:
        raise _malformed(session_id, "turn/start", seq)
    return {**event, "data": {"turn": turn}}


def _turn_end(event: EventRecord, session_id: str) -> EventRecord:
    if event["type"] != "turn/end":
        return event
    seq = event["seq"]
    data = object_of(event.get("data"), f"turn/end {seq} data")
    check_member_keys(data, ("turn", "reason"), (), f"turn/end {seq} data")
    if count(data["turn"], f"turn/end {seq} turn") < 1:
        raise _malformed(session_id, "turn/end", seq)
    reason = object_of(data["reason"], f"turn/end {seq} reason")
    kind = reason.get("kind")
    if not isinstance(kind, str):
        raise _malformed(session_id, "turn/end", seq)
    if kind in ("completed", "blocked", "max-tokens", "interrupted"):
        check_member_keys(reason, ("kind",), (), f"turn/end {seq} reason")
        return event
    if kind == "aborted":
        if "reason" in reason:
            return event
        check_member_keys(reason, ("kind",), (), f"turn/end {seq} reason")
        current: dict[str, Any] = {"kind": "aborted", "reason": {"kind": "legacy"}}
    elif kind == "disposed":
        check_member_keys(reason, ("kind",), (), f"turn/end {seq} reason")
        current = {"kind": "aborted", "reason": {"kind": "disposed"}}
    elif kind == "error":
        if "error" in reason:
            return event
        current = _legacy_error(reason, seq, session_id)
    else:
        return event
    return {**event, "data": {**data, "reason": current}}


def _legacy_error(reason: dict[str, Any], seq: int, session_id: str) -> dict[str, Any]:
    count(reason.get("step"), f"turn/end {seq} error step")
    failure = reason.get("failure")
    if "failure" in reason:
        check_member_keys(reason, ("kind", "step", "failure"), (), f"turn/end {seq} reason")
        record = object_of(failure, f"turn/end {seq} failure")
        check_member_keys(
            record, ("message", "code"), ("status", "providerRetryAfterMs", "requestId"), f"turn/end {seq} failure"
        )
        if not isinstance(record["message"], str) or not isinstance(record["code"], str):
            raise _malformed(session_id, "turn/end", seq)
        return {"kind": "error", "error": record}
    check_member_keys(reason, ("kind", "step", "message"), ("code",), f"turn/end {seq} reason")
    code = reason.get("code")
    if not isinstance(reason["message"], str) or ("code" in reason and not isinstance(code, str)):
        raise _malformed(session_id, "turn/end", seq)
    return {
        "kind": "error",
        "error": {"message": reason["message"], "code": code if isinstance(code, str) else "UNKNOWN"},
    }


def _message(event: EventRecord, session_id: str, message_ids: dict[int, str]) -> EventRecord:
    kind = event["type"]
    seq = event["seq"]
    data = object_of(event.get("data"), f"{kind} {seq} data")
    if kind == "user/message":
        if "id" in data or "role" in data or "message" in data or "content" not in data or "source" not in data:
            return event
        return {**event, "data": {**data, "id": _legacy_id(session_id, seq), "role": "user"}}
    if kind == "assistant/message":
        if "message" in data or "content" not in data or _LEGACY_ASSISTANT_SOURCE not in data:
            return event
        remaining = {key: value for key, value in data.items() if key not in ("content", _LEGACY_ASSISTANT_SOURCE)}
        source = object_of(data[_LEGACY_ASSISTANT_SOURCE], f"assistant/message {seq} legacy source")
        message = {
            "id": _legacy_id(session_id, seq),
            "role": "assistant",
            "content": data["content"],
            "source": {**source, "kind": "model"},
        }
        return {**event, "data": {**remaining, "message": message}}
    if kind == "tool/result":
        if "message" in data or "callId" not in data or "content" not in data or "isError" not in data:
            return event
        call_id, content, is_error = data["callId"], data["content"], data["isError"]
        if not isinstance(call_id, str) or type(is_error) is not bool:
            return event
        remaining = {key: value for key, value in data.items() if key not in ("callId", "content", "isError")}
        replaced = _replacement_start(event)
        message_id = _legacy_id(session_id, seq) if replaced is None else message_ids.get(replaced)
        if message_id is None:
            raise FormatError(f"tool/result {seq} replacement cites a message without identity")
        message = {
            "id": message_id,
            "role": "user",
            "content": [{"type": "tool-result", "toolCallId": call_id, "content": content, "isError": is_error}],
            "source": {"kind": "tool", "callId": call_id},
        }
        return {**event, "data": {**remaining, "message": message}}
    return event


def _replacement_start(event: EventRecord) -> Any:
    operation = event.get("surfaceOp")
    if not is_object(operation) or operation.get("op") != "replace":
        return None
    return operation.get("start")


def _message_id(event: EventRecord) -> str | None:
    data = object_of(event.get("data"), f"{event['type']} {event['seq']} data")
    if event["type"] == "user/message":
        message: Any = data
    else:
        message = data.get("message") if is_object(data.get("message")) else None
    value = message.get("id") if message is not None else None
    return value if isinstance(value, str) else None


def _check_delivery(event: EventRecord, source: HeaderRecord, cut: int) -> None:
    if event["type"] != "session-log-deepseek/delivery-accepted":
        return
    data = object_of(event.get("data"), f"{event['type']} {event['seq']} data")
    accepted = data.get("sessionFormatVersion")
    inherited = "parentSession" in source and event["seq"] < cut
    if (accepted is None or accepted == 0) and not inherited and data.get("sessionId") != source["id"]:
        raise FormatError("current-generation delivery marker names the wrong Session")


def _legacy_id(session_id: str, seq: int) -> str:
    return f"legacy-message:{session_id}:{seq}"


V0_TO_V1 = Migration(NAME, 0, 1, _migrate_header, migrate_stream=_migrate)
"""dsh's identity edge v0 → v1."""
