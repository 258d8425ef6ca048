"""Per-event data checks: the declared shape (pydantic) plus dsh v4's local admission rules.

These checks look at one event alone. Rules that need the rest of the log (surface
positions, turn nesting, tool pairing) live in :mod:`dshpy.log`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import TypeAdapter, ValidationError
from pydantic_core import SchemaValidator

from dshpy.core.event_data import EVENT_DATA_SHAPES
from dshpy.core.json import _RipeningDict, _SealedDict
from dshpy.core.messages import TYPE_TAGS
from dshpy.errors import EventError

__all__ = ["validate_event_data"]

_Validate = Callable[..., Any]

_FAST: dict[str, _Validate | None] = {}
"""Each type's fast validator (``None``: no declared shape), built on first use with its exact one.

Building all of them costs ~25 ms, which every process would pay at import (``dshpy sessions list``
never validates an event). The bound ``validate_python`` of the compiled validator is kept rather
than a ``TypeAdapter``, whose Python-level wrapper costs as much again as validating a small event."""

_EXACT: dict[str, _Validate] = {}
"""Each type's validator for its declared shape as written: the judge of every event the fast one
does not accept, and the source of every error message."""

_CHANGE_BLOCKS = frozenset({"tool-addition", "tool-removal"})
"""Block types the fast validators leave to the exact path: only developer messages may carry them,
with rules of their own (see :func:`_check_message`) that the fast path does not repeat."""

_ANY_DICT = {"type": "dict", "keys_schema": {"type": "str"}, "values_schema": {"type": "any"}}


def _fast_schema(schema: Any) -> Any:
    """A copy of a pydantic core schema that accepts no sealed event data the original refuses.

    It differs in three places, each costly for pydantic-core and each tighter or equivalent
    for sealed data (whose strings are ``str`` and whose keys are strings):

    * A union with a callable discriminator from :data:`~dshpy.core.messages.TYPE_TAGS` becomes
      one keyed on the ``type`` field, listing only the types that discriminator sends to a
      checked shape (tool-change blocks excepted). Unknown types, which the original passes on
      to its ``other`` shape, fail here and go to the exact validator.
    * Such a union's members do not check ``type`` again when it is a ``Literal`` admitting the
      key: the union matched the string exactly to pick them.
    * ``dict[str, Any]`` becomes an ``isinstance(value, dict)`` check. pydantic-core copies a
      ``dict`` subclass (sealed data is all ``_SealedDict``) on a slow path, checking that every
      key is a string (~0.3 µs for a small one); :func:`~dshpy.core.json.freeze_json` refuses
      other keys, and JSON has none.
    """
    definitions: dict[str, Any] = {}
    if isinstance(schema, dict) and schema.get("type") == "definitions":
        definitions = {definition["ref"]: definition for definition in schema["definitions"]}

    def member(node: Any, kind: str) -> Any:
        """The choice for ``type`` ``kind`` (a copy of its own, so that it may skip ``type``)."""
        if node.get("type") == "definition-ref":
            node = {key: value for key, value in definitions[node["schema_ref"]].items() if key != "ref"}
        if node.get("type") == "typed-dict":
            fields = node["fields"]
            tag = fields.get("type")
            if (
                tag is not None
                and "validation_alias" not in tag
                and tag["schema"].keys() == {"type", "expected"}
                and tag["schema"]["type"] == "literal"
                and kind in tag["schema"]["expected"]
            ):
                node = {**node, "fields": {name: field for name, field in fields.items() if name != "type"}}
        return convert(node)

    def convert(node: Any) -> Any:
        if isinstance(node, list):
            return [convert(item) for item in node]
        if not isinstance(node, dict):
            return node
        if node == _ANY_DICT:
            return {"type": "is-instance", "cls": dict}
        if node.get("type") == "tagged-union" and callable(node["discriminator"]):
            tags = TYPE_TAGS.get(node["discriminator"])
            if tags is not None:
                choices = node["choices"]
                return {
                    "type": "tagged-union",
                    "choices": {
                        kind: member(choices[tag], kind) for kind, tag in tags.items() if kind not in _CHANGE_BLOCKS
                    },
                    "discriminator": "type",
                }
        return {key: convert(value) for key, value in node.items()}

    return convert(schema)


def _build(event_type: str) -> _Validate | None:
    shape = EVENT_DATA_SHAPES.get(event_type)
    if shape is None:
        fast = None
    else:
        adapter: TypeAdapter[Any] = TypeAdapter(shape)
        _EXACT[event_type] = adapter.validator.validate_python
        fast = SchemaValidator(_fast_schema(adapter.core_schema)).validate_python
    _FAST[event_type] = fast  # a race builds it twice, harmlessly
    return fast


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

    Sealed data the fast validator accepts, and whose remaining rules hold, passes at once;
    anything else is judged by the exact validator and the full rules, which also word the error.
    """
    try:
        fast = _FAST[event_type]
    except KeyError:
        fast = _build(event_type)
    if fast is None:
        return
    if type(data) is _SealedDict or type(data) is _RipeningDict:  # a replayed event's data may not have ripened
        try:
            # strict per call, as for the exact validator: each TypedDict's config would override a global one
            fast(data, strict=True)
        except ValidationError:
            pass
        else:
            settled = _SETTLED.get(event_type)
            if settled is None or settled(data, seq):
                return
    _validate_exactly(event_type, data, seq)


