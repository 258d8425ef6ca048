"""The JSON codec and the lossless gate agree on lone UTF-16 surrogates, and write them as ``JSON.stringify`` does."""

from __future__ import annotations

import json
import random
import shutil
import subprocess

import orjson
import pytest

import dshpy
from dshpy.core.events import SessionEvent, checked_event, decode_event, encode_event
from dshpy.core.json import MAX_DEPTH, NotJsonError, dumps, dumps_indented, freeze_json, loads
from dshpy.testing.strategies import SURROGATES


def test_lone_surrogates_are_written_as_lowercase_six_character_escapes() -> None:
    assert dumps("a\udcffb") == b'"a\\udcffb"'
    assert dumps(["\ud800", "\udbff", "\udc00", "\udfff"]) == b'["\\ud800","\\udbff","\\udc00","\\udfff"]'
    assert dumps({"k\udcff": ['x\n"\\\x00\x7f\u2028', "\U0001f600\ud83d"]}) == (
        b'{"k\\udcff":["x\\n\\"\\\\\\u0000\x7f\xe2\x80\xa8","\xf0\x9f\x98\x80\\ud83d"]}'
    )
    assert dumps("\ud83d\ude00") == b'"' + "\U0001f600".encode() + b'"'  # a split pair is one character


def test_values_without_lone_surrogates_are_written_by_orjson_unchanged() -> None:
    value = {"a": [1, 2.5, None, True, "é\U0001f600\x01", {}, []], "b": {"c": "d"}}
    assert dumps(value) == orjson.dumps(value)
    assert dumps_indented(value) == orjson.dumps(value, option=orjson.OPT_INDENT_2)
    # the escaping encoder lays out and writes numbers exactly as orjson does: only the escapes differ
    odd = {"a\udcff": [1, 2.5, None, True, "é\U0001f600\x01", {}, [], {"z": [0.1, -3]}], "b": {"c": "\udcff"}}
    plain = {"aX": [1, 2.5, None, True, "é\U0001f600\x01", {}, [], {"z": [0.1, -3]}], "b": {"c": "X"}}
    assert dumps(odd).replace(b"\\udcff", b"X") == orjson.dumps(plain)
    assert dumps_indented(odd).replace(b"\\udcff", b"X") == orjson.dumps(plain, option=orjson.OPT_INDENT_2)


def test_what_orjson_cannot_encode_still_raises_its_own_error() -> None:
    with pytest.raises(TypeError):
        dumps({"a\udcff": object()})
    with pytest.raises(TypeError):
        dumps({1: "\udcff"})
    deep: list[object] = ["\udcff"]
    for _ in range(300):
        deep = [deep]
    with pytest.raises(TypeError):
        dumps(deep)


def test_loads_reads_the_escapes_back_exactly() -> None:
    assert loads(b'["\\udcff","\\uD83D","\\ud83d\\ude00","x\\u0000"]') == ["\udcff", "\ud83d", "\U0001f600", "x\x00"]
    assert loads('{"k\\udcff": 1}') == {"k\udcff": 1}
    assert loads(memoryview(b'"\\udcff"')) == "\udcff"


@pytest.mark.parametrize(
    "raw",
    [
        b'["\\udcff", NaN]',
        b'["\\udcff", -Infinity]',
        b'["\\udcff", 1e400]',
        b'["\\udcff",]',
        b'["\\udcff"] extra',
        b'["\\udcff", "\xff"]',  # not UTF-8
        b'["\\udcff", "\xed\xb3\xbf"]',  # a raw surrogate's UTF-8 form is not UTF-8 either
        '["\\udcff", "\udcff"]',  # a str holding a raw surrogate, as orjson refuses
        b'["\\udcff", "\x01"]',  # a raw control character
    ],
)
def test_loads_keeps_orjsons_rules_on_the_escape_path(raw: bytes | str) -> None:
    with pytest.raises(orjson.JSONDecodeError):
        loads(raw)


def test_freeze_json_joins_pairs_so_what_it_accepts_is_what_is_read_back() -> None:
    value = {"pair": "\ud83d\ude00", "k\ud83d\ude00": ["\ud83d", "\ude00\ud83d"], "lone": "\udcff"}
    frozen = freeze_json(value)
    assert frozen == {"pair": "\U0001f600", "k\U0001f600": ["\ud83d", "\ude00\ud83d"], "lone": "\udcff"}
    assert loads(dumps(frozen)) == frozen
    assert freeze_json("\ud83d\ude00") == "\U0001f600"
    with pytest.raises(NotJsonError, match="same string"):
        freeze_json({"\U0001f600": 1, "\ud83d\ude00": 2})


def test_a_hand_built_event_with_a_split_pair_is_sealed_joined() -> None:
    event = SessionEvent("plugin:dshpy/note", 0, 1, "\ud83d\ude00", ignorable=True)
    checked = checked_event(event)
    assert checked.data == "\U0001f600"
    assert decode_event(loads(encode_event(checked)), parsed=True) == checked


def test_appended_data_equals_what_the_codec_reads_back() -> None:
    session = dshpy.Session.new(session_id="codec")
    event = session.append("plugin:dshpy/note", {"a": "\ud83d\ude00\udcff", "\udcff": ["\ud800"]})
    assert decode_event(loads(encode_event(event)), parsed=True) == event


@pytest.mark.skipif(shutil.which("node") is None, reason="node (for JSON.stringify) is not installed")
def test_random_strings_are_written_byte_for_byte_as_json_stringify_writes_them() -> None:
    """Hundreds of random strings mixing ASCII, controls, BMP, astral characters and surrogates, in one node run."""
    rng = random.Random(11)
    pool = [*SURROGATES, "\x00", "\x1f", "\x7f", '"', "\\", "\u2028", "é", "中", "\U0001f600", "a", " "]
    strings = ["".join(rng.choice(pool) for _ in range(rng.randrange(12))) for _ in range(400)]
    document = dumps({s: s for s in strings})  # keys and values
    script = "process.stdout.write(JSON.stringify(JSON.parse(require('fs').readFileSync(0, 'utf8'))))"
    node = subprocess.run(["node", "-e", script], input=document, capture_output=True, check=True, timeout=30)
    assert node.stdout == document
    assert loads(node.stdout) == {freeze_json(s): freeze_json(s) for s in strings}
    assert json.loads(document) == loads(document)


def test_the_deepest_value_the_gate_accepts_round_trips_with_a_lone_surrogate_at_the_bottom() -> None:
    deep: object = {"leaf": "\udcff"}
    for _ in range(MAX_DEPTH - 1):
        deep = [deep]
    frozen = freeze_json(deep)
    assert loads(dumps(frozen)) == frozen
