"""The built-ins against the projection cache the real dsh runtime (0.2.1rc2) wrote for its own sessions.

``tests/fixtures/dsh/projcache/plain/<id>.json`` holds dsh's rows ``{ver, seq, val}``
for the sessions under ``tests/fixtures/dsh/sessions/plain``. Folding the same log
up to the row's ``seq`` must give dsh's values wherever our projection mirrors one of
dsh's: ``turn_boundary`` is the seed's projection itself (same version, same JSON),
``usage`` totals match ``tokenUsage``, the ``title`` is dsh's (which dsh logged as a
``session/title`` with source ``fallback``, and which our own fallback reproduces
from the prompt when that event is left out), and ``todos`` is empty in both.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from dshpy import Session, SessionHeader, decode_event
from dshpy.projections import TITLE, TODOS, TURN_BOUNDARY, USAGE, attach

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "dsh"
PROJECT = "--tmp-dshpy-dsh-fixtures-workspace--"
NAMES = ("text-2-prompts", "tool-turn", "resumed", "interrupted")


def load(name: str) -> tuple[Session, dict[str, Any]]:
    lines = (FIXTURES / "sessions" / "plain" / PROJECT / name / "session.v4.jsonl").read_bytes().splitlines()
    header = SessionHeader.from_record(orjson.loads(lines[0]))
    rows = orjson.loads((FIXTURES / "projcache" / "plain" / f"{name}.json").read_bytes())["record"]["rows"]
    seq = rows["turnBoundary"]["seq"]
    events = [decode_event(orjson.loads(line)) for line in lines[1:]]
    return Session(header, events[: seq + 1]), rows


@pytest.mark.parametrize("name", NAMES)
def test_turn_boundary_is_dshs_turnBoundary(name: str) -> None:
    session, rows = load(name)
    row = rows["turnBoundary"]
    snapshot = attach(session).snapshot([TURN_BOUNDARY.key])
    assert TURN_BOUNDARY.state_version == row["ver"] == 2
    assert snapshot["as_of_seq"] == row["seq"]
    assert snapshot["values"][TURN_BOUNDARY.key] == row["val"]


@pytest.mark.parametrize("name", NAMES)
def test_usage_totals_are_dshs_tokenUsage(name: str) -> None:
    session, rows = load(name)
    totals = rows["tokenUsage"]["val"]["totals"]
    usage = attach(session).state(USAGE)
    assert usage.total.input_tokens == totals["uncachedInputTokens"]
    assert usage.total.output_tokens == totals["outputTokens"]
    assert usage.total.cache_read_tokens == totals["cacheReadTokens"]
    assert usage.total.cache_write_tokens == totals["cacheWriteTokens"]
    assert [(m.provider, m.model) for m in usage.by_model] == [("deepseek-official", "deepseek-v4-flash")]


@pytest.mark.parametrize("name", NAMES)
def test_title_and_todos_are_dshs(name: str) -> None:
    session, rows = load(name)
    runner = attach(session)
    title = runner.state(TITLE)
    assert (title.title, title.source) == (rows["title"]["val"], "event")  # dsh logged its fallback title
    cited = session.events[title.seq].data["messageSeqs"]
    assert cited == [rows["titleInput"]["val"]["first"]["seq"]]
    assert runner.state(TODOS).todos is None and rows["todos"]["val"] is None


@pytest.mark.parametrize("name", NAMES)
def test_our_fallback_title_is_dshs_fallback(name: str) -> None:
    session, rows = load(name)
    title_events = [e for e in session.events if e.type == "session/title"]
    assert [e.data["source"]["kind"] for e in title_events] == ["fallback"]
    before = TITLE.fold(e for e in session.events if e.type != "session/title")
    assert (before.title, before.source) == (rows["title"]["val"], "prompt")
