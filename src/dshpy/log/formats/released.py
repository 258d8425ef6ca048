"""What dsh's released formats v0–v3 admit: the event inventory, payload members, and value checks.

Each edge checks its input against the inventory its source generation was released
with before converting anything, because converting an event whose members it does
not know could silently drop or misplace a reference. The tables are dsh 0.2.1's
frozen ones (``RELEASED_V0_EVENT_DISPOSITIONS`` and its v2 successor); the messages
are dsh's, so a refusal reads the same whichever harness reports it.

The members of each payload are checked here, what they hold (dsh's
``assertReleasedPayloadSemantics``) in :mod:`dshpy.log.formats.payload_semantics`.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

from dshpy.core.json import MAX_SAFE_INTEGER
from dshpy.log.formats.chain import FormatError, MigrationRefusedError

__all__ = [
    "PACKED_TAGS",
    "RELEASED_V0_EVENT_DISPOSITIONS",
    "RELEASED_V2_EVENT_DISPOSITIONS",
    "Disposition",
    "check_header_fields",
    "check_member_keys",
    "check_payload",
    "count",
    "decode_seq_ranges",
    "is_object",
    "js",
    "object_of",
    "safe_int",
]

PACKED_TAGS = frozenset({"text-chunks", "reasoning-chunks", "tool-call-chunks"})
"""Row types of v0/v1 packed ``assistant/chunk`` runs (dsh-dataplane §6.5)."""


def js(value: Any) -> str:
    """``JSON.stringify(value)``, as dsh quotes names and values in its messages."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def is_object(value: Any) -> TypeGuard[dict[str, Any]]:
    """A JSON object (dsh's ``isSessionFormatJsonObject``)."""
    return isinstance(value, dict)


def object_of(value: Any, label: str, *, suffix: str = " must be a JSON object") -> dict[str, Any]:
    """``value`` if it is a JSON object, else a :class:`FormatError` ``<label><suffix>``."""
    if not isinstance(value, dict):
        raise FormatError(f"{label}{suffix}")
    return value


def count(value: Any, label: str) -> int:
    """A non-negative safe integer (dsh's ``sessionFormatCount``)."""
    if type(value) is not int or not 0 <= value <= MAX_SAFE_INTEGER:
        raise FormatError(f"{label} must be a non-negative safe integer")
    return value


def safe_int(value: Any, label: str) -> int:
    """A safe integer, possibly negative (dsh's ``sessionFormatSafeInteger``)."""
    if type(value) is not int or abs(value) > MAX_SAFE_INTEGER:
        raise FormatError(f"{label} must be a safe integer")
    return value


def check_member_keys(record: dict[str, Any], required: Sequence[str], optional: Sequence[str], label: str) -> None:
    """v0/v1 wording: an unexpected member is reported before a missing one."""
    allowed = {*required, *optional}
    unexpected = next((key for key in record if key not in allowed), None)
    if unexpected is not None:
        raise FormatError(f"{label} has unexpected member {js(unexpected)}")
    missing = next((key for key in required if key not in record), None)
    if missing is not None:
        raise FormatError(f"{label} lacks required member {js(missing)}")


@dataclass(frozen=True, slots=True)
class Disposition:
    """The payload members a released event type has: always, optionally, and kept opaque."""

    required: tuple[str, ...]
    optional: tuple[str, ...] = ()


def _d(required: Sequence[str], optional: Sequence[str] = ()) -> Disposition:
    return Disposition(tuple(required), tuple(optional))


