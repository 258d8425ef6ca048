"""dsh's projection names (``turnBoundary``, ``tokenUsage``, ``sessionStats``) as aliases; the session's readers."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

import dshpy
from dshpy import Session, SessionHeader, decode_event
from dshpy.errors import ProjectionError
from dshpy.projections import DSH_PROJECTION_NAMES, TURN_BOUNDARY, USAGE, ProjectionDefinition, ProjectionRegistry

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "dsh"
PROJECT = "--tmp-dshpy-dsh-fixtures-workspace--"


def dsh_session(name: str) -> tuple[Session, dict]:
    lines = (FIXTURES / "sessions" / "plain" / PROJECT / name / "session.v4.jsonl").read_bytes().splitlines()
    rows = orjson.loads((FIXTURES / "projcache" / "plain" / f"{name}.json").read_bytes())["record"]["rows"]
    events = [decode_event(orjson.loads(line)) for line in lines[1:]]
    seq = rows["turnBoundary"]["seq"]
    return Session(SessionHeader.from_record(orjson.loads(lines[0])), events[: seq + 1]), rows


def test_the_seeds_snapshot_call_gives_dshs_cached_turnBoundary_under_dshs_name():
    session, rows = dsh_session("tool-turn")
    snap = session.snapshot(["turnBoundary", "title"])
    assert snap["as_of_seq"] == rows["turnBoundary"]["seq"]
    assert snap["values"]["turnBoundary"] == rows["turnBoundary"]["val"]
    assert snap["values"]["title"]["title"] == rows["title"]["val"]
    state = session.state_of("turnBoundary")
    assert state == session.state_of(TURN_BOUNDARY) == dshpy.state_of(session, "turn_boundary")
    assert state.last_step_boundary.kind == rows["turnBoundary"]["val"]["lastStepBoundary"]["kind"]


def test_aliases_follow_a_live_store_session(tmp_path):
    with dshpy.open_store(f"sqlite:///{tmp_path}/s.db") as store:
        session = store.create()
        session.append("turn/start", {"turn": 1})
        assert session.state_of("turnBoundary").open_turn_start_seq == 0
        session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        assert session.state_of("turnBoundary").open_turn_start_seq is None
        assert session.state_of("tokenUsage") == session.state_of(USAGE)
        assert (
            session.snapshot(["sessionStats"])["values"]["sessionStats"]
            == session.snapshot(["stats"])["values"]["stats"]
        )
        assert session.snapshot()["values"].keys() >= {"turn_boundary", "usage", "stats"}  # canonical keys by default
        session.close()


def test_unknown_names_and_an_alias_as_a_new_key_are_refused_by_name():
    session = Session.new()
    with pytest.raises(ProjectionError, match="turnBoundry"):
        session.state_of("turnBoundry")
    with pytest.raises(ProjectionError, match='"turnBoundary" is dsh\'s name for "turn_boundary"'):
        ProjectionRegistry(
            [
                ProjectionDefinition(
                    key="turnBoundary",
                    state_version=1,
                    state_schema=type(TURN_BOUNDARY.init()),
                    init=TURN_BOUNDARY.init,
                    apply=lambda s, e: s,
                )
            ]
        )
    assert dict(DSH_PROJECTION_NAMES) == {
        "turnBoundary": "turn_boundary",
        "tokenUsage": "usage",
        "sessionStats": "stats",
    }
