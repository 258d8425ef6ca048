"""The seed's cross-session memory plugin (examples/memory_plugin.py), applied by a PluginHost, run offline."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import dshpy
from dshpy.agent import Agent
from dshpy.llm import ChatClient, ModelConfig
from dshpy.testing.fake_model import FakeModelServer, Reply

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "memory_plugin.py"


def load_example():
    spec = importlib.util.spec_from_file_location("memory_plugin", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_previous_sessions_fact_is_recalled_once_through_the_seeds_plugin_form(tmp_path):
    plugin = load_example()
    store = dshpy.open_store(f"sqlite:///{tmp_path}/memory.db")
    host = dshpy.PluginHost(store, [plugin])  # the module is the plugin: name, inject, apply(ctx)
    script = [
        Reply.text("Noted: the password is kiwi."),  # session 1
        Reply.text("Nothing yet."),  # session 2, turn 1, step 1
        Reply.text("I remember: kiwi."),  # step 2, after the memory was injected
        Reply.text("Still kiwi."),  # turn 2: no second injection
    ]

    async def scenario():
        with FakeModelServer(script) as server:
            async with ChatClient(ModelConfig.from_env(base_url=server.base_url, api_key="k", env={})) as client:
                first = Agent(store.create(), client)
                host.attach(first)
                await first.run("The password is kiwi.")
                first.session.close()
                second = Agent(store.create(), client)
                host.attach(second)
                one = await second.run("Do you know me?")
                two = await second.run("And now?")
            return first.session.id, second.session, one, two, server.requests

    first_id, session, one, two, requests = asyncio.run(scenario())
    assert (one.steps, one.text, two.steps) == (2, "I remember: kiwi.", 1)
    memory = [m for m in session.derive_messages() if m.source == {"kind": "plugin:cross-session-memory"}]
    assert len(memory) == 1
    assert memory[0].text.startswith(f"[memory] Earlier session {first_id}:")
    assert "user: The password is kiwi." in memory[0].text
    assert "assistant: Noted: the password is kiwi." in memory[0].text
    assert requests[2]["messages"][-1] == {"role": "user", "content": memory[0].text}
    assert all("[memory]" not in str(request["messages"]) for request in requests[:2])
    assert plugin.already_injected(session)
    session.close()
    host.close()
    store.close()


def test_no_previous_session_means_no_memory():
    plugin = load_example()
    store = dshpy.open_store("memory:")
    host = dshpy.PluginHost(store, [plugin])

    async def scenario():
        with FakeModelServer([Reply.text("Hi.")]) as server:
            async with ChatClient(ModelConfig.from_env(base_url=server.base_url, api_key="k", env={})) as client:
                agent = Agent(store.create(), client)
                host.attach(agent)
                return await agent.run("hello")

    assert asyncio.run(scenario()).steps == 1


def test_the_example_runs_offline():
    env = {key: value for key, value in os.environ.items() if key != "DEEPSEEK_API_KEY"}
    result = subprocess.run(
        [sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=120, env=env, check=False
    )
    assert result.returncode == 0, result.stderr
    assert "after 2 steps: Actually, I remember now: the password is kiwi." in result.stdout
    assert "user: '[memory] Earlier session session-" in result.stdout
