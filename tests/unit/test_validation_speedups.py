"""The fast validation path (core/validation.py) decides every event as the exact path does, with the same words.

``validate_event_data`` first tries a faster variant of each shape on sealed data (string-keyed unions instead of
callable discriminators, ``isinstance`` for ``dict[str, Any]``) and a trimmed rule set; anything it does not accept
goes through the shape as declared and the full rules, which word the error. These tests pin that split: the fast
path never accepts what the exact one refuses, and unknown blocks and records still pass.
"""

import copy
import random

import pytest
from pydantic import TypeAdapter

import dshpy
from dshpy.core import validation
from dshpy.core.event_data import EVENT_DATA_SHAPES
from dshpy.core.json import NotJsonError, thaw
from dshpy.core.messages import TYPE_TAGS, _block_tag, _record_tag

# -- one valid example per declared type ------------------------------------------------------------------------------


def _user(text="hi", **extra):
    content = [{"type": "text", "text": text}]
    return {"id": "u1", "role": "user", "content": content, "source": {"kind": "user"}, **extra}


_STREAM = [
    {"type": "chunk", "time": 0, "chunk": {"type": "block-start", "index": 0, "blockType": "text"}},
    {"type": "text-chunks", "time0": 0, "index": 0, "dt": [1, 1], "texts": ["st", "ep", " 1"]},
    {"type": "reasoning-chunks", "time0": 3, "index": 1, "dt": [], "texts": ["hm"]},
    {"type": "tool-call-chunks", "time0": 4, "index": 2, "dt": [1], "id": "c1", "name": "run", "args": ["{", "}"]},
    {"type": "tool-call-chunks", "time0": 6, "index": 2, "dt": [], "id": "c1", "args": [""]},
    {"type": "chunk", "time": 7, "chunk": {"type": "usage", "usage": {"inputTokens": 100, "outputTokens": 20}}},
    {"type": "chunk", "time": 7, "chunk": {"type": "finish", "reason": {"kind": "stop"}}},
]

_BLOCKS = [
    {"type": "text", "text": "step 1"},
    {"type": "reasoning", "text": "hm"},
    {"type": "image", "attachment": {"id": "a1", "mime": "image/png"}, "offloaded": True},
    {"type": "file", "attachment": {"id": "f1"}},
    {"type": "tool-call", "id": "c1", "name": "run", "arguments": "{}"},
]

VALID = {
    "turn/start": {"turn": 1},
    "turn/end": {"turn": 1, "reason": {"kind": "error", "error": {"message": "m", "code": "c", "status": 500}}},
    "step/start": {"turn": 1, "step": 1},
    "step/end": {"turn": 1, "step": 1},
    "system/message": {
        "turn": 1,
        "step": 1,
        "message": {
            "id": "s1",
            "role": "system",
            "content": [{"type": "text", "text": "be brief"}],
            "source": {"kind": "system-prompt"},
        },
    },
    "developer/message": {
        "turn": 1,
        "step": 1,
        "message": {
            "id": "d1",
            "role": "developer",
            "content": [{"type": "tool-addition", "toolName": "x"}, {"type": "tool-removal", "toolName": "y"}],
            "source": {"kind": "harness"},
        },
        "headerSeq": 3,
    },
    "user/message": _user(content=[{"type": "text", "text": "hi"}, *_BLOCKS[2:4]]),
    "assistant/message": {
        "turn": 1,
        "step": 1,
        "message": {
            "id": "a1",
            "role": "assistant",
            "content": _BLOCKS,
            "source": {"kind": "model", "provider": "deepseek", "model": "deepseek-chat"},
        },
        "stream": _STREAM,
        "usage": {"inputTokens": 100, "outputTokens": 20, "cacheReadTokens": 0, "reasoningTokens": 3},
        "interrupted": True,
    },
    "assistant/attempt": {"turn": 1, "step": 1, "stream": _STREAM[:3]},
    "tool/call": {"turn": 1, "step": 1, "callId": "c1", "name": "run", "arguments": "{}"},
    "tool/result": {
        "turn": 1,
        "step": 1,
        "message": {
            "id": "t1",
            "role": "tool",
            "source": {"kind": "tool", "callId": "c1"},
            "toolCallId": "c1",
            "content": [{"type": "text", "text": "out"}],
            "isError": True,
        },
        "error": {"name": "E", "code": "x", "reason": {"a": 1}},
        "meta": {"k": [1]},
    },
    "request/header": {
        "header": {"config": {"provider": "p", "model": "m"}, "tools": [{"name": "t"}], "adapterDefaults": {"a": 1}},
        "reason": "initial",
        "startsSeries": True,
    },
    "request/context": {"provider": "p", "model": "m", "contextWindow": 1, "systemPromptUpdate": "in-history"},
    "session/end-seed": {"inherited": True},
    "session/title": {"title": "t", "messageSeqs": [1, 2], "source": {"kind": "llm"}},
    "todo/write": {"todos": [{"content": "c", "status": "pending"}]},
    "llm/retry": {
        "retryId": "r",
        "turn": 1,
        "step": 1,
        "provider": "p",
        "retry": 1,
        "policyKey": "k",
        "mode": "m",
        "maxRetries": 3,
        "delayMs": 10,
        "failure": {"message": "x"},
    },
    "llm/retry-started": {"retryId": "r", "turn": 1, "step": 1, "retry": 1},
    "agent/inbox/spliced": {
        "target": "next-step",
        "start": 0,
        "inserted": [_user(), _user("there")],
        "removedCount": 1,
        "outcome": "canceled",
    },
    "compaction/start": {"compactionId": "c", "turn": None, "sourceCommandId": "x"},
    "compaction/end": {"compactionId": "c", "turn": 2, "error": "e"},
    "compaction/summary": {"compactionId": "c", "summary": [*_BLOCKS, {"type": "plugin:x", "payload": 1}]},
    "command/run": {"commandId": "c", "name": "n"},
    "command/done": {"commandId": "c", "kind": "success", "sourceEventSeq": 3},
    "tool/ptc-dispatch-start": {"subCallId": "a", "rootCallId": "b", "parentCallId": "c", "name": "n"},
    "tool/ptc-dispatch": {"subCallId": "a", "rootCallId": "b", "parentCallId": "c", "arguments": {"x": 1}},
    "session/title-llm-request": {"messageSeqs": [1], "messages": [{"role": "user"}]},
}


