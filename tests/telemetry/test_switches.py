"""Turning telemetry on and off: ``--otel``, the profile's ``otel``, ``DSHPY_OTEL``, ``OTEL_SDK_DISABLED``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dshpy.telemetry import TelemetrySwitch
from dshpy.telemetry.switch import requested
from dshpy.testing.fake_model import FakeModelServer, Reply


def dshpy_run(home: Path, *args: str, **env_vars: str) -> subprocess.CompletedProcess[str]:
    with FakeModelServer(default=Reply.text("ok")) as model:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("DSHPY_", "OTEL_", "DEEPSEEK_"))}
        env.update(
            DEEPSEEK_API_KEY="k",
            DEEPSEEK_BASE_URL=model.base_url,
            DSHPY_HOME=str(home),
            OTEL_TRACES_EXPORTER="console",
            OTEL_METRICS_EXPORTER="none",
            **env_vars,
        )
        return subprocess.run(
            [sys.executable, "-m", "dshpy", "--store", "memory:", "run", *args, "hi"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )


def test_the_profile_turns_it_on_and_the_flag_off(tmp_path: Path) -> None:
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "config.toml").write_text("[profiles.traced]\notel = true\n")
    assert '"name": "invoke_agent dshpy"' in dshpy_run(tmp_path, "--profile", "traced").stderr
    assert "invoke_agent" not in dshpy_run(tmp_path, "--profile", "traced", "--no-otel").stderr
    assert "invoke_agent" not in dshpy_run(tmp_path).stderr


def test_the_environment_switch_and_the_sdks_off_switch(tmp_path: Path) -> None:
    assert "invoke_agent" in dshpy_run(tmp_path, DSHPY_OTEL="1").stderr
    assert "invoke_agent" not in dshpy_run(tmp_path, "--otel", OTEL_SDK_DISABLED="true").stderr


def test_which_switch_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_SDK_DISABLED", raising=False)
    monkeypatch.setenv("DSHPY_OTEL", "1")
    assert requested() is True
    assert requested(configured=False) is False
    assert requested(flag=True, configured=False) is True
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    assert requested(flag=True) is False
    assert TelemetrySwitch(console=True).console and TelemetrySwitch().otel is None
