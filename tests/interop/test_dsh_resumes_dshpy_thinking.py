"""The real dsh runtime resumes a session dshpy wrote on the Messages API and replays dshpy's thinking signature.

Skipped unless the runtime executable is present: ``$DSH_RUNTIME_BIN``, the installed
``deepseek_harness_runtime`` package, or ``pip install --target /tmp/dshbin --no-deps
deepseek-harness-runtime-bin==0.2.1rc2``. It needs the official SDK (in the dev venv).
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
from pathlib import Path

import pytest

import dshpy
from dshpy.agent import Agent
from dshpy.agent.system_prompt import DEFAULT_SYSTEM_PROMPT
from dshpy.llm import AnthropicClient, ModelConfig
from dshpy.testing.fake_model import FakeModelServer, Reply

deepseek_harness = pytest.importorskip("deepseek_harness")
pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning", "ignore::pytest.PytestUnraisableExceptionWarning")

_EXE = "runtime/deepseek-harness-sdk-runtime-linux-x64"


def _runtime_bin() -> Path | None:
    candidates = [os.environ.get("DSH_RUNTIME_BIN")]
    spec = importlib.util.find_spec("deepseek_harness_runtime")
    if spec is not None and spec.submodule_search_locations:
        candidates += [str(Path(location) / _EXE) for location in spec.submodule_search_locations]
    candidates.append(f"/tmp/dshbin/deepseek_harness_runtime/{_EXE}")
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK):
            return Path(candidate)
    return None


def test_dsh_resumes_a_dshpy_session_and_sends_dshpys_signature(tmp_path: Path) -> None:
    runtime = _runtime_bin()
    if runtime is None:
        pytest.skip("the dsh runtime executable is not installed (see the module docstring)")
    home, workspace = tmp_path / "home", tmp_path / "workspace"
    workspace.mkdir()
    store = dshpy.open_store(f"jsonl:///{home}/sessions?compression=zstd")  # dsh's default root and encoding
    session = store.create(session_id="dshpy-thinking", cwd=str(workspace))
    script = [Reply.text("Four.", reasoning="Simple sum.", signature="sig-written-by-dshpy"), Reply.text("Twelve.")]
    with FakeModelServer(script) as model:

        async def dshpy_turn() -> str:
            config = ModelConfig.from_env(base_url=model.base_url, api_key="k", provider="deepseek-official", env={})
            agent = Agent(session, AnthropicClient(config), system_prompt=DEFAULT_SYSTEM_PROMPT)
            result = await agent.run("What is 2 + 2?")
            await agent.client.close()
            return result.kind

        assert asyncio.run(dshpy_turn()) == "completed"
        session.close()
        options = {
            "dsh_bin": str(runtime),
            "dsh_home": str(home),
            "base_url": model.base_url,
            "api_key": "k",
            "cwd": str(workspace),
            "env": {"DSH_TELEMETRY_DISABLED": "1"},
        }
        with deepseek_harness.DeepSeekHarness(**options) as harness:
            result = harness.resume_session("dshpy-thinking").run("And times three?")
        assert (result.final_response, result.finish_reason) == ("Twelve.", "completed")
        dsh_request = model.requests[-1]

    assistant = dsh_request["messages"][1]
    assert assistant["role"] == "assistant"
    assert assistant["content"][0] == {
        "type": "thinking",
        "thinking": "Simple sum.",
        "signature": "sig-written-by-dshpy",
    }
    # and dshpy reads back everything dsh appended
    view = store.inspect("dshpy-thinking")
    dshpy.validate(view.events)
    assert [m.text for m in view.derive_messages() if m.role == "assistant"] == ["Four.", "Twelve."]
    # dsh swapped in its own prompt by replacing dshpy's protected head, exactly as dshpy would
    heads = [e for e in view.events if e.type == "system/message"]
    assert heads[0].data["message"]["content"][0]["text"] == DEFAULT_SYSTEM_PROMPT
    assert heads[1].surface_op.to_wire() == {"op": "replace", "startSeq": heads[0].seq, "endSeq": heads[0].seq}
    assert dsh_request["system"] == heads[1].data["message"]["content"][0]["text"]
    store.close()