def outcome(check, event_type, data, seq=7):
    """``None`` when ``check`` accepts, else what it raised: class, text and fields."""
    try:
        check(event_type, data, seq)
    except dshpy.EventError as error:
        return type(error), str(error), error.event_type, error.seq
    return None


def exact(event_type, data, seq):
    """The declared shapes and the full rules, with no fast path: what validation was before the fast path."""
    if event_type in EVENT_DATA_SHAPES:
        if event_type not in validation._EXACT:
            validation._build(event_type)
        validation._validate_exactly(event_type, data, seq)


def fast(event_type, data):
    return outcome(validation.validate_event_data, event_type, dshpy.freeze_json(data))


FAST_ONLY = {
    # tool-change and unknown blocks always take the exact path; these variants do without them
    "developer/message": {
        "turn": 1,
        "step": 1,
        "message": {**VALID["developer/message"]["message"], "content": [{"type": "text", "text": "note"}]},
    },
    "compaction/summary": {"compactionId": "c", "summary": _BLOCKS},
}


def test_every_declared_type_has_an_example():
    assert set(VALID) == set(EVENT_DATA_SHAPES)


@pytest.mark.parametrize("event_type", sorted(VALID))
def test_valid_examples_pass_and_the_fast_path_itself_accepts_them(event_type):
    for data in (VALID[event_type], FAST_ONLY.get(event_type, VALID[event_type])):
        sealed = dshpy.freeze_json(data)
        assert outcome(exact, event_type, sealed) is None
        assert outcome(validation.validate_event_data, event_type, sealed) is None
    plain = dshpy.freeze_json(FAST_ONLY.get(event_type, VALID[event_type]))
    validation._FAST[event_type](plain, strict=True)  # not merely accepted through the fallback
    settled = validation._SETTLED.get(event_type)
    assert settled is None or settled(plain, 0)


def test_the_tag_tables_match_the_callable_discriminators():
    for discriminator, tags in TYPE_TAGS.items():
        for kind, tag in tags.items():
            assert discriminator({"type": kind}) == tag
        assert discriminator({"type": "plugin:x"}) == "other"
        assert discriminator({"type": 1}) is None
    assert set(TYPE_TAGS) == {_block_tag, _record_tag}


def test_every_type_with_rules_beyond_its_shape_has_them_on_the_fast_path():
    assert set(validation._SETTLED) == validation._MESSAGE_TYPES | {"request/header", "turn/end"}


def _callables(node):
    if isinstance(node, dict):
        return [found for value in node.values() for found in _callables(value)]
    if isinstance(node, list):
        return [found for value in node for found in _callables(value)]
    return [node] if callable(node) and not isinstance(node, type) else []


