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
