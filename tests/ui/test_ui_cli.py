"""``dshpy ui`` as a real process: it prints the URL, serves the page and the API behind the printed token,
and refuses what it cannot do with one clear line."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from click.testing import CliRunner

import dshpy
from dshpy.cli import cli
from dshpy.testing.showcase import build_showcase


def _env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ, DSHPY_HOME=str(tmp_path / "home"))
    env.pop("DSHPY_TOKEN", None)
    return env


def test_ui_prints_a_url_whose_token_opens_the_api(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    store = dshpy.open_store(url)
    showcase = build_showcase(store)
    store.close()
    command = [sys.executable, "-m", "dshpy", "ui", "--store", url, "--port", "0"]
    env = _env(tmp_path) | {"DSHPY_PRICES": '{"deepseek-chat": {"input": 1000, "output": 2000}}'}
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True) as process:
        _drive(process, showcase.session_id)
    assert process.returncode == 0


def _drive(process: subprocess.Popen[str], session_id: str) -> None:
    try:
        assert process.stdout is not None
        printed = process.stdout.readline().strip()
        parts = urlsplit(printed)
        assert parts.scheme == "http" and parts.hostname == "127.0.0.1" and parts.path == "/ui/"
        assert parts.fragment.startswith("token=") and len(parts.fragment) > 20
        token = parts.fragment.removeprefix("token=")
        connection = http.client.HTTPConnection("127.0.0.1", parts.port, timeout=30)
        connection.request("GET", "/ui/")
        page = connection.getresponse()
        assert page.status == 200 and b"assets/app.js" in page.read()
        connection.request("GET", "/ui/api/sessions")
        refused = connection.getresponse()
        refused.read()
        assert refused.status == 401
        connection.request("GET", "/ui/api/sessions", headers={"Authorization": f"Bearer {token}"})
        listed = connection.getresponse()
        rows = json.loads(listed.read())["sessions"]
        assert [row["id"] for row in rows] == [session_id]
        cost = rows[0]["cost"]  # priced from $DSHPY_PRICES, as `sessions stats` prices
        assert cost["complete"] is True and cost["total"] > 0.9  # 720 input + 124 output tokens at least
        connection.close()
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def test_ui_refuses_a_missing_store_and_a_public_address(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DSHPY_HOME", str(tmp_path / "home"))
    runner = CliRunner()
    missing = runner.invoke(cli, ["ui", "--store", f"sqlite:///{tmp_path / 'none.db'}", "--port", "0"])
    assert missing.exit_code == 1
    assert "no store at" in missing.output and not (tmp_path / "none.db").exists()
    url = f"sqlite:///{tmp_path / 's.db'}"
    dshpy.open_store(url).close()
    public = runner.invoke(cli, ["ui", "--store", url, "--host", "0.0.0.0", "--port", "0"])
    assert public.exit_code == 1
    assert "loopback only" in public.output