@pytest.mark.parametrize("event_type", ["assistant/message", "compaction/summary", "request/header"])
def test_fast_schemas_call_no_python(event_type):
    """The rewrite took: no callable discriminator and no ``dict[str, Any]`` (per-key Python calls) remain."""
    schema = validation._fast_schema(TypeAdapter(EVENT_DATA_SHAPES[event_type]).core_schema)
    assert _callables(schema) == []
    assert "'keys_schema'" not in repr(schema)


# -- unknown blocks and records still pass, unchanged -----------------------------------------------------------------


@pytest.mark.parametrize("block", [{"type": "plugin:acme/card", "x": 1}, {"type": "future", "text": 5}, {"type": ""}])
def test_unknown_content_blocks_pass(block):
    data = _user(content=[{"type": "text", "text": "a"}, block])
    assert fast("user/message", data) is None
    event = dshpy.Session.new().append("user/message", data, surface_op="append")
    assert event.data["content"][1] == block


def test_unknown_stream_records_pass():
    data = copy.deepcopy(VALID["assistant/message"])
    data["stream"].append({"type": "plugin:acme/trace", "payload": [1, 2]})
    assert fast("assistant/message", data) is None


def test_tool_change_blocks_still_pass_where_they_are_allowed():
    assert fast("developer/message", VALID["developer/message"]) is None
    assert fast("compaction/summary", VALID["compaction/summary"]) is None
    inbox = copy.deepcopy(VALID["agent/inbox/spliced"])
    inbox["inserted"][0]["content"].append({"type": "tool-removal", "toolName": ""})
    assert fast("agent/inbox/spliced", inbox) is None


# -- known types with a wrong field fail as before --------------------------------------------------------------------

REFUSALS = [
    (
        "user/message",
        _user(content=[{"type": "text"}]),
        'event "user/message" at seq 7: data.content.0.text.text: Field required',
    ),
    (
        "user/message",
        _user(content=[{"type": "text", "text": 3}]),
        'event "user/message" at seq 7: data.content.0.text.text: Input should be a valid string',
    ),
    (
        "user/message",
        _user(content=[{"type": 1}]),
        'event "user/message" at seq 7: data.content.0: content block needs a string type',
    ),
    (
        "user/message",
        _user(content=["text"]),
        'event "user/message" at seq 7: data.content.0: content block needs a string type',
    ),
    (
        "user/message",
        _user(content=[{"type": "image", "attachment": []}]),
        'event "user/message" at seq 7: data.content.0.image.attachment: Input should be a valid dictionary',
    ),
    (
        "user/message",
        _user(content=[{"type": "tool-result", "result": 1}]),
        'event "user/message" at seq 7: the tool-result wrapper block is retired in format v4 (role tool)',
    ),
    (
        "user/message",
        _user(content=[{"type": "tool-addition", "toolName": "x"}]),
        'event "user/message" at seq 7: tool-change blocks require developer role',
    ),
    (
        "user/message",
        {**_user(), "source": {"kind": "plugin"}},
        'event "user/message" at seq 7: message source kind "plugin" is retired in format v4; name the producer',
    ),
    ("user/message", {**_user(), "id": ""}, 'event "user/message" at seq 7: message.id must be a non-empty string'),
    (
        "assistant/message",
        {**VALID["assistant/message"], "stream": [{"type": "text-chunks", "time0": 0, "index": 0, "dt": ["1"]}]},
        'event "assistant/message" at seq 7: data.stream.0.run.dt.0: Input should be a valid integer',
    ),
    (
        "assistant/message",
        {**VALID["assistant/message"], "stream": [{"type": "chunk", "time": 0, "chunk": {1: 2}}]},
        'event "assistant/message" at seq 7: data.stream.0.chunk.chunk.1.[key]: Input should be a valid string',
    ),
    (
        "assistant/message",
        {**VALID["assistant/message"], "stream": [{"kind": "chunk"}]},
        'event "assistant/message" at seq 7: data.stream.0: stream record needs a string type',
    ),
    (
        "assistant/message",
        {
            **VALID["assistant/message"],
            "message": {**VALID["assistant/message"]["message"], "source": {"kind": "model", "provider": "p"}},
        },
        'event "assistant/message" at seq 7: assistant message source lacks model',
    ),
    (
        "tool/result",
        {**VALID["tool/result"], "message": {**VALID["tool/result"]["message"], "toolCallId": "c2"}},
        'event "tool/result" at seq 7: message.toolCallId differs from message.source.callId',
    ),
    (
        "tool/result",
        {**VALID["tool/result"], "message": {**VALID["tool/result"]["message"], "isError": False}},
        'event "tool/result" at seq 7: error requires message.isError === true',
    ),
    (
        "developer/message",
        {key: value for key, value in VALID["developer/message"].items() if key != "headerSeq"},
        'event "developer/message" at seq 7: requires headerSeq exactly when tool additions are present',
    ),
    (
        "turn/end",
        {"turn": 1, "reason": {"kind": "error"}},
        'event "turn/end" at seq 7: an error turn/end needs reason.error',
    ),
    (
        "request/header",
        {**VALID["request/header"], "header": {"config": {"provider": "p", "model": "m"}, "tools": []}},
        'event "request/header" at seq 7: must omit empty tools',
    ),
    (
        "session/title-llm-request",
        {"messageSeqs": [1], "messages": [[]]},
        'event "session/title-llm-request" at seq 7: data.messages.0: Input should be a valid dictionary',
    ),
]


