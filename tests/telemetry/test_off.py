"""Telemetry off, or the extra missing: no OpenTelemetry module is imported, and asking for it says what to install.

Run in child processes: the test process itself imports OpenTelemetry for the other tests.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from dshpy.testing.fake_model import FakeModelServer, Reply

TURN = textwrap.dedent(
    """
    import asyncio, json, os, sys
    {prelude}
    import dshpy
    from dshpy.agent import Agent
    from dshpy.llm import ChatClient, ModelConfig
    from dshpy.server.methods import Runtime, ServerSettings

    async def main():
        store = dshpy.open_store(sys.argv[1])
        session = store.create()
        config = ModelConfig.from_env(base_url=os.environ["DEEPSEEK_BASE_URL"], api_key="k", env={{}})
        async with ChatClient(config) as client:
            result = await Agent(session, client).run("hi")
        session.close()
        runtime = Runtime(store, ServerSettings(base_url=os.environ["DEEPSEEK_BASE_URL"]))
        parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        params = {{"sessionId": "x", "text": "hi", "create": True, "_meta": {{"traceparent": parent}}}}
        request = {{"jsonrpc": "2.0", "id": 1, "method": "session.send", "params": params}}
        await runtime.handle_frame(json.dumps(request).encode(), None, {{"traceparent": parent}})
        await runtime.close()
        store.close()
        return result.kind

    kind = asyncio.run(main())
    print(json.dumps({{"kind": kind, "otel": sorted(m for m in sys.modules if m.startswith("opentelemetry"))}}))
    """
)


def python(script: str, args: list[str], home: Path, base_url: str, **extra: str) -> subprocess.CompletedProcess:
    """``python -c script *args`` against the fake model, with no DSHPY_/OTEL_ setting inherited; must succeed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DSHPY_", "DEEPSEEK_", "OTEL_"))}
    env.update(DEEPSEEK_API_KEY="k", DEEPSEEK_BASE_URL=base_url, DSHPY_HOME=str(home), **extra)
    command = [sys.executable, "-c", script, *args]
    done = subprocess.run(command, env=env, cwd=home.parent, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done


def run_child(tmp_path: Path, prelude: str = "", *args: str) -> dict:
    with FakeModelServer(default=Reply.text("ok")) as model:
        script = TURN.format(prelude=prelude)
        done = python(script, [f"sqlite:///{tmp_path}/s.db", *args], tmp_path / "home", model.base_url)
    return json.loads(done.stdout.splitlines()[-1])


def test_a_turn_with_telemetry_off_imports_no_opentelemetry(tmp_path: Path) -> None:
    result = run_child(tmp_path)
    assert result == {"kind": "completed", "otel": []}


def test_without_the_extra_dshpy_works_and_enable_says_what_to_install(tmp_path: Path) -> None:
    blocked = "sys.modules['opentelemetry'] = None  # as if the [otel] extra were not installed"
    assert run_child(tmp_path, blocked) == {"kind": "completed", "otel": ["opentelemetry"]}
    script = blocked + textwrap.dedent(
        """
        import dshpy.telemetry
        try:
            dshpy.telemetry.enable()
        except dshpy.telemetry.TelemetryUnavailable as error:
            print(error)
        """
    )
    done = subprocess.run([sys.executable, "-c", "import sys\n" + script], capture_output=True, text=True, check=True)
    assert "pip install 'dshpy[otel]'" in done.stdout


def test_dshpy_run_otel_without_the_extra_is_a_usage_error(tmp_path: Path) -> None:
    launcher = "import sys; sys.modules['opentelemetry'] = None; from dshpy.cli import main; main()"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DSHPY_", "OTEL_"))}
    env.update(DEEPSEEK_API_KEY="k", DSHPY_HOME=str(tmp_path))
    done = subprocess.run(
        [sys.executable, "-c", launcher, "--store", "memory:", "run", "--otel", "hi"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert "dshpy[otel]" in done.stderr and "Traceback" not in done.stderr


RUN_AND_LIST_MODULES = textwrap.dedent(
    """
    import atexit, json, sys

    def report():
        loaded = sorted(name for name in sys.modules if name.startswith("opentelemetry"))
        sys.stderr.write("\\nOTEL-MODULES " + json.dumps(loaded) + "\\n")

    atexit.register(report)
    from dshpy.cli import main
    sys.argv[0] = "dshpy"
    main()
    """
)


def test_dshpy_run_with_telemetry_off_imports_no_opentelemetry(tmp_path: Path) -> None:
    """The real command, as a process: a turn with a tool call, stored in SQLite, and no OpenTelemetry module loaded.

    ``--otel`` in the same child is the control: the probe does see OpenTelemetry when it is there.
    """
    (tmp_path / "a.txt").write_text("hello")
    replies = [Reply.tool_calls(("read_file", '{"path": "a.txt"}')), Reply.text("It says hello.")]

    def run(*flags: str) -> tuple[dict, list[str]]:
        with FakeModelServer(replies) as model:
            store = f"sqlite:///{tmp_path}/s{len(flags)}.db"
            args = ["--store", store, "run", *flags, "--json", "read a.txt"]
            none = {"OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none"}  # the control exports nowhere
            done = python(RUN_AND_LIST_MODULES, args, tmp_path / "home", model.base_url, **none)
        (line,) = [line for line in done.stderr.splitlines() if line.startswith("OTEL-MODULES ")]
        return json.loads(done.stdout), json.loads(line.removeprefix("OTEL-MODULES "))

    result, loaded = run()
    assert result["reason"] == {"kind": "completed"} and result["steps"] == 2 and "hello" in result["text"]
    assert loaded == []
    _result, control = run("--otel")
    assert "opentelemetry.trace" in control and "opentelemetry.sdk.trace" in control
