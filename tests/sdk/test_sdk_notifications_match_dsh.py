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
from pathlib import Path
from types import ModuleType

import pytest
from sdk_support import dshpy_runtime as _runtime

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
