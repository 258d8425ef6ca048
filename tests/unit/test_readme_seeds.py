"""README's "From the seeds to dshpy" block runs as written."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_seeds_walkthrough_in_the_readme_runs():
    text = README.read_text(encoding="utf-8")
    section = text.split("## From the seeds to dshpy", 1)[1].split("\n## ", 1)[0]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None
    namespace: dict[str, object] = {}
    exec(compile(code.group(1), "README.md (From the seeds to dshpy)", "exec"), namespace)
    assert namespace["child"].header.parent_session == "demo"
    assert namespace["snap"]["values"]["turnBoundary"]["lastTurn"] == 2
