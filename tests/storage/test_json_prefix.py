"""The torn-line check must accept every prefix of every line a writer can produce.

A false "not a prefix" would turn a genuine crash-torn line into CorruptSessionError and
leave the session unopenable, so this is checked over arbitrary JSON objects (Hypothesis),
not only over the event shapes the other tests write.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from dshpy.storage.jsonl.json_prefix import is_json_object_prefix

_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=16)
)
_VALUES = st.recursive(
    _SCALARS,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
_OBJECTS = st.dictionaries(st.text(max_size=8), _VALUES, min_size=0, max_size=5)


@settings(max_examples=150, deadline=None)
@given(_OBJECTS)
def test_every_prefix_of_a_compact_json_line_is_a_prefix(obj: dict[str, Any]) -> None:
    for line in (orjson.dumps(obj), json.dumps(obj, separators=(",", ":")).encode()):  # ours, and \\u escapes
        for size in range(1, len(line) + 1):
            assert is_json_object_prefix(line[:size]), line[:size]


@settings(max_examples=100, deadline=None)
@given(_OBJECTS, st.sampled_from([b"}", b" ", b"x", b"\x00", b"\xf5", b",", b"]"]))
def test_a_whole_object_followed_by_a_stray_byte_is_not(obj: dict[str, Any], stray: bytes) -> None:
    assert not is_json_object_prefix(orjson.dumps(obj) + stray)


def test_damage_that_no_writer_produces_is_not_a_prefix() -> None:
    for fragment in (
        b"more garbage",
        b"\x00\x00\x00",
        b' {"a":1',
        b"[1,2",
        b'{"a":1,}',
        b'{"a":[1,]',
        b'{"a" 1',
        b'{"a":01',
        b'{"a":1.e',
        b'{"a":tru ',
        b'{"a":nul,',
        b'{"a":"\\q',
        b'{"a":"\\u12g',
        b'{"a":"x\ty"',
        b'{"a":"\xff"',
        b"\xe2\x82",  # the start of one multi-byte character, never a line's "{"
    ):
        assert not is_json_object_prefix(fragment), fragment
