"""Replayed data is sealed as it is reached (issue #20): no way of reaching it yields a mutable container.

A stored row whose bytes hold no number a read must refuse keeps the parser's
containers behind ripening wrappers (``dshpy.core.json._RipeningDict``); these tests
reach nested values through every door Python offers and check that what comes out is
frozen, equal to the eagerly sealed value, and encodes to the same bytes.
"""

# The doors below reach values in the roundabout ways callers do, on purpose:
# ruff: noqa: RUF015, PLC3002, PLW0108, RUF005, SIM118

from __future__ import annotations

import copy
import pickle
from collections.abc import Callable
from typing import Any

import orjson
import pytest

from dshpy.core.events import SessionEvent, decode_event, decode_stored, encode_event
from dshpy.core.json import (
    MAX_DEPTH,
    FrozenDict,
    FrozenList,
    NotJsonError,
    freeze_json,
    is_sealed,
    seal_cleared,
    seal_parsed,
    thaw,
    unsafe_number_possible,
)
from dshpy.errors import DshError

SOURCE = orjson.dumps({"a": {"b": [1, {"c": "d"}]}, "l": [[1, 2], {"x": None}], "s": "é", "n": -5, "f": 0.5})


def fresh() -> Any:
    """Ripening data as a replay builds it (nothing reached yet)."""
    assert not unsafe_number_possible(SOURCE)
    return seal_cleared(orjson.loads(SOURCE), SOURCE)


def check_frozen(value: Any) -> None:
    """``value`` and everything under it is a frozen container or a scalar."""
    if isinstance(value, dict):
        assert isinstance(value, FrozenDict), type(value)
        with pytest.raises(TypeError):
            value["new"] = 1  # type: ignore[index]
        for item in value.values():
            check_frozen(item)
    elif isinstance(value, list):
        assert isinstance(value, FrozenList), type(value)
        with pytest.raises(TypeError):
            value.append(1)
        for item in value:
            check_frozen(item)


DICT_DOORS: dict[str, Callable[[Any], Any]] = {
    "getitem": lambda d: d["a"],
    "get": lambda d: d.get("a"),
    "items": lambda d: dict(d.items())["a"],
    "values": lambda d: list(d.values())[0],
    "dict()": lambda d: dict(d)["a"],
    "unpacking": lambda d: {**d}["a"],
    "copy": lambda d: d.copy()["a"],
    "or": lambda d: (d | {})["a"],
    "ror": lambda d: ({} | d)["a"],
    "kwargs": lambda d: (lambda **kw: kw)(**d)["a"],
    "copy.copy": lambda d: copy.copy(d)["a"],
    "pickle": lambda d: pickle.loads(pickle.dumps(d))["a"],
    "thaw": lambda d: freeze_json(d)["a"],
    "dict.update": lambda d: _updated(d)["a"],
    "keys then getitem": lambda d: [d[key] for key in d.keys()][0],
}