RELEASED_V0_EVENT_DISPOSITIONS: dict[str, Disposition] = {
    "agent-preset/selected": _d(["agentPreset"]),
    "agent/inbox/spliced": _d(["target", "start", "inserted"], ["removedCount", "outcome"]),
    "approval/asked": _d(["id", "toolName"], ["callId", "reason"]),
    "approval/decided": _d(["id", "outcome"]),
    "approval/policy": _d(["policy"], ["source"]),
    "assistant/chunk": _d(["turn", "step", "chunk"]),
    "assistant/message": _d(["turn", "step", "message"], ["usage", "interrupted"]),
    "command/done": _d(["commandId", "kind"], ["text", "sourceEventSeq"]),
    "command/run": _d(["commandId", "name", "source"], ["args"]),
    "compaction/end": _d(["compactionId", "turn"], ["sourceCommandId", "error"]),
    "compaction/prune": _d(["shadowedRange", "shadowedSeqs", "shadowedTokenCount"]),
    "compaction/start": _d(["compactionId", "turn"], ["sourceCommandId"]),
    "compaction/summary": _d(
        ["compactionId", "summary", "shadowedRange", "shadowedSeqs", "shadowedTokenCount", "provider", "model"],
        ["sourceCommandId", "maxTokens", "usage", "rawOutput", "llmStreamCall"],
    ),
    "feedback/record": _d(["text"]),
    "goal/change": _d(
        ["kind", "version", "operation"], ["goal", "roundsStarted", "createdAt", "updatedAt", "cleared", "clearedAt"]
    ),
    "hook/invoked": _d(["turn", "point", "dialect", "handlerId"], ["matcher"]),
    "hook/result": _d(["turn", "point", "handlerId", "decision", "durationMs"], ["exitCode", "stderrSummary"]),
    "llm/retry": _d(
        ["retryId", "turn", "step", "provider", "mode", "policyKey", "retry", "delayMs", "failure"], ["maxRetries"]
    ),
    "llm/retry-started": _d(["retryId", "turn", "step", "retry"]),
    "model/selection": _d(["provider", "model"], ["reasoningEffort"]),
    "permission/preset": _d(["preset"]),
    "plan/mode": _d(["active"]),
    "request/context": _d(["provider", "model"], ["contextWindow"]),
    "request/header": _d(["header", "reason"], ["startsSeries"]),
    "sandbox/mode": _d(["mode"], ["source"]),
    "schedule/change": _d(["version", "operation"], ["schedule", "id", "acceptedAt"]),
    "session-log-deepseek/delivery-accepted": _d(["sessionId", "throughSeq"]),
    "session/end-seed": _d([]),
    "session/title": _d(["title", "messageSeqs", "source"]),
    "session/title-llm-request": _d(["titleProvider", "messageSeqs", "route", "system", "messages", "maxTokens"]),
    "step/end": _d(["turn", "step"]),
    "step/start": _d(["turn", "step"]),
    "subagent/descriptor": _d(
        ["mode", "version", "provider"],
        ["label", "agentProvider", "agentModel", "agentReasoningEffort", "persona", "toolFilter"],
    ),
    "subagent/model-selection-policy": _d(["allowedModels"]),
    "team/member": _d(["version", "teamId", "member"]),
    "team/message/delivered": _d(["version", "teamId", "messageId", "targetId"]),
    "team/message/queued": _d(["version", "teamId", "message"]),
    "team/task": _d(["version", "teamId", "task"]),
    "todo/write": _d(["todos"]),
    "tool-workflow/agent-end": _d(["runId", "seq", "outcome"]),
    "tool-workflow/agent-start": _d(["runId", "seq", "label", "childId"], ["phase"]),
    "tool-workflow/run-end": _d(["runId", "stopReason"]),
    "tool-workflow/run-start": _d(["runId", "name"]),
    "tool/call": _d(["turn", "step", "callId", "name", "arguments"]),
    "tool/code-dispatch": _d(["rootCallId", "parentCallId", "subCallId", "name", "arguments", "isError", "content"]),
    "tool/code-dispatch-start": _d(["rootCallId", "parentCallId", "subCallId", "name", "arguments"]),
    "tool/result": _d(["turn", "step", "message"], ["error", "meta"]),
    "turn/end": _d(["turn", "reason"]),
    "turn/start": _d(["turn"]),
    "user/message": _d(["role", "id", "content", "source"]),
    "web/deepseek-search-llm-request": _d(["endpoint", "apiVersion", "body"]),
}
"""dsh's frozen released-v0 event inventory and payload members (also v1's)."""

