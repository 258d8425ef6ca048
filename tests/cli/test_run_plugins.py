"""``dshpy run`` applies the plugins config.toml names: the seed's memory plugin recalls the previous session's fact."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from dshpy.testing.fake_model import FakeModelServer, Reply

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def dshpy_run(home: Path, store: str, base_url: str, prompt: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DSHPY_", "DEEPSEEK_"))}
    env.update(DSHPY_HOME=str(home), DEEPSEEK_API_KEY="k", DEEPSEEK_BASE_URL=base_url)
    env["PYTHONPATH"] = os.pathsep.join([str(EXAMPLES), env.get("PYTHONPATH", "")])
    result = subprocess.run(
        [sys.executable, "-m", "dshpy", "--store", store, "--json", "run", prompt],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_the_memory_plugin_from_config_toml_recalls_the_previous_sessions_fact(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text('[plugins]\nload = ["memory_plugin"]\nentry_points = false\n')
    store = f"sqlite:///{tmp_path}/s.db"
    script = [Reply.text("Noted."), Reply.text("Not yet."), Reply.text("You told me: the password is kiwi.")]
    with FakeModelServer(script) as model:
        first = dshpy_run(home, store, model.base_url, "Remember: the password is kiwi.")
        second = dshpy_run(home, store, model.base_url, "What is the password?")
        requests = model.requests
    assert first["sessionId"] != second["sessionId"]
    assert second["text"] == "You told me: the password is kiwi."
    memory = requests[2]["messages"][-1]
    assert memory["role"] == "user"
    assert memory["content"].startswith(f"[memory] Earlier session {first['sessionId']}:")
    assert "user: Remember: the password is kiwi." in memory["content"]