def _updated(d: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    out.update(d)
    return out


@pytest.mark.parametrize("door", DICT_DOORS, ids=list(DICT_DOORS))
def test_every_way_into_a_ripening_dict_gives_frozen_children(door: str) -> None:
    data = fresh()
    child = DICT_DOORS[door](data)
    assert child == {"b": [1, {"c": "d"}]}
    check_frozen(child)
    check_frozen(data)


LIST_DOORS: dict[str, Callable[[Any], Any]] = {
    "getitem": lambda lst: lst[0],
    "negative index": lambda lst: lst[-2],
    "slice": lambda lst: lst[:1][0],
    "iter": lambda lst: next(iter(lst)),
    "reversed": lambda lst: list(reversed(lst))[1],
    "list()": lambda lst: list(lst)[0],
    "tuple()": lambda lst: tuple(lst)[0],
    "unpacking": lambda lst: [*lst][0],
    "star call": lambda lst: (lambda *args: args)(*lst)[0],
    "assignment": lambda lst: _first(lst),
    "add": lambda lst: (lst + [])[0],
    "radd": lambda lst: ([] + lst)[0],
    "mul": lambda lst: (lst * 1)[0],
    "rmul": lambda lst: (1 * lst)[0],
    "copy": lambda lst: lst.copy()[0],
    "copy.copy": lambda lst: copy.copy(lst)[0],
    "deepcopy": lambda lst: copy.deepcopy(lst)[0],
    "sorted": lambda lst: sorted(lst, key=lambda item: 0)[0],
    "enumerate": lambda lst: next(enumerate(lst))[1],
    "extend": lambda lst: _extended(lst)[0],
}


def _first(lst: Any) -> Any:
    first, _second = lst
    return first


def _extended(lst: Any) -> list[Any]:
    out: list[Any] = []
    out.extend(lst)
    return out


@pytest.mark.parametrize("door", LIST_DOORS, ids=list(LIST_DOORS))
def test_every_way_into_a_ripening_list_gives_frozen_children(door: str) -> None:
    data = fresh()
    outer = data["l"]  # ripens data, not yet the list it hands out
    assert type(outer).__name__ == "_RipeningList"
    child = LIST_DOORS[door](outer)
    assert child == [1, 2]
    check_frozen(child)


def test_an_equality_check_never_hands_out_a_plain_child() -> None:
    data = fresh()
    seen: list[Any] = []

    class Spy:
        def __eq__(self, other: object) -> bool:
            seen.append(other)
            return False

        __hash__ = None  # type: ignore[assignment]

    _ = data == {"a": Spy(), "l": Spy(), "s": "é", "n": -5, "f": 0.5}
    _ = Spy() in data["l"]
    assert seen
    for value in seen:
        check_frozen(value)


def test_ripening_data_equals_eager_sealing_and_encodes_to_the_same_bytes() -> None:
    eager = seal_parsed(orjson.loads(SOURCE))
    data = fresh()
    assert orjson.dumps(data) == SOURCE  # before anything ripened
    assert data == eager and eager == data
    assert repr(data) == repr(eager)
    assert thaw(data) == orjson.loads(SOURCE)
    assert orjson.dumps(data) == SOURCE  # after
    assert is_sealed(data) and freeze_json(data) is data


def test_a_replayed_event_encodes_to_its_stored_bytes() -> None:
    envelope = {"type": "x/y", "seq": 3, "time": 7, "data": {"k": [{"z": 1}]}}
    line = orjson.dumps({**envelope, "sourceEventSeqs": [[0, 2]], "surfaceOp": "append"})
    event = decode_stored(orjson.loads(line), line, True)
    assert encode_event(event) == line
    assert event == decode_event(orjson.loads(line), parsed=True)
    check_frozen(event.data)


UNSAFE = {
    "negative zero": b'{"a":-0.0}',
    "negative zero exponent": b'{"a":[-0e5]}',
    "negative zero capital exponent": b"[-0E1]",
    "underflow": b'{"a":-1e-400}',
    "underflow, padded exponent": b"[-5E-000400]",
    "underflow from a zero mantissa": b"[-0.0000001e-320]",
    "unsafe int": b'{"a":9007199254740992}',
    "unsafe negative int": b'{"a":[-9007199254740992]}',
    "huge int": b'{"a":123456789012345678901234567890}',
}


@pytest.mark.parametrize("name", UNSAFE, ids=list(UNSAFE))
def test_every_number_the_seal_refuses_is_flagged_by_the_byte_scan(name: str) -> None:
    text = UNSAFE[name]
    assert unsafe_number_possible(text)
    assert unsafe_number_possible(b'{"ok":1}\n' + text + b"\n[2]")  # in a chunk of rows too
    if name != "huge int":  # orjson reads that one as a float, which is fine
        with pytest.raises(NotJsonError):
            seal_parsed(orjson.loads(text))


ORDINARY = [b'{"a":-0}', b'{"a":"2024-01-05"}', b"[1.5e-7, -12, 900719925474099, 0.0, -12.5e1]", b'{"t":1733097600000}']


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_numbers_pass_the_byte_scan(text: bytes) -> None:
    assert not unsafe_number_possible(text)
    assert seal_cleared(orjson.loads(text), text) == seal_parsed(orjson.loads(text))


def test_deep_nesting_is_refused_even_when_the_numbers_are_cleared() -> None:
    deep = b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1)
    assert not unsafe_number_possible(deep)
    with pytest.raises(NotJsonError, match="nesting"):
        seal_cleared(orjson.loads(deep), deep)
    line = b'{"type":"x/y","seq":0,"time":0,"data":' + deep + b"}"
    with pytest.raises(DshError, match="nesting"):
        decode_stored(orjson.loads(line), line, True)


BAD_ENVELOPES = [
    {"type": "x/y", "seq": 0, "time": 0},
    {"type": "x/y", "seq": 0, "time": 0, "data": 1, "extra": 1},
    {"type": "x/y", "seq": 0, "time": 0, "data": 1, "surfaceOp": None},
    {"type": "x/y", "seq": 0, "time": 0, "data": 1, "ignorable": False},
    {"type": "", "seq": 0, "time": 0, "data": 1},
    {"type": "x/y", "seq": -1, "time": 0, "data": 1},
    {"type": "x/y", "seq": 2**53, "time": 0, "data": 1},
    {"type": "x/y", "seq": 0, "time": 1.5, "data": 1},
    {"type": "x/y", "seq": 1, "time": 0, "data": 1, "sourceEventSeqs": [[0, 5]]},
    {"type": "x/y", "seq": 1, "time": 0, "data": 1, "surfaceOp": "prepend"},
    {"type": "x/y", "seq": 1, "time": 0, "data": {"n": -0.0}, "surfaceOp": "prepend"},
    ["not", "an", "object"],
]


@pytest.mark.parametrize("raw", BAD_ENVELOPES, ids=[str(i) for i in range(len(BAD_ENVELOPES))])
@pytest.mark.parametrize("cleared", [False, True])
def test_the_replay_decoder_refuses_what_decode_event_refuses_in_the_same_words(raw: Any, cleared: bool) -> None:
    line = orjson.dumps(raw)
    with pytest.raises(DshError) as expected:
        decode_event(orjson.loads(line), parsed=True)
    with pytest.raises(type(expected.value)) as got:
        decode_stored(orjson.loads(line), line, cleared and not unsafe_number_possible(line))
    assert str(got.value) == str(expected.value)


def test_a_replayed_event_is_a_plain_session_event() -> None:
    line = b'{"type":"x/y","seq":0,"time":0,"data":{"a":[1]},"ignorable":true}'
    event = decode_stored(orjson.loads(line), line, True)
    assert type(event) is SessionEvent and event.ignorable is True
    assert event == SessionEvent("x/y", 0, 0, freeze_json({"a": [1]}), ignorable=True)
