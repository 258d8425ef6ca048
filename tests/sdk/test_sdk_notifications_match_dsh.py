"""The notifications the official SDK returns per run from ``dshpy-runtime`` against dsh's, in kind and order.

dsh's sequence is committed (``tests/fixtures/sdk_notifications/dsh-0.2.1rc2.json``,
written by ``scenario.py`` beside it from the real runtime), so no dsh binary is
needed here. dsh writes four kinds of event dshpy-runtime does not write yet; they are
named in :data:`DSH_ONLY` and taken out of dsh's sequence before the comparison, so
anything else that differs — an extra, a missing or a reordered notification — fails.
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

DSH_ONLY = frozenset(
    {
        "user/message:runtime-context",  # dsh's runtime-context snapshot after the first prompt
        "session/title",  # the fallback title from the first prompt
        "session-log-deepseek/delivery-accepted",  # before each assistant/message
        "job/registered",  # bash runs as a job in dsh ...
        "job/settled",  # ... settled before its tool/result
    }
)


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
