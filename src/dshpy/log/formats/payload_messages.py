"""Messages as dsh's released formats v0–v3 admit them: content blocks, sources, stream chunks, reasons.

A message is checked whole (id, role for its place, every content block, its source
by kind: user, model, tool, plugin, instructions, session references, skills, goals,
teams, relays, webhooks), as are the stream chunks an assistant attempt is made of and
the reasons a finish chunk or a turn end carries. ``version`` is the generation read:
session references admit ``capturedFormatVersion`` from v1, and a v0/v1 user message
may hold a legacy goal source whose text must equal the ``<goal_state>`` its change renders.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dshpy.log.formats.chain import FormatError
from dshpy.log.formats.payload_values import (
    array_value,
    boolean_value,
    exact_object,
    goal_change,
    js_same,
    json_equal,
    json_object,
    literal_value,
    llm_failure,
    non_empty_string,
    positive_count,
    string_value,
    token_usage,
)
from dshpy.log.formats.released import check_member_keys, count, js

__all__ = ["content_blocks", "message_value", "stream_chunk", "turn_end_reason"]


def content_blocks(value: Any, label: str, version: int) -> None:
    """Every content block of a message or summary."""
    array_value(value, label, lambda member, member_label: _block(member, member_label, version))


def _block(value: Any, label: str, version: int) -> None:
    block = json_object(value, label)
    kind = block.get("type")
    if kind in ("text", "reasoning"):
        check_member_keys(block, ["type", "text"], [], label)
        string_value(block["text"], f"{label} text")
    elif kind == "image":
        check_member_keys(block, ["type", "attachment"], [], label)
        _image(block["attachment"], f"{label} attachment")
    elif kind == "tool-call":
        check_member_keys(block, ["type", "id", "name", "arguments"], [], label)
        non_empty_string(block["id"], f"{label} id")
        non_empty_string(block["name"], f"{label} name")
        string_value(block["arguments"], f"{label} arguments")
    elif kind == "tool-result":
        check_member_keys(block, ["type", "toolCallId", "content"], ["isError"], label)
        non_empty_string(block["toolCallId"], f"{label} toolCallId")
        content_blocks(block["content"], f"{label} content", version)
        if "isError" in block:
            boolean_value(block["isError"], f"{label} isError")
    else:
        non_empty_string(kind, f"{label} type")


def _image(value: Any, label: str) -> None:
    attachment = exact_object(
        value, label, ["attachmentId", "mediaType", "bytes", "width", "height"], ["name", "originalDimensions"]
    )
    non_empty_string(attachment["attachmentId"], f"{label} attachmentId")
    literal_value(attachment["mediaType"], ["image/png", "image/jpeg", "image/webp", "image/gif"], f"{label} mediaType")
    count(attachment["bytes"], f"{label} bytes")
    positive_count(attachment["width"], f"{label} width")
    positive_count(attachment["height"], f"{label} height")
    if "name" in attachment:
        string_value(attachment["name"], f"{label} name")
    if "originalDimensions" in attachment:
        dimensions = exact_object(attachment["originalDimensions"], f"{label} originalDimensions", ["width", "height"])
        positive_count(dimensions["width"], f"{label} original width")
        positive_count(dimensions["height"], f"{label} original height")


def message_value(value: Any, label: str, version: int, expected: str | None = None) -> None:
    """A whole message: id, the role its place demands (``expected``), content and source."""
    message = exact_object(value, label, ["id", "role", "content", "source"])
    non_empty_string(message["id"], f"{label} id")
    role = {"assistant": "assistant", "user": "user", "tool": "user"}.get(expected or "")
    if role is None:
        literal_value(message["role"], ["system", "user", "assistant"], f"{label} role")
    else:
        literal_value(message["role"], [role], f"{label} role")
    content_blocks(message["content"], f"{label} content", version)
    source = json_object(message["source"], f"{label} source")
    if version < 2 and expected == "user" and source.get("kind") == "goal" and "change" in source:
        _legacy_goal_message(message, source, label)
    else:
        _message_source(source, f"{label} source", version, expected)
    if expected == "tool":
        content = message["content"]
        block = (
            json_object(content[0], f"{label} tool result") if isinstance(content, list) and len(content) == 1 else None
        )
        if (
            block is None
            or block.get("type") != "tool-result"
            or not js_same(source.get("callId"), block.get("toolCallId"))
        ):
            raise FormatError(f"{label} must contain exactly one tool-result block")


def _legacy_goal_message(message: dict[str, Any], source: dict[str, Any], label: str) -> None:
    check_member_keys(source, ["kind", "goalId", "revision", "round", "change"], [], f"{label} source")
    non_empty_string(source["goalId"], f"{label} source goalId")
    positive_count(source["revision"], f"{label} source revision")
    if not js_same(0, source["round"]):
        raise FormatError(f"{label} legacy goal source round must be 0")
    change = json_object(source["change"], f"{label} source change")
    goal_change(change, f"{label} source change")
    cleared = change["operation"] == "clear"
    ref = json_object(change["cleared"] if cleared else change["goal"], f"{label} source change ref")
    if not js_same(source["goalId"], ref.get("id")) or not js_same(source["revision"], ref.get("revision")):
        raise FormatError(f"{label} legacy goal source does not match its change")
    keys = ("cleared", "clearedAt") if cleared else ("goal", "roundsStarted", "createdAt", "updatedAt")
    payload = {key: change[key] for key in keys if key in change}
    expected = [{"type": "text", "text": f"<goal_state>{js(payload)}</goal_state>"}]
    if not json_equal(message["content"], expected):
        raise FormatError(f"{label} legacy goal content does not match its change")


def _message_source(value: Any, label: str, version: int, expected: str | None) -> None:
    source = json_object(value, label)
    kind = source.get("kind")
    if expected == "assistant" and kind != "model":
        raise FormatError(f"{label} must be model source")
    if expected == "tool" and kind != "tool":
        raise FormatError(f"{label} must be tool source")
    checker = _SOURCES.get(kind) if isinstance(kind, str) else None
    if checker is None:
        non_empty_string(kind, f"{label} kind")
    else:
        checker(source, label, version)


def _user_source(source: dict[str, Any], label: str, _version: int) -> None:
    check_member_keys(source, ["kind"], ["rpcId", "clientTimeZone"], label)
    for key in ("rpcId", "clientTimeZone"):
        if key in source:
            non_empty_string(source[key], f"{label} {key}")


def _model_source(source: dict[str, Any], label: str, _version: int) -> None:
    check_member_keys(source, ["kind", "provider", "model"], ["replayState"], label)
    non_empty_string(source["provider"], f"{label} provider")
    non_empty_string(source["model"], f"{label} model")


def _tool_source(source: dict[str, Any], label: str, _version: int) -> None:
    check_member_keys(source, ["kind", "callId"], [], label)
    non_empty_string(source["callId"], f"{label} callId")


def _instructions_source(source: dict[str, Any], label: str, _version: int) -> None:
    check_member_keys(source, ["kind", "form", "changes"], ["baseline", "baselineIdentity"], label)
    literal_value(source["form"], ["instructions"], f"{label} form")
    if "baseline" in source:
        literal_value(source["baseline"], [True], f"{label} baseline")
    if "baselineIdentity" in source:
        non_empty_string(source["baselineIdentity"], f"{label} baselineIdentity")

    def change(member: Any, member_label: str) -> None:
        entry = exact_object(member, member_label, ["action", "scope", "path"], ["digest"])
        literal_value(entry["action"], ["set", "replace", "remove"], f"{member_label} action")
        string_value(entry["scope"], f"{member_label} scope")
        string_value(entry["path"], f"{member_label} path")
        if "digest" in entry:
            string_value(entry["digest"], f"{member_label} digest")

    array_value(source["changes"], f"{label} changes", change)


def _team_message_source(source: dict[str, Any], label: str, _version: int) -> None:
    check_member_keys(source, ["kind", "teamId", "messageId", "senderId", "senderName"], [], label)
    for key in ("teamId", "messageId", "senderId"):
        non_empty_string(source[key], f"{label} {key}")
    string_value(source["senderName"], f"{label} senderName")


def _goal_source(source: dict[str, Any], label: str, _version: int) -> None:
    check_member_keys(source, ["kind", "goalId", "revision", "round"], [], label)
    non_empty_string(source["goalId"], f"{label} goalId")
    positive_count(source["revision"], f"{label} revision")
    positive_count(source["round"], f"{label} round")


def _skill_invocation_source(source: dict[str, Any], label: str, _version: int) -> None:
    check_member_keys(source, ["kind", "name", "form"], [], label)
    non_empty_string(source["name"], f"{label} name")
    literal_value(source["form"], ["instructions"], f"{label} form")


def _skill_catalog_source(source: dict[str, Any], label: str, _version: int) -> None:
    check_member_keys(source, ["kind", "form", "entries"], ["update"], label)
    literal_value(source["form"], ["catalog"], f"{label} form")
    if "update" in source:
        literal_value(source["update"], [True], f"{label} update")

    def entry(member: Any, member_label: str) -> None:
        record = exact_object(member, member_label, ["name", "description"])
        non_empty_string(record["name"], f"{member_label} name")
        string_value(record["description"], f"{member_label} description")

    array_value(source["entries"], f"{label} entries", entry)


def _relay_source(source: dict[str, Any], label: str, _version: int) -> None:
    check_member_keys(source, ["kind", "form", "senderSessionId"], [], label)
    literal_value(source["form"], ["relay"], f"{label} form")
    non_empty_string(source["senderSessionId"], f"{label} senderSessionId")


def _settled_source(source: dict[str, Any], label: str, _version: int) -> None:
    check_member_keys(source, ["kind", "form", "summary", "senderSessionId"], [], label)
    literal_value(source["form"], ["notice"], f"{label} form")
    string_value(source["summary"], f"{label} summary")
    non_empty_string(source["senderSessionId"], f"{label} senderSessionId")


def _webhook_source(source: dict[str, Any], label: str, _version: int) -> None:
    check_member_keys(source, ["kind", "provider", "source", "deliveryId", "ruleId", "form", "summary"], [], label)
    for key in ("provider", "source", "deliveryId", "ruleId"):
        non_empty_string(source[key], f"{label} {key}")
    literal_value(source["form"], ["notice"], f"{label} form")
    string_value(source["summary"], f"{label} summary")


def _plugin_source(source: dict[str, Any], label: str, _version: int) -> None:
    optional = ["form", "sections", "summary"]
    compact = js_same("compact", source.get("plugin"))
    if compact:
        optional += ["compactionId", "sourceCommandId"]
    check_member_keys(source, ["kind", "plugin"], optional, label)
    non_empty_string(source["plugin"], f"{label} plugin")
    if compact:
        non_empty_string(source.get("compactionId"), f"{label} compactionId")
        if "sourceCommandId" in source:
            non_empty_string(source["sourceCommandId"], f"{label} sourceCommandId")
    if "form" not in source:
        return
    form = source["form"]
    literal_value(form, ["instructions", "catalog", "snapshot", "notice", "relay", "recall"], f"{label} form")
    if form == "snapshot":

        def section(member: Any, member_label: str) -> None:
            record = exact_object(member, member_label, ["name", "text"])
            non_empty_string(record["name"], f"{member_label} name")
            string_value(record["text"], f"{member_label} text")

        array_value(source.get("sections"), f"{label} sections", section)
    elif "sections" in source:
        raise FormatError(f"{label} sections require snapshot form")
    if form == "notice":
        string_value(source.get("summary"), f"{label} summary")
    elif "summary" in source:
        raise FormatError(f"{label} summary requires notice form")


def _reference_source(source: dict[str, Any], label: str, version: int) -> None:
    check_member_keys(source, ["kind", "form", "version", "references"], [], label)
    literal_value(source["form"], ["recall"], f"{label} form")
    literal_value(source["version"], [1], f"{label} version")
    position = 0
    session_ids: set[str] = set()

    def reference(member: Any, member_label: str) -> None:
        nonlocal position
        record = exact_object(
            member,
            member_label,
            [
                "sessionId",
                "label",
                "capturedThroughSeq",
                "compacted",
                "originalMessages",
                "retainedMessages",
                "omittedMessages",
                "omittedBytes",
                "truncated",
                "inputIndex",
            ],
            ["capturedFormatVersion"] if version >= 1 else [],
        )
        non_empty_string(record["sessionId"], f"{member_label} sessionId")
        string_value(record["label"], f"{member_label} label")
        if record["capturedThroughSeq"] is not None:
            count(record["capturedThroughSeq"], f"{member_label} capturedThroughSeq")
        if "capturedFormatVersion" in record:
            captured = count(record["capturedFormatVersion"], f"{member_label} capturedFormatVersion")
            if not 1 <= captured <= version:
                raise FormatError(f"{member_label} capturedFormatVersion must be between 1 and {version}")
        boolean_value(record["compacted"], f"{member_label} compacted")
        original = count(record["originalMessages"], f"{member_label} originalMessages")
        retained = count(record["retainedMessages"], f"{member_label} retainedMessages")
        omitted = count(record["omittedMessages"], f"{member_label} omittedMessages")
        omitted_bytes = count(record["omittedBytes"], f"{member_label} omittedBytes")
        input_index = count(record["inputIndex"], f"{member_label} inputIndex")
        truncated = record["truncated"]
        boolean_value(truncated, f"{member_label} truncated")
        if retained > original or omitted != original - retained:
            raise FormatError(f"{member_label} message counts are inconsistent")
        if truncated != (omitted > 0 or omitted_bytes > 0):
            raise FormatError(f"{member_label} truncated disagrees with omitted content")
        if input_index != position:
            raise FormatError(f"{label} inputIndex must match reference position")
        position += 1
        if record["sessionId"] in session_ids:
            raise FormatError(f"{label} repeats sessionId {record['sessionId']}")
        session_ids.add(record["sessionId"])

    if not array_value(source["references"], f"{label} references", reference):
        raise FormatError(f"{label} references must be non-empty")


_SOURCES: dict[str, Callable[[dict[str, Any], str, int], None]] = {
    "user": _user_source,
    "plugin": _plugin_source,
    "model": _model_source,
    "tool": _tool_source,
    "agent-instructions": _instructions_source,
    "session-reference": _reference_source,
    "team-message": _team_message_source,
    "goal": _goal_source,
    "skill-invocation": _skill_invocation_source,
    "skill-catalog": _skill_catalog_source,
    "coordinator": _relay_source,
    "subagent-report": _relay_source,
    "subagent-settled": _settled_source,
    "webhook": _webhook_source,
}


def stream_chunk(value: Any, label: str) -> None:
    """One stream chunk of an attempt (dsh refuses chunk types it does not know)."""
    chunk = json_object(value, label)
    kind = chunk.get("type")
    if kind == "block-start":
        check_member_keys(chunk, ["type", "index", "blockType"], [], label)
        count(chunk["index"], f"{label} index")
        non_empty_string(chunk["blockType"], f"{label} blockType")
    elif kind in ("text-delta", "reasoning-delta"):
        check_member_keys(chunk, ["type", "index", "text"], [], label)
        count(chunk["index"], f"{label} index")
        string_value(chunk["text"], f"{label} text")
    elif kind == "tool-call-delta":
        check_member_keys(chunk, ["type", "index", "id", "argumentsDelta"], ["name"], label)
        count(chunk["index"], f"{label} index")
        non_empty_string(chunk["id"], f"{label} id")
        if "name" in chunk:
            string_value(chunk["name"], f"{label} name")
        string_value(chunk["argumentsDelta"], f"{label} argumentsDelta")
    elif kind == "block-end":
        check_member_keys(chunk, ["type", "index", "block"], [], label)
        count(chunk["index"], f"{label} index")
        _block(chunk["block"], f"{label} block", 1)
    elif kind == "usage":
        check_member_keys(chunk, ["type", "usage"], [], label)
        token_usage(chunk["usage"], f"{label} usage")
    elif kind == "finish":
        check_member_keys(chunk, ["type", "reason"], ["replayState"], label)
        _finish_reason(chunk["reason"], f"{label} reason")
        if "replayState" in chunk:
            replay = exact_object(chunk["replayState"], f"{label} replayState", ["response"], ["blocks"])
            if "blocks" in replay and not isinstance(replay["blocks"], list):
                raise FormatError(f"{label} replayState blocks must be an array")
    else:
        raise FormatError(f"{label} has unknown stream chunk type {js(kind)}")


def _finish_reason(value: Any, label: str) -> None:
    reason = json_object(value, label)
    kind = reason.get("kind")
    if kind in ("aborted", "error"):
        check_member_keys(reason, ["kind", "failure"], [], label)
        llm_failure(reason["failure"], f"{label} failure")
        return
    if kind in ("stop", "tool-calls", "max-tokens"):
        check_member_keys(reason, ["kind"], [], label)
    non_empty_string(kind, f"{label} kind")


def turn_end_reason(value: Any, label: str) -> None:
    """Why a turn ended, with the failure or abort cause the kind requires."""
    reason = json_object(value, label)
    kind = reason.get("kind")
    if kind in ("completed", "blocked", "max-tokens", "interrupted"):
        check_member_keys(reason, ["kind"], [], label)
    elif kind == "aborted":
        check_member_keys(reason, ["kind", "reason"], [], label)
        cause = json_object(reason["reason"], f"{label} abort cause")
        if cause.get("kind") == "hook":
            check_member_keys(cause, ["kind", "reason"], [], f"{label} abort cause")
            string_value(cause["reason"], f"{label} abort reason")
        else:
            check_member_keys(cause, ["kind"], [], f"{label} abort cause")
            literal_value(cause["kind"], ["user", "parent", "disposed", "legacy"], f"{label} abort kind")
    elif kind == "error":
        check_member_keys(reason, ["kind", "error"], [], label)
        llm_failure(reason["error"], f"{label} error")
    else:
        non_empty_string(kind, f"{label} kind")
