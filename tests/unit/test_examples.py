"""The README's quick start must keep working as a real process."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_quickstart_runs():
    result = subprocess.run([sys.executable, str(ROOT / "examples" / "quickstart.py")], capture_output=True,
                            text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert "tool: 42" in result.stdout
    assert "next turn 2" in result.stdout
    assert "turn/end interrupted" in result.stdout


def _quick_start_snippet() -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Quick start") :]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_the_readme_quick_start_snippet_prints_what_it_says_and_closes_its_turn(tmp_path):
    import json
    import os

    snippet = _quick_start_snippet()
    promised = snippet.split("print(s.derive_messages())", 1)[1].split("# ", 1)[1].splitlines()[0].strip()
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    ran = subprocess.run([sys.executable, "-c", snippet], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=60, check=False)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == promised
    store = ["--store", "sqlite:///sessions.db"]
    listed = subprocess.run([sys.executable, "-m", "dshpy", *store, "sessions", "list", "--json"], cwd=tmp_path,
                            env=env, capture_output=True, text=True, timeout=60, check=True)
    session_id = json.loads(listed.stdout)[0]["id"]
    shown = subprocess.run([sys.executable, "-m", "dshpy", *store, "sessions", "show", session_id, "--json"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=True)
    document = json.loads(shown.stdout)
    assert document["stats"]["pendingRepair"] == 0
    assert document["turns"] == [{"turn": 1, "outcome": "completed", "message": None, "stored": True}]


def test_the_root_help_starts_with_the_main_job():
    import os

    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "COLUMNS": "80"}
    shown = subprocess.run([sys.executable, "-m", "dshpy", "--help"], env=env, capture_output=True, text=True,
                           timeout=60, check=True).stdout
    for command in ('dshpy run "PROMPT"', "dshpy chat", "dshpy serve", "DEEPSEEK_API_KEY", "DEEPSEEK_BASE_URL"):
        assert command in shown
    assert max(len(line) for line in shown.splitlines()) <= 80