@pytest.mark.parametrize(("event_type", "data", "message"), REFUSALS)
def test_refusals_keep_their_words(event_type, data, message):
    refusal = (dshpy.EventError, message, event_type, 7)
    assert outcome(validation.validate_event_data, event_type, data) == refusal  # plain data: the exact path
    try:
        sealed = dshpy.freeze_json(data)
    except NotJsonError:
        return  # a non-string key: never sealed, so only the exact path ever sees it
    assert outcome(validation.validate_event_data, event_type, sealed) == refusal
    assert outcome(exact, event_type, sealed) == refusal


def test_unsealed_data_takes_the_exact_path():
    plain = {"turn": "1"}
    assert outcome(validation.validate_event_data, "turn/start", plain) == (
        dshpy.EventError,
        'event "turn/start" at seq 7: data.turn: Input should be a valid integer',
        "turn/start",
        7,
    )
    assert outcome(validation.validate_event_data, "turn/start", None) is not None
    assert outcome(validation.validate_event_data, "turn/start", dshpy.FrozenDict({"turn": 1})) is None
    assert outcome(validation.validate_event_data, "future/type", {"x": 1}) is None


# -- a randomised comparison of the two paths -------------------------------------------------------------------------

_VALUES = [
    "", "x", "plugin", "user", "model", "tool", "system-prompt", "c1", "c2", "text", "reasoning", "image", "file",
    "tool-call", "tool-result", "tool-addition", "tool-removal", "chunk", "text-chunks", "reasoning-chunks",
    "tool-call-chunks", "plugin:x", "error", "completed", "initial", "pending", 0, 1, -1, 2**53 - 1, 1.5, True, False,
    None, [], {}, [1], ["a"], {"a": 1}, {"type": "text"}, {"type": "text", "text": "t"}, {"type": "plugin:x"},
    {"type": "chunk", "time": 1, "chunk": {}}, {"type": "tool-addition", "toolName": "t"}, {"type": None},
]  # fmt: skip
_KEYS = [
    "type", "text", "error", "headerSeq", "isError", "tool", "toolName", "callId", "provider", "model", "system",
    "tools", "adapterDefaults", "config", "name", "kind", "id", "x",
]  # fmt: skip


def _containers(value, out):
    if isinstance(value, dict | list):
        out.append(value)
        for item in value.values() if isinstance(value, dict) else value:
            _containers(item, out)
    return out


def mutate(data, rng):
    """``data`` (a deep copy) changed in one to three random places."""
    data = copy.deepcopy(data)
    for _ in range(rng.randint(1, 3)):
        target = rng.choice(_containers(data, []))
        roll = rng.random()
        if isinstance(target, dict):
            if target and roll < 0.3:
                del target[rng.choice(list(target))]
            elif target and roll < 0.8:
                target[rng.choice(list(target))] = copy.deepcopy(rng.choice(_VALUES))
            else:
                target[rng.choice(_KEYS)] = copy.deepcopy(rng.choice(_VALUES))
        elif target and roll < 0.3:
            del target[rng.randrange(len(target))]
        elif target and roll < 0.6:
            target[rng.randrange(len(target))] = copy.deepcopy(rng.choice(_VALUES))
        else:
            target.insert(rng.randint(0, len(target)), copy.deepcopy(rng.choice(_VALUES + _BLOCKS + _STREAM)))
    return data


@pytest.mark.parametrize("event_type", sorted(VALID))
def test_fast_and_exact_paths_agree_on_mutated_data(event_type):
    rng = random.Random(event_type)
    refused = 0
    for _ in range(300):
        data = dshpy.freeze_json(mutate(VALID[event_type], rng))
        expected = outcome(exact, event_type, data)
        assert outcome(validation.validate_event_data, event_type, data) == expected, thaw(data)
        assert outcome(validation.validate_event_data, event_type, thaw(data)) == expected, thaw(data)
        refused += expected is not None
    assert refused > 0
