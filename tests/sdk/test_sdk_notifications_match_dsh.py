"""The notifications the official SDK returns per run from ``dshpy-runtime`` against dsh's, in kind and order.

dsh's sequence is committed (``tests/fixtures/sdk_notifications/dsh-0.2.1rc2.json``,
written by ``scenario.py`` beside it from the real runtime), so no dsh binary is
needed here. Every kind dsh writes in the scenario is compared — the runtime-context
snapshot, the fallback title, the session-log delivery markers and the bash job's
``job/registered`` / ``job/settled`` included — so an extra, a missing or a reordered
notification fails. :data:`DSH_ONLY` would name a kind dshpy-runtime does not write.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from sdk_support import dshpy_runtime as _runtime

from dshpy import decode_event

pytest.importorskip("deepseek_harness")
pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning", "ignore::pytest.PytestUnraisableExceptionWarning")

SCENARIO = Path(__file__).parents[1] / "fixtures" / "sdk_notifications" / "scenario.py"

DSH_ONLY: frozenset[str] = frozenset()
"""Kinds dsh writes in this scenario that dshpy-runtime does not (none since #17's runtime records)."""


def _scenario() -> ModuleType:
    spec = importlib.util.spec_from_file_location("sdk_notifications_scenario", SCENARIO)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_dshpy_runtime_notifications_match_dshs_in_kind_and_order(tmp_path: Path) -> None:
    scenario = _scenario()
    dsh = json.loads(scenario.FIXTURE.read_text())
    ours = scenario.run_scenario(_runtime(), tmp_path)

    # the scenario itself went as it did under dsh: bash ran and returned hi
    assert ours["answers"] == dsh["answers"] == ["Four.", "It printed hi.", "Still four."]
    assert ours["finish"] == dsh["finish"] == ["completed"] * 3
    assert ours["requests"] == dsh["requests"] == 4
    for results in (ours["toolResults"], dsh["toolResults"]):
        assert [(r["tool_use_id"], r["content"][0]["text"], r["is_error"]) for r in results] == [
            ("toolu_scenario_1", "hi\n", False)
        ]

    assert len(ours["runs"]) == len(dsh["runs"]) == 3
    for number, (theirs, mine) in enumerate(zip(dsh["runs"], ours["runs"], strict=True), 1):
        expected = [kind for kind in theirs if kind not in DSH_ONLY]
        assert mine == expected, f"run {number}"
        assert not DSH_ONLY & set(mine), f"run {number}: dshpy writes one now; drop it from DSH_ONLY"
    # every gap named above is real: dsh does write it in this scenario
    assert {kind for run in dsh["runs"] for kind in run} >= DSH_ONLY

    # the records themselves: the same keys in the same order, at the same seqs, with the same values but for
    # what differs per run (ids, times, the work directory)
    assert list(ours["records"]) == list(dsh["records"]) == list(scenario.RECORDS)
    for kind in scenario.RECORDS:
        mine_record, theirs_record = ours["records"][kind], dsh["records"][kind]
        assert key_paths(mine_record) == key_paths(theirs_record), kind
        assert mine_record["seq"] == theirs_record["seq"], kind
        assert comparable(mine_record["data"]) == comparable(theirs_record["data"]), kind


VARYING = frozenset({"id", "jobId", "owner", "sessionId", "startedAt", "finishedAt"})


def key_paths(value: Any, prefix: str = "") -> list[str]:
    """Every key path of a JSON value in order (list items by position): its shape, key order included."""
    if isinstance(value, dict):
        return [p for key, item in value.items() for p in [f"{prefix}.{key}", *key_paths(item, f"{prefix}.{key}")]]
    if isinstance(value, list):
        return [p for index, item in enumerate(value) for p in key_paths(item, f"{prefix}[{index}]")]
    return []


def comparable(value: Any) -> Any:
    """``value`` without what differs from run to run: ids, times, the session and its directory."""
    if isinstance(value, dict):
        return {key: "*" if key in VARYING else comparable(item) for key, item in value.items()}
    if isinstance(value, list):
        return [comparable(item) for item in value]
    if isinstance(value, str):
        return re.sub(r'directory: "[^"]*"', 'directory: "<cwd>"', value)
    return value


def test_dshpy_reads_the_records_dshs_runtime_wrote_and_shows_the_model_only_the_snapshot() -> None:
    dsh = json.loads(_scenario().FIXTURE.read_text())
    for kind, record in dsh["records"].items():
        event = decode_event(record)
        assert event.type == kind.split(":")[0]
        assert event.is_surface == (kind == "user/message:runtime-context"), kind