def _validate_exactly(event_type: str, data: Any, seq: int | None) -> None:
    """The declared shape, then the rules below: the whole judgement, wording every refusal.

    A type with rules here needs an entry in :data:`_SETTLED`, else its fast path would skip them.
    """
    try:
        _EXACT[event_type](data, strict=True)
    except ValidationError as error:
        raise _fail(event_type, seq, _describe(error)) from None
    if event_type in _MESSAGE_TYPES:
        _check_message(event_type, data, seq)
    elif event_type == "request/header":
        _check_request_header(data, seq)
    elif event_type == "turn/end":
        _check_turn_end(data, seq)


# -- the rules beyond the shape, once the fast validator has accepted the data -----------------------------------------
# Each returns whether the event passes them; False sends it to the exact path, which words the error. Accepted by the
# fast validator, the data is sealed, the declared shape accepts it too, and its content blocks are all of the
# field-checked types other than the tool-change ones (no tool-result wrapper, no tool-addition or tool-removal):
# what remains of _check_message is below, per type.


def _user_settled(data: Any, seq: int | None) -> bool:
    kind = data["source"]["kind"]
    return bool(data["id"] and kind and kind != "plugin")


def _system_settled(data: Any, seq: int | None) -> bool:
    message = data["message"]
    return bool(message["id"]) and message["source"]["kind"] == "system-prompt"


def _developer_settled(data: Any, seq: int | None) -> bool:
    message = data["message"]
    kind = message["source"]["kind"]
    return bool(message["id"] and kind and kind != "plugin") and "headerSeq" not in data


def _assistant_settled(data: Any, seq: int | None) -> bool:
    message = data["message"]
    source = message["source"]
    provider = source.get("provider")
    model = source.get("model")
    return bool(
        message["id"]
        and source["kind"] == "model"
        and isinstance(provider, str)
        and provider
        and isinstance(model, str)
        and model
    )


def _tool_result_settled(data: Any, seq: int | None) -> bool:
    message = data["message"]
    source = message["source"]
    call_id = source.get("callId")
    return bool(
        message["id"]
        and source["kind"] == "tool"
        and isinstance(call_id, str)
        and call_id
        and message["toolCallId"] == call_id
        and ("error" not in data or message.get("isError") is True)
    )


def _turn_end_settled(data: Any, seq: int | None) -> bool:
    reason = data["reason"]
    return reason["kind"] != "error" or "error" in reason


def _request_header_settled(data: Any, seq: int | None) -> bool:
    _check_request_header(data, seq)  # raises what the exact path would: the shape passed there too
    return True


_SETTLED: dict[str, Callable[[Any, int | None], bool]] = {  # every type _validate_exactly has rules for
    "user/message": _user_settled,
    "system/message": _system_settled,
    "developer/message": _developer_settled,
    "assistant/message": _assistant_settled,
    "tool/result": _tool_result_settled,
    "turn/end": _turn_end_settled,
    "request/header": _request_header_settled,
}


# -- the rules beyond the shape, as written ----------------------------------------------------------------------------


def _check_turn_end(data: Any, seq: int | None) -> None:
    reason = data["reason"]
    if reason["kind"] == "error" and "error" not in reason:
        raise _fail("turn/end", seq, "an error turn/end needs reason.error")


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
