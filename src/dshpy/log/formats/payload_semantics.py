"""The nested payload checks dsh runs on every released v0–v3 event before an edge converts it.

:func:`~dshpy.log.formats.released.check_payload` checks that an event's payload has
exactly its released members; this module checks what those members hold, as dsh
0.2.1's ``assertReleasedPayloadSemantics(event, version)`` does (package
``@deepseek-ai/dsh-session-format-v0-to-v1``, shared by the v1→v2 and v2→v3 edges):
literal values, non-empty ids, counts, earlier-seq references, messages with their
content blocks and sources, stream chunks, token usage, LLM failures, turn-end and
finish reasons, request headers, goals, schedules, teams, subagent descriptors. An
edge that converted a payload it had not checked could carry a malformed reference
or message into a v4 log that no reader accepts. Every message is dsh's wording, so
a refusal reads the same whichever harness reports it.

``version`` is the generation the payload is read at: session-reference sources admit
``capturedFormatVersion`` from v1, and a v0/v1 user message may carry a legacy goal
source whose content must equal the ``<goal_state>`` text its change renders.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from dshpy.log.formats.chain import FormatError
from dshpy.log.formats.payload_messages import content_blocks, message_value, stream_chunk, turn_end_reason
from dshpy.log.formats.payload_values import (
    array_value,
    boolean_value,
    coordinates,
    earlier_seq,
    exact_object,
    finite_number,
    goal_change,
    json_object,
    literal_value,
    llm_failure,
    model_route,
    non_empty_string,
    positive_count,
    seq_array,
    string_value,
    token_usage,
)
from dshpy.log.formats.released import check_member_keys, check_payload, count, js, object_of, safe_int

__all__ = ["check_payload_semantics", "check_released_payload"]


def _request_header(value: Any, label: str) -> None:
    header = exact_object(value, label, ["config"], ["adapterDefaults", "system", "tools"])
    config = exact_object(
        header["config"],
        f"{label} config",
        ["provider", "model"],
        ["reasoningEffort", "temperature", "maxTokens", "stop"],
    )
    non_empty_string(config["provider"], f"{label} provider")
    non_empty_string(config["model"], f"{label} model")
    if "reasoningEffort" in config:
        non_empty_string(config["reasoningEffort"], f"{label} reasoningEffort")
    if "temperature" in config:
        finite_number(config["temperature"], f"{label} temperature")
    if "maxTokens" in config:
        positive_count(config["maxTokens"], f"{label} maxTokens")
    if "stop" in config:
        array_value(config["stop"], f"{label} stop", string_value)
    if "adapterDefaults" in header:
        defaults = exact_object(
            header["adapterDefaults"], f"{label} adapterDefaults", [], ["reasoningEffort", "maxTokens"]
        )
        for key, marker in defaults.items():
            literal_value(marker, [True], f"{label} adapterDefaults {key}")
            if key not in config:
                raise FormatError(f"{label} adapter default {key} lacks config value")
    if "system" in header:
        string_value(header["system"], f"{label} system")
    if "tools" in header:
        array_value(header["tools"], f"{label} tools", _tool_schema)


def _tool_schema(value: Any, label: str) -> None:
    schema = exact_object(value, label, ["name", "description", "parameters"])
    non_empty_string(schema["name"], f"{label} name")
    string_value(schema["description"], f"{label} description")
    json_object(schema["parameters"], f"{label} parameters")


def _shadowed(data: dict[str, Any], seq: int, label: str) -> None:
    shadowed = exact_object(data.get("shadowedRange"), f"{label} shadowedRange", ["start", "end"])
    start = earlier_seq(shadowed["start"], seq, f"{label} shadowedRange start")
    end = earlier_seq(shadowed["end"], seq, f"{label} shadowedRange end")
    seqs = seq_array(data.get("shadowedSeqs"), seq, f"{label} shadowedSeqs", True)
    if seqs[0] != start or seqs[-1] != end:
        raise FormatError(f"{label} shadowedRange must match shadowedSeqs endpoints")
    count(data.get("shadowedTokenCount"), f"{label} shadowedTokenCount")


_INSTANT = re.compile(
    r"(?!0000)\d{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])T(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d\.\d{3}Z"
)


def _instant(value: Any, label: str) -> None:
    valid = isinstance(value, str) and _INSTANT.fullmatch(value) is not None
    if valid:
        try:
            parsed = datetime.strptime(value, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
        except ValueError:
            valid = False
        else:
            valid = parsed.strftime("%Y-%m-%dT%H:%M:%S.") + f"{parsed.microsecond // 1000:03d}Z" == value
    if not valid:
        raise FormatError(f"{label} must be a canonical UTC instant")


def _schedule_id(value: Any, label: str) -> None:
    non_empty_string(value, label)
    if value.strip() != value:
        raise FormatError(f"{label} must not have surrounding whitespace")


def _schedule_change(data: dict[str, Any], label: str) -> None:
    literal_value(data.get("version"), [1], f"{label} version")
    if data.get("operation") == "create":
        check_member_keys(data, ["version", "operation", "schedule"], [], f"{label} data")
        _schedule(data["schedule"], f"{label} schedule")
        return
    optional = ["acceptedAt"] if data.get("operation") == "dispatch" else []
    check_member_keys(data, ["version", "operation", "id"], optional, f"{label} data")
    literal_value(data["operation"], ["delete", "dispatch"], f"{label} operation")
    _schedule_id(data["id"], f"{label} id")
    if "acceptedAt" in data:
        _instant(data["acceptedAt"], f"{label} acceptedAt")


def _schedule(value: Any, label: str) -> None:
    record = json_object(value, label)
    kind = record.get("kind")
    if kind == "after":
        check_member_keys(record, ["id", "kind", "prompt", "afterSeconds", "scheduledAt"], [], label)
        positive_count(record["afterSeconds"], f"{label} afterSeconds")
    elif kind == "at":
        check_member_keys(record, ["id", "kind", "prompt", "scheduledAt"], [], label)
    elif kind == "every":
        check_member_keys(record, ["id", "kind", "prompt", "everySeconds", "scheduledAt"], [], label)
        if positive_count(record["everySeconds"], f"{label} everySeconds") < 300:
            raise FormatError(f"{label} everySeconds must be at least 300")
    else:
        raise FormatError(f"{label} has unknown schedule kind")
    _schedule_id(record["id"], f"{label} id")
    non_empty_string(record["prompt"], f"{label} prompt")
    _instant(record["scheduledAt"], f"{label} scheduledAt")


def _title_source(value: Any, label: str) -> None:
    source = json_object(value, label)
    if source.get("kind") == "provider":
        check_member_keys(source, ["kind", "provider"], ["model"], label)
        non_empty_string(source["provider"], f"{label} provider")
        if "model" in source:
            model_route(source["model"], f"{label} model")
        return
    check_member_keys(source, ["kind"], [], label)
    literal_value(source["kind"], ["fallback", "user"], f"{label} kind")


def _descriptor(data: dict[str, Any], label: str) -> None:
    literal_value(data.get("version"), [3], f"{label} version")
    non_empty_string(data.get("provider"), f"{label} provider")
    if data.get("mode") == "one-shot":
        check_member_keys(data, ["mode", "version", "provider"], ["label"], f"{label} data")
        if "label" in data:
            string_value(data["label"], f"{label} label")
        return
    literal_value(data.get("mode"), ["continuable"], f"{label} mode")
    non_empty_string(data.get("label"), f"{label} label")
    for key in ("agentProvider", "agentModel", "agentReasoningEffort", "persona"):
        if key in data:
            non_empty_string(data[key], f"{label} {key}")
    if ("agentProvider" in data) != ("agentModel" in data):
        raise FormatError(f"{label} agentProvider and agentModel must be paired")
    if "toolFilter" in data:
        tool_filter = exact_object(data["toolFilter"], f"{label} toolFilter", [], ["allow", "deny"])
        if not tool_filter:
            raise FormatError(f"{label} toolFilter requires allow or deny")
        for key in ("allow", "deny"):
            if key in tool_filter:
                array_value(tool_filter[key], f"{label} {key}", non_empty_string)


def _allowed_models(value: Any, label: str) -> None:
    seen: set[str] = set()

    def route(member: Any, member_label: str) -> None:
        model_route(member, member_label)
        key = f"{member['provider']}\x00{member['model']}"
        if key in seen:
            raise FormatError(f"{label} repeats route {key}")
        seen.add(key)

    if not array_value(value, label, route):
        raise FormatError(f"{label} must be non-empty")


def _team(data: dict[str, Any], label: str) -> None:
    literal_value(data.get("version"), [1], f"{label} version")
    non_empty_string(data.get("teamId"), f"{label} teamId")


def _team_member(value: Any, label: str) -> None:
    member = exact_object(value, label, ["id", "name", "description", "provider", "context", "phase"], ["error"])
    non_empty_string(member["id"], f"{label} id")
    for key in ("name", "description", "provider"):
        string_value(member[key], f"{label} {key}")
    literal_value(member["context"], ["fresh", "fork"], f"{label} context")
    literal_value(member["phase"], ["provisioning", "active", "failed"], f"{label} phase")
    if "error" in member:
        string_value(member["error"], f"{label} error")


def _team_task(value: Any, label: str) -> None:
    task = exact_object(
        value, label, ["id", "revision", "subject", "description", "status", "blockedBy", "writeScopes"], ["ownerId"]
    )
    non_empty_string(task["id"], f"{label} id")
    positive_count(task["revision"], f"{label} revision")
    string_value(task["subject"], f"{label} subject")
    string_value(task["description"], f"{label} description")
    literal_value(task["status"], ["pending", "in_progress", "completed", "deleted"], f"{label} status")
    if "ownerId" in task:
        non_empty_string(task["ownerId"], f"{label} ownerId")
    array_value(task["blockedBy"], f"{label} blockedBy", non_empty_string)
    array_value(task["writeScopes"], f"{label} writeScopes", string_value)


def _team_message(value: Any, label: str, version: int) -> None:
    message = exact_object(value, label, ["id", "senderId", "senderName", "targetId", "delivery", "content"])
    for key in ("id", "senderId", "targetId"):
        non_empty_string(message[key], f"{label} {key}")
    string_value(message["senderName"], f"{label} senderName")
    literal_value(message["delivery"], ["quiet", "wakeup"], f"{label} delivery")
    content_blocks(message["content"], f"{label} content", version)


def _search_body(value: Any, label: str) -> None:
    body = exact_object(value, label, ["model", "max_tokens", "messages", "tools"])
    non_empty_string(body["model"], f"{label} model")
    positive_count(body["max_tokens"], f"{label} max_tokens")

    def text_block(block: Any, block_label: str) -> None:
        text = exact_object(block, block_label, ["type", "text"])
        literal_value(text["type"], ["text"], f"{block_label} type")
        string_value(text["text"], f"{block_label} text")

    def user_message(member: Any, member_label: str) -> None:
        message = exact_object(member, member_label, ["role", "content"])
        literal_value(message["role"], ["user"], f"{member_label} role")
        if len(array_value(message["content"], f"{member_label} content", text_block)) != 1:
            raise FormatError(f"{member_label} content must contain one text block")

    def search_tool(member: Any, member_label: str) -> None:
        tool = exact_object(member, member_label, ["type", "name", "max_uses"])
        literal_value(tool["type"], ["web_search_20250305"], f"{member_label} type")
        literal_value(tool["name"], ["web_search"], f"{member_label} name")
        positive_count(tool["max_uses"], f"{member_label} max_uses")

    if len(array_value(body["messages"], f"{label} messages", user_message)) != 1:
        raise FormatError(f"{label} messages must contain one user message")
    if len(array_value(body["tools"], f"{label} tools", search_tool)) != 1:
        raise FormatError(f"{label} tools must contain one web search tool")


def _inbox_spliced(data: dict[str, Any], seq: int, label: str, version: int) -> None:
    literal_value(data.get("target"), ["next-turn", "next-step"], f"{label} target")
    count(data.get("start"), f"{label} start")
    if "removedCount" in data:
        count(data["removedCount"], f"{label} removedCount")
    array_value(
        data.get("inserted"),
        f"{label} inserted",
        lambda value, _: message_value(value, f"{label} inserted message", version, "user"),
    )
    if "outcome" in data:
        literal_value(data["outcome"], ["canceled"], f"{label} outcome")


def _approval_asked(data: dict[str, Any], seq: int, label: str, version: int) -> None:
    non_empty_string(data.get("id"), f"{label} id")
    non_empty_string(data.get("toolName"), f"{label} toolName")
    if "callId" in data:
        non_empty_string(data["callId"], f"{label} callId")
    if "reason" in data:
        string_value(data["reason"], f"{label} reason")


def _assistant_message(data: dict[str, Any], seq: int, label: str, version: int) -> None:
    coordinates(data, label)
    message_value(data.get("message"), f"{label} message", version, "assistant")
    if "usage" in data:
        token_usage(data["usage"], f"{label} usage")
    if "interrupted" in data:
        literal_value(data["interrupted"], [True], f"{label} interrupted")


def _command_done(data: dict[str, Any], seq: int, label: str, version: int) -> None:
    non_empty_string(data.get("commandId"), f"{label} commandId")
    literal_value(data.get("kind"), ["success", "error"], f"{label} kind")
    if "text" in data:
        string_value(data["text"], f"{label} text")
    if "sourceEventSeq" in data:
        earlier_seq(data["sourceEventSeq"], seq, f"{label} sourceEventSeq")


def _command_run(data: dict[str, Any], seq: int, label: str, version: int) -> None:
    non_empty_string(data.get("commandId"), f"{label} commandId")
    non_empty_string(data.get("name"), f"{label} name")
    if "args" in data:
        string_value(data["args"], f"{label} args")
    source = exact_object(data.get("source"), f"{label} source", ["kind"])
    literal_value(source["kind"], ["user"], f"{label} source kind")


def _compaction_bracket(data: dict[str, Any], seq: int, label: str, version: int) -> None:
    non_empty_string(data.get("compactionId"), f"{label} compactionId")
    if "sourceCommandId" in data:
        non_empty_string(data["sourceCommandId"], f"{label} sourceCommandId")
    if data.get("turn") is not None:
        count(data.get("turn"), f"{label} turn")
    if "error" in data:
        string_value(data["error"], f"{label} error")


def _compaction_summary(data: dict[str, Any], seq: int, label: str, version: int) -> None:
    if data.get("llmStreamCall") is True and "rawOutput" not in data:
        raise FormatError(f"{label} llmStreamCall requires rawOutput")
    non_empty_string(data.get("compactionId"), f"{label} compactionId")
    if "sourceCommandId" in data:
        non_empty_string(data["sourceCommandId"], f"{label} sourceCommandId")
    content_blocks(data.get("summary"), f"{label} summary", version)
    _shadowed(data, seq, label)
    non_empty_string(data.get("provider"), f"{label} provider")
    non_empty_string(data.get("model"), f"{label} model")
    if "maxTokens" in data:
        count(data["maxTokens"], f"{label} maxTokens")
    if "usage" in data:
        token_usage(data["usage"], f"{label} usage")
    if "rawOutput" in data:
        content_blocks(data["rawOutput"], f"{label} rawOutput", version)
    if "llmStreamCall" in data:
        literal_value(data["llmStreamCall"], [True], f"{label} llmStreamCall")


def _hook_invoked(data: dict[str, Any], seq: int, label: str, version: int) -> None:
    count(data.get("turn"), f"{label} turn")
    non_empty_string(data.get("point"), f"{label} point")
    literal_value(data.get("dialect"), ["claude-code", "codex"], f"{label} dialect")
    if "matcher" in data:
        string_value(data["matcher"], f"{label} matcher")
    non_empty_string(data.get("handlerId"), f"{label} handlerId")


def _hook_result(data: dict[str, Any], seq: int, label: str, version: int) -> None:
    count(data.get("turn"), f"{label} turn")
    non_empty_string(data.get("point"), f"{label} point")
    non_empty_string(data.get("handlerId"), f"{label} handlerId")
    non_empty_string(data.get("decision"), f"{label} decision")
    if "exitCode" in data:
        safe_int(data["exitCode"], f"{label} exitCode")
    if "stderrSummary" in data:
        string_value(data["stderrSummary"], f"{label} stderrSummary")
    if finite_number(data.get("durationMs"), f"{label} durationMs") < 0:
        raise FormatError(f"{label} durationMs must be non-negative")


def _llm_retry(data: dict[str, Any], seq: int, label: str, version: int) -> None:
    non_empty_string(data.get("retryId"), f"{label} retryId")
    coordinates(data, label)
    non_empty_string(data.get("provider"), f"{label} provider")
    literal_value(data.get("mode"), ["normal", "always"], f"{label} mode")
    non_empty_string(data.get("policyKey"), f"{label} policyKey")
    retry = positive_count(data.get("retry"), f"{label} retry")
    if data["mode"] == "normal":
        if retry > positive_count(data.get("maxRetries"), f"{label} maxRetries"):
            raise FormatError(f"{label} retry exceeds maxRetries")
    elif "maxRetries" in data:
        raise FormatError(f"{label} always mode must omit maxRetries")
    delay = finite_number(data.get("delayMs"), f"{label} delayMs")
    if delay < 0:
        raise FormatError(f"{label} delayMs must be non-negative")
    if delay > 2147483647:
        raise FormatError(f"{label} delayMs exceeds the timer range")
    llm_failure(data.get("failure"), f"{label} failure")


def _retry_started(data: dict[str, Any], seq: int, label: str, version: int) -> None:
    non_empty_string(data.get("retryId"), f"{label} retryId")
    coordinates(data, label)
    positive_count(data.get("retry"), f"{label} retry")


def _delivery(data: dict[str, Any], seq: int, label: str, version: int) -> None:
    stated = (
        0
        if "sessionFormatVersion" not in data
        else count(data["sessionFormatVersion"], f"{label} sessionFormatVersion")
    )
    if stated != version:
        return
    non_empty_string(data.get("sessionId"), f"{label} sessionId")
    earlier_seq(data.get("throughSeq"), seq, f"{label} throughSeq")


def _title_request(data: dict[str, Any], seq: int, label: str, version: int) -> None:
    non_empty_string(data.get("titleProvider"), f"{label} titleProvider")
    seq_array(data.get("messageSeqs"), seq, f"{label} messageSeqs", True)
    model_route(data.get("route"), f"{label} route")
    string_value(data.get("system"), f"{label} system")
    array_value(
        data.get("messages"), f"{label} messages", lambda value, _: message_value(value, f"{label} message", version)
    )
    positive_count(data.get("maxTokens"), f"{label} maxTokens")


def _todo_write(data: dict[str, Any], seq: int, label: str, version: int) -> None:
    def item(value: Any, item_label: str) -> None:
        todo = exact_object(value, item_label, ["content", "status"])
        string_value(todo["content"], f"{item_label} content")
        literal_value(todo["status"], ["pending", "in_progress", "completed"], f"{item_label} status")

    array_value(data.get("todos"), f"{label} todos", item)


def _workflow(data: dict[str, Any], label: str) -> None:
    non_empty_string(data.get("runId"), f"{label} runId")
    positive_count(data.get("seq"), f"{label} seq")


def _agent_end(data: dict[str, Any], seq: int, label: str, version: int) -> None:
    _workflow(data, label)
    literal_value(data.get("outcome"), ["completed", "failed", "cancelled"], f"{label} outcome")


def _agent_start(data: dict[str, Any], seq: int, label: str, version: int) -> None:
    _workflow(data, label)
    string_value(data.get("label"), f"{label} label")
    if "phase" in data:
        string_value(data["phase"], f"{label} phase")
    non_empty_string(data.get("childId"), f"{label} childId")


def _code_dispatch(data: dict[str, Any], seq: int, label: str, version: int, *, finished: bool) -> None:
    for key in ("rootCallId", "parentCallId", "subCallId", "name"):
        non_empty_string(data.get(key), f"{label} {key}")
    if finished:
        boolean_value(data.get("isError"), f"{label} isError")
        content_blocks(data.get("content"), f"{label} content", version)


def _tool_result(data: dict[str, Any], seq: int, label: str, version: int) -> None:
    coordinates(data, label)
    message_value(data.get("message"), f"{label} message", version, "tool")
    if "error" in data:
        error = exact_object(data["error"], f"{label} error", ["name", "code"])
        non_empty_string(error["name"], f"{label} error name")
        non_empty_string(error["code"], f"{label} error code")


def _session_title(data: dict[str, Any], seq: int, label: str, version: int) -> None:
    non_empty_string(data.get("title"), f"{label} title")
    seq_array(data.get("messageSeqs"), seq, f"{label} messageSeqs", False)
    _title_source(data.get("source"), f"{label} source")


def _team_queued(data: dict[str, Any], seq: int, label: str, version: int) -> None:
    _team(data, label)
    _team_message(data.get("message"), f"{label} message", version)


def _field(check: Callable[[Any, str], Any], key: str, *, optional: bool = False) -> Callable[..., None]:
    """A payload whose one checked member is ``key`` (``optional``: only when present)."""

    def checked(data: dict[str, Any], seq: int, label: str, version: int) -> None:
        if not optional or key in data:
            check(data.get(key), f"{label} {key}")

    return checked


def _all(*checks: Callable[..., None]) -> Callable[..., None]:
    def checked(data: dict[str, Any], seq: int, label: str, version: int) -> None:
        for check in checks:
            check(data, seq, label, version)

    return checked


def _lit(key: str, allowed: Sequence[Any], *, optional: bool = False) -> Callable[..., None]:
    return _field(lambda value, label: literal_value(value, allowed, label), key, optional=optional)


def _payload(check: Callable[[dict[str, Any], str], None]) -> Callable[..., None]:
    return lambda data, seq, label, version: check(data, label)


_EVENTS: dict[str, Callable[..., None]] = {
    "agent-preset/selected": _field(string_value, "agentPreset"),
    "agent/inbox/spliced": _inbox_spliced,
    "approval/asked": _approval_asked,
    "approval/decided": _all(
        _field(non_empty_string, "id"), _lit("outcome", ["allowed-once", "rejected", "cancelled", "unavailable"])
    ),
    "approval/policy": _all(_lit("policy", ["ask", "never"]), _lit("source", ["delegation"], optional=True)),
    "assistant/chunk": _all(_payload(coordinates), _field(stream_chunk, "chunk")),
    "assistant/message": _assistant_message,
    "command/done": _command_done,
    "command/run": _command_run,
    "compaction/start": _compaction_bracket,
    "compaction/end": _compaction_bracket,
    "compaction/prune": lambda data, seq, label, version: _shadowed(data, seq, label),
    "compaction/summary": _compaction_summary,
    "feedback/record": _field(non_empty_string, "text"),
    "goal/change": _payload(goal_change),
    "hook/invoked": _hook_invoked,
    "hook/result": _hook_result,
    "llm/retry": _llm_retry,
    "llm/retry-started": _retry_started,
    "model/selection": _all(
        _field(non_empty_string, "provider"),
        _field(non_empty_string, "model"),
        _field(non_empty_string, "reasoningEffort", optional=True),
    ),
    "permission/preset": _field(non_empty_string, "preset"),
    "plan/mode": _field(boolean_value, "active"),
    "request/context": _all(
        _field(non_empty_string, "provider"),
        _field(non_empty_string, "model"),
        _field(positive_count, "contextWindow", optional=True),
    ),
    "request/header": _all(
        _field(_request_header, "header"),
        _lit("reason", ["initial", "resume", "change", "series"]),
        _lit("startsSeries", [True], optional=True),
    ),
    "sandbox/mode": _all(
        _lit("mode", ["read-only", "workspace-write", "danger-full-access"]),
        _lit("source", ["delegation"], optional=True),
    ),
    "schedule/change": _payload(_schedule_change),
    "session-log-deepseek/delivery-accepted": _delivery,
    "session/end-seed": lambda data, seq, label, version: None,
    "session/title": _session_title,
    "session/title-llm-request": _title_request,
    "step/end": lambda data, seq, label, version: coordinates(data, label),
    "step/start": lambda data, seq, label, version: coordinates(data, label),
    "subagent/descriptor": _payload(_descriptor),
    "subagent/model-selection-policy": _field(_allowed_models, "allowedModels"),
    "team/member": _all(_payload(_team), _field(_team_member, "member")),
    "team/message/delivered": _all(
        _payload(_team), _field(non_empty_string, "messageId"), _field(non_empty_string, "targetId")
    ),
    "team/message/queued": _team_queued,
    "team/task": _all(_payload(_team), _field(_team_task, "task")),
    "todo/write": _todo_write,
    "tool-workflow/agent-end": _agent_end,
    "tool-workflow/agent-start": _agent_start,
    "tool-workflow/run-end": _all(
        _field(non_empty_string, "runId"), _lit("stopReason", ["completed", "cancelled", "error"])
    ),
    "tool-workflow/run-start": _all(_field(non_empty_string, "runId"), _field(non_empty_string, "name")),
    "tool/call": _all(
        lambda data, seq, label, version: coordinates(data, label),
        _field(non_empty_string, "callId"),
        _field(non_empty_string, "name"),
        _field(string_value, "arguments"),
    ),
    "tool/code-dispatch": lambda data, seq, label, version: _code_dispatch(data, seq, label, version, finished=True),
    "tool/code-dispatch-start": lambda data, seq, label, version: _code_dispatch(
        data, seq, label, version, finished=False
    ),
    "tool/result": _tool_result,
    "turn/end": _all(_field(count, "turn"), _field(turn_end_reason, "reason")),
    "turn/start": _field(count, "turn"),
    "user/message": lambda data, seq, label, version: message_value(data, label, version, "user"),
    "web/deepseek-search-llm-request": _all(
        _field(non_empty_string, "endpoint"), _field(non_empty_string, "apiVersion"), _field(_search_body, "body")
    ),
}


def check_payload_semantics(event: dict[str, Any], version: int) -> None:
    """Check what a known released event's payload holds (dsh's ``assertReleasedPayloadSemantics``).

    ``event`` has already passed the member check of its generation; a violation
    raises :class:`~dshpy.log.formats.chain.FormatError` with dsh's message.
    """
    kind, seq = event["type"], event["seq"]
    data = object_of(event.get("data"), f"{kind} {seq} data")
    check = _EVENTS.get(kind)
    if check is None:
        raise FormatError(f"released payload validator is missing event {js(kind)}")
    check(data, seq, f"{kind} {seq}", version)


def check_released_payload(event: dict[str, Any], version: int) -> None:
    """A v0/v1 event's payload: its members, then what they hold (dsh's ``assertReleasedEventPayload``)."""
    if check_payload(event, version):
        check_payload_semantics(event, version)
