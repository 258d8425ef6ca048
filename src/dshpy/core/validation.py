"""Per-event data checks: the declared shape (pydantic) plus dsh v4's local admission rules.

These checks look at one event alone. Rules that need the rest of the log (surface
positions, turn nesting, tool pairing) live in :mod:`dshpy.log`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import TypeAdapter, ValidationError

from dshpy.core.event_data import EVENT_DATA_SHAPES
from dshpy.errors import EventError

__all__ = ["validate_event_data"]

_Validate = Callable[..., Any]

_VALIDATORS: dict[str, _Validate | None] = {}
"""Each type's compiled ``validate_python`` (``None``: no declared shape), built on first use: building
all of them costs ~70 ms, which every process would pay at import (``dshpy sessions list`` never
validates an event). The bound method of the compiled validator is kept rather than the
``TypeAdapter``, whose Python-level wrapper costs as much again as validating a small event."""


def _validator(event_type: str) -> _Validate | None:
    try:
        return _VALIDATORS[event_type]
    except KeyError:
        shape = EVENT_DATA_SHAPES.get(event_type)
        validate = None if shape is None else TypeAdapter(shape).validator.validate_python
        _VALIDATORS[event_type] = validate  # a race builds it twice, harmlessly
        return validate

_MESSAGE_TYPES = frozenset({"user/message", "system/message", "developer/message", "assistant/message", "tool/result"})


def _fail(event_type: str, seq: int | None, detail: str) -> EventError:
    where = f" at seq {seq}" if seq is not None else ""
    return EventError(f'event "{event_type}"{where}: {detail}', event_type=event_type, seq=seq)


def _describe(error: ValidationError) -> str:
    first = error.errors()[0]
    location = ".".join(str(part) for part in first["loc"] if not str(part).startswith("function-"))
    return f"data.{location}: {first['msg']}" if location else f"data: {first['msg']}"


def validate_event_data(event_type: str, data: Any, seq: int | None = None) -> None:
    """Raise :class:`EventError` when ``data`` is not acceptable for ``event_type``.

    Types without a declared shape (log-only records dshpy carries but does not read)
    pass as long as their data is JSON, which the caller has already ensured.
    """
    validate = _validator(event_type)
    if validate is None:
        return
    try:
        validate(data, strict=True)
    except ValidationError as error:
        raise _fail(event_type, seq, _describe(error)) from None
    if event_type in _MESSAGE_TYPES:
        _check_message(event_type, data, seq)
    elif event_type == "request/header":
        _check_request_header(data, seq)
    elif event_type == "turn/end":
        reason = data["reason"]
        if reason["kind"] == "error" and "error" not in reason:
            raise _fail(event_type, seq, "an error turn/end needs reason.error")


def _check_message(event_type: str, data: Any, seq: int | None) -> None:
    message = data if event_type == "user/message" else data["message"]
    if not message["id"]:
        raise _fail(event_type, seq, "message.id must be a non-empty string")
    source = message["source"]
    kind = source["kind"]
    if not kind:
        raise _fail(event_type, seq, "message.source.kind must be a non-empty string")
    if kind == "plugin":
        raise _fail(event_type, seq, 'message source kind "plugin" is retired in format v4; name the producer')
    if event_type == "assistant/message":
        if kind != "model":
            raise _fail(event_type, seq, 'assistant messages need source {"kind": "model", ...}')
        for key in ("provider", "model"):
            value = source.get(key)
            if not isinstance(value, str) or not value:
                raise _fail(event_type, seq, f"assistant message source lacks {key}")
    elif event_type == "system/message" and kind != "system-prompt":
        raise _fail(event_type, seq, 'system messages need source {"kind": "system-prompt"}')
    elif event_type == "tool/result":
        call_id = source.get("callId")
        if kind != "tool" or not isinstance(call_id, str) or not call_id:
            raise _fail(event_type, seq, 'tool results need source {"kind": "tool", "callId": ...}')
        if message["toolCallId"] != call_id:
            raise _fail(event_type, seq, "message.toolCallId differs from message.source.callId")
        if "error" in data and message.get("isError") is not True:
            raise _fail(event_type, seq, "error requires message.isError === true")
    for block in message["content"]:
        block_type = block["type"]
        if block_type == "tool-result":
            raise _fail(event_type, seq, "the tool-result wrapper block is retired in format v4 (role tool)")
        if block_type in ("tool-addition", "tool-removal"):
            if event_type != "developer/message":
                raise _fail(event_type, seq, "tool-change blocks require developer role")
            if not block["toolName"]:
                raise _fail(event_type, seq, f"{block_type} requires a nonempty toolName")
            if block_type == "tool-addition" and "tool" in block:
                raise _fail(event_type, seq, "tool-addition must omit inline tool definitions")
    if event_type == "developer/message":
        has_additions = any(block["type"] == "tool-addition" for block in message["content"])
        if has_additions != ("headerSeq" in data):
            raise _fail(event_type, seq, "requires headerSeq exactly when tool additions are present")


def _check_request_header(data: Any, seq: int | None) -> None:
    header = data["header"]
    if "system" in header:
        raise _fail("request/header", seq, "must omit header.system; use system/message")
    tools = header.get("tools")
    if isinstance(tools, list) and not tools:
        raise _fail("request/header", seq, "must omit empty tools")
    defaults = header.get("adapterDefaults")
    if isinstance(defaults, dict) and not defaults:
        raise _fail("request/header", seq, "must omit empty adapterDefaults")
    config = header.get("config")
    if not isinstance(config, dict):
        raise _fail("request/header", seq, "header.config must be an object")
    for key in ("provider", "model"):
        value = config.get(key)
        if not isinstance(value, str) or not value:
            raise _fail("request/header", seq, f"header.config lacks {key}")