RELEASED_V2_EVENT_DISPOSITIONS: dict[str, Disposition] = {
    **{
        kind: disposition
        for kind, disposition in RELEASED_V0_EVENT_DISPOSITIONS.items()
        if kind
        not in ("assistant/chunk", "assistant/message", "session-log-deepseek/delivery-accepted", "session/end-seed")
    },
    "assistant/attempt": _d(["turn", "step", "stream"]),
    "assistant/message": _d(["turn", "step", "message", "stream"], ["usage", "interrupted"]),
    "session-log-deepseek/delivery-accepted": _d(["sessionId", "throughSeq"], ["sessionFormatVersion"]),
    "session/end-seed": _d([], ["inherited"]),
}
"""The released-v2 inventory: chunks folded into attempts, the fork marker may say ``inherited``."""


def check_payload(event: dict[str, Any], version: int) -> bool:
    """A v0/v1 event's payload has exactly its released members (dsh's ``assertReleasedEventPayload``).

    ``False``: the payload is one dsh carries without looking inside (a v1 subagent
    descriptor of another version), so its nested semantics are not checked either.
    """
    kind = event["type"]
    seq = event["seq"]
    disposition = RELEASED_V0_EVENT_DISPOSITIONS.get(kind)
    if disposition is None:
        raise MigrationRefusedError(
            f"format v0 contains unknown historical event type {js(kind)} at seq {seq}; migration refuses "
            "unknown historical events even when ignorable"
        )
    data = object_of(event.get("data"), f"{kind} {seq} data")
    if kind == "subagent/descriptor" and data.get("version") != 3:
        descriptor_version = count(data.get("version"), f"{kind} {seq} version")
        if version == 0:
            raise MigrationRefusedError(f"{kind} {seq} uses unsupported descriptor version {descriptor_version}")
        return False
    optional = disposition.optional
    if version == 1 and kind == "session-log-deepseek/delivery-accepted":
        optional = (*optional, "sessionFormatVersion")
    check_member_keys(data, disposition.required, optional, f"{kind} {seq} data")
    return True


def check_header_fields(record: dict[str, Any], label: str) -> None:
    """The value rules every released header shares (types of the optional fields, cwd absolute, origin)."""
    if not isinstance(record.get("id"), str):
        raise FormatError(f"{label} id must be a string")
    count(record.get("createdAt"), f"{label} createdAt")
    count(record.get("delegationDepth"), f"{label} delegationDepth")
    for key in ("cwd", "parentSession", "agentPreset"):
        if key in record and not isinstance(record[key], str):
            raise FormatError(f"{label} {key} must be a string")
    if isinstance(record.get("cwd"), str) and not os.path.isabs(record["cwd"]):
        raise FormatError(f"{label} cwd must be absolute")
    if "origin" in record and record["origin"] != "subagent":
        raise FormatError(f'{label} origin must be "subagent"')


def decode_seq_ranges(value: Any, seq: int) -> list[int]:
    """A stored ``sourceEventSeqs`` with ``[start, end]`` runs expanded (idempotent on a plain list)."""
    if not isinstance(value, list):
        raise FormatError("sourceEventSeqs must be an array")
    if all(type(entry) is int for entry in value):
        if len(value) > seq:
            raise FormatError("sourceEventSeqs exceeds its event seq")
        return [count(entry, "sourceEventSeqs member") for entry in value]
    output: list[int] = []
    for entry in value:
        if not isinstance(entry, list):
            if len(output) >= seq:
                raise FormatError("sourceEventSeqs exceeds its event seq")
            output.append(count(entry, "sourceEventSeqs member"))
            continue
        if len(entry) != 2:
            raise FormatError("sourceEventSeqs range must be a [start, end] pair")
        start = count(entry[0], "sourceEventSeqs range start")
        end = count(entry[1], "sourceEventSeqs range end")
        if end < start or end - start + 1 > seq - len(output):
            raise FormatError("sourceEventSeqs range exceeds its event seq")
        output.extend(range(start, end + 1))
    if any(later <= earlier for earlier, later in itertools.pairwise(output)):
        raise FormatError("sourceEventSeqs ranges must be strictly increasing")
    return output
