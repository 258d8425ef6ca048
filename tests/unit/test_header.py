"""The session header's physical record: dsh v4 key order, validation, retired fields."""

import orjson
import pytest

from dshpy import CorruptSessionError, SessionHeader


def test_record_key_order_matches_dsh():
    header = SessionHeader(id="s1", created_at=5, cwd="/w", parent_session="p", is_seeded=True, origin="subagent",
                           delegation_depth=1, agent_preset="ptc")
    assert list(header.to_record()) == ["type", "version", "id", "createdAt", "cwd", "parentSession", "isSeeded",
                                        "origin", "delegationDepth", "agentPreset"]


def test_minimal_record_always_writes_delegation_depth():
    line = orjson.dumps(SessionHeader(id="fixture-main", created_at=1, cwd="/out/workspace").to_record())
    assert line == (b'{"type":"session","version":4,"id":"fixture-main","createdAt":1,"cwd":"/out/workspace",'
                    b'"isSeeded":false,"delegationDepth":0}')


def test_record_round_trips():
    header = SessionHeader(id="s1", created_at=5, cwd="/w", parent_session="p", is_seeded=True)
    assert SessionHeader.from_record(header.to_record()) == header


@pytest.mark.parametrize(("key", "value", "message"), [
    ("seedLength", 3, "seedLength"),
    ("sandboxMode", "x", "retired"),
    ("approvalPolicy", "never", "retired"),
    ("color", "red", "unexpected field color"),
    ("cwd", "relative/path", "absolute"),
    ("createdAt", 1.5, "createdAt"),
    ("createdAt", -1, "createdAt"),
    ("isSeeded", "yes", "isSeeded"),
    ("origin", "fork", "origin"),
    ("delegationDepth", -2, "delegationDepth"),
    ("id", "../escape", "invalid session id"),
])
def test_bad_records_are_corrupt(key, value, message):
    record = SessionHeader(id="s1", created_at=5).to_record()
    record[key] = value
    with pytest.raises(CorruptSessionError, match=message):
        SessionHeader.from_record(record)


def test_missing_required_field_is_named():
    record = SessionHeader(id="s1", created_at=5).to_record()
    del record["isSeeded"]
    with pytest.raises(CorruptSessionError, match="lacks required field isSeeded"):
        SessionHeader.from_record(record)
