"""Value checks shared by dsh's released payload validators, with dsh's wording.

The primitives of dsh's ``assertReleasedPayloadSemantics`` (``@deepseek-ai/dsh-session-format-v0-to-v1``):
JavaScript's strict equality for literals (``true`` is not ``1``), safe-integer counts,
earlier-seq references, and the small records several payloads share (LLM failures,
token usage, model routes, goal changes). Each raises
:class:`~dshpy.log.formats.chain.FormatError` with the message dsh would give.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from dshpy.log.formats.chain import FormatError
from dshpy.log.formats.released import check_member_keys, count, object_of, safe_int

__all__ = [
    "Validator",
    "array_value",
    "boolean_value",
    "coordinates",
    "earlier_seq",
    "exact_object",
    "finite_number",
    "goal_change",
    "js_same",
    "json_equal",
    "json_object",
    "literal_value",
    "llm_failure",
    "model_route",
    "non_empty_string",
    "positive_count",
    "seq_array",
    "string_value",
    "token_usage",
]

Validator = Callable[[Any, str], Any]
"""A check of one value under a diagnostic label."""


def json_object(value: Any, label: str) -> dict[str, Any]:
    """A JSON object (dsh's ``releasedV0Record``)."""
    return object_of(value, label)


def exact_object(value: Any, label: str, required: Sequence[str], optional: Sequence[str] = ()) -> dict[str, Any]:
    """A JSON object with every ``required`` member and nothing outside ``optional`` (dsh's ``exactRecord``)."""
    record = json_object(value, label)
    check_member_keys(record, required, optional, label)
    return record


def string_value(value: Any, label: str) -> None:
    """A string (empty allowed)."""
    if not isinstance(value, str):
        raise FormatError(f"{label} must be a string")


def non_empty_string(value: Any, label: str) -> None:
    """A non-empty string: ids, names and providers."""
    if not isinstance(value, str) or not value:
        raise FormatError(f"{label} must be a non-empty string")


def boolean_value(value: Any, label: str) -> None:
    """``true`` or ``false``."""
    if not isinstance(value, bool):
        raise FormatError(f"{label} must be a boolean")


def positive_count(value: Any, label: str) -> int:
    """A safe integer above zero."""
    result = count(value, label)
    if result == 0:
        raise FormatError(f"{label} must be positive")
    return result


def finite_number(value: Any, label: str) -> float:
    """A finite JSON number, never ``-0`` (durations and delays may be fractional)."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or (isinstance(value, float) and (not math.isfinite(value) or (value == 0 and math.copysign(1, value) < 0)))
    ):
        raise FormatError(f"{label} must be a finite number")
    return value


def _js_string(value: Any) -> str:
    """``String(value)`` for the literals dsh lists (strings, ``true``, small integers)."""
    if value is True:
        return "true"
    if value is False:
        return "false"
    return str(value)


def js_same(candidate: Any, value: Any) -> bool:
    """JavaScript's ``===`` between a literal and a JSON value (``true`` is not ``1``)."""
    if isinstance(candidate, bool) or isinstance(value, bool):
        return candidate is value
    if isinstance(candidate, int | float) and isinstance(value, int | float):
        return candidate == value
    return type(candidate) is type(value) and candidate == value


def literal_value(value: Any, allowed: Sequence[Any], label: str) -> None:
    """One of ``allowed`` (dsh lists them with ``String()`` in the message)."""
    if not any(js_same(candidate, value) for candidate in allowed):
        raise FormatError(f"{label} must be one of {', '.join(map(_js_string, allowed))}")


def array_value(value: Any, label: str, validate: Validator) -> list[Any]:
    """An array whose members each pass ``validate`` under ``<label>[i]``."""
    if not isinstance(value, list):
        raise FormatError(f"{label} must be an array")
    for index, member in enumerate(value):
        validate(member, f"{label}[{index}]")
    return value


def coordinates(data: dict[str, Any], label: str) -> None:
    """The ``turn`` and ``step`` counts an in-step payload carries."""
    count(data.get("turn"), f"{label} turn")
    count(data.get("step"), f"{label} step")


def earlier_seq(value: Any, seq: int, label: str) -> int:
    """A seq that points back: a reference to a later event would not survive renumbering."""
    result = count(value, label)
    if result >= seq:
        raise FormatError(f"{label} must identify an earlier event")
    return result


def seq_array(value: Any, seq: int, label: str, non_empty: bool) -> list[Any]:
    """Distinct earlier seqs (``non_empty``: at least one)."""
    seen: set[int] = set()

    def member(entry: Any, entry_label: str) -> None:
        earlier = earlier_seq(entry, seq, entry_label)
        if earlier in seen:
            raise FormatError(f"{label} repeats seq {earlier}")
        seen.add(earlier)

    values = array_value(value, label, member)
    if non_empty and not values:
        raise FormatError(f"{label} must be non-empty")
    return values


def llm_failure(value: Any, label: str) -> None:
    """An LLM failure record: message, code, an HTTP status in range, a positive retry-after."""
    failure = exact_object(value, label, ["message", "code"], ["status", "providerRetryAfterMs", "requestId"])
    non_empty_string(failure.get("message"), f"{label} message")
    non_empty_string(failure.get("code"), f"{label} code")
    if "status" in failure:
        status = safe_int(failure["status"], f"{label} status")
        if not 100 <= status <= 599:
            raise FormatError(f"{label} status must be 100 through 599")
    if (
        "providerRetryAfterMs" in failure
        and finite_number(failure["providerRetryAfterMs"], f"{label} providerRetryAfterMs") <= 0
    ):
        raise FormatError(f"{label} providerRetryAfterMs must be positive")
    if "requestId" in failure:
        non_empty_string(failure["requestId"], f"{label} requestId")


def token_usage(value: Any, label: str) -> None:
    """Token counts: input and output always, the cache and reasoning counts optionally."""
    usage = exact_object(
        value,
        label,
        ["inputTokens", "outputTokens"],
        ["totalTokens", "cacheReadTokens", "cacheWriteTokens", "reasoningTokens"],
    )
    for key, member in usage.items():
        count(member, f"{label} {key}")


def model_route(value: Any, label: str) -> None:
    """A ``{provider, model}`` pair."""
    route = exact_object(value, label, ["provider", "model"])
    non_empty_string(route["provider"], f"{label} provider")
    non_empty_string(route["model"], f"{label} model")


def goal_change(data: dict[str, Any], label: str) -> None:
    """A ``goal/change`` payload: a clear, or a snapshot whose phase agrees with its blocked reason."""
    literal_value(data.get("kind"), ["goal/change"], f"{label} kind")
    literal_value(data.get("version"), [1], f"{label} version")
    if data.get("operation") == "clear":
        check_member_keys(data, ["kind", "version", "operation", "cleared", "clearedAt"], [], f"{label} data")
        ref = exact_object(data["cleared"], f"{label} cleared", ["id", "revision"])
        non_empty_string(ref["id"], f"{label} cleared id")
        positive_count(ref["revision"], f"{label} cleared revision")
        count(data["clearedAt"], f"{label} clearedAt")
        return
    check_member_keys(
        data, ["kind", "version", "operation", "goal", "roundsStarted", "createdAt", "updatedAt"], [], f"{label} data"
    )
    literal_value(data["operation"], ["create", "edit", "pause", "resume", "complete", "block"], f"{label} operation")
    goal = exact_object(
        data["goal"], f"{label} goal", ["id", "revision", "objective", "phase", "maxGoalRounds"], ["blockedReason"]
    )
    non_empty_string(goal["id"], f"{label} goal id")
    positive_count(goal["revision"], f"{label} goal revision")
    non_empty_string(goal["objective"], f"{label} goal objective")
    literal_value(goal["phase"], ["active", "paused", "blocked", "complete"], f"{label} goal phase")
    positive_count(goal["maxGoalRounds"], f"{label} goal maxGoalRounds")
    if goal["phase"] == "blocked":
        blocked = exact_object(goal.get("blockedReason"), f"{label} goal blockedReason", ["code", "message"])
        non_empty_string(blocked["code"], f"{label} goal blocked code")
        non_empty_string(blocked["message"], f"{label} goal blocked message")
    elif "blockedReason" in goal:
        raise FormatError(f"{label} goal blockedReason requires blocked phase")
    for key in ("roundsStarted", "createdAt", "updatedAt"):
        count(data[key], f"{label} {key}")


def json_equal(left: Any, right: Any) -> bool:
    """Deep JSON equality with JavaScript's types (``true`` is not ``1``)."""
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(json_equal(left[key], right[key]) for key in left)
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(map(json_equal, left, right))
    if isinstance(left, dict | list) or isinstance(right, dict | list):
        return False
    return (left is None and right is None) or js_same(left, right)
