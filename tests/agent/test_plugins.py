"""Plugins in the seed's form: name, the services they need, apply(ctx), ctx.on(point) with dsh's or dshpy's names."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import dshpy
from dshpy.agent import Agent
from dshpy.llm import ChatClient, ModelConfig
from dshpy.llm.retry import RetryPolicy
from dshpy.plugins import DSH_AGENT_POINTS, PluginError, PluginHost
from dshpy.testing.fake_model import FakeModelServer, Reply


class Probe:
    """A plugin object that records what it sees at each point and injects once, in the seed's message shape."""

    name = "probe"
    inject = ("sessions",)

    def __init__(self) -> None:
        self.seen: list[tuple[Any, ...]] = []

    def apply(self, ctx: Any) -> None:
        assert ctx.sessions is not None
        ctx.on("agent/pre-step", lambda p: self.seen.append(("agent/pre-step", p.step)))
        ctx.on("pre-step", lambda p: self.seen.append(("pre-step", p.step)))
        ctx.on("agent/request", lambda p: self.seen.append(("agent/request", p.step, p.attempt)))
        ctx.on("agent/request-error", lambda p: self.seen.append(("agent/request-error", p.attempt, p.code)))
        ctx.on("session/flush", lambda p: self.seen.append(("session/flush", p.first_seq, p.last_seq)))

        async def stopping(payload: Any) -> None:
            self.seen.append(("agent/turn-stopping", payload.step))
            if payload.step == 1:
                payload.agent.inject({"type": "user", "content": [{"type": "text", "text": "one more thing"}]})

        ctx.on("agent/turn-stopping", stopping)


def client_for(server: FakeModelServer) -> ChatClient:
    return ChatClient(ModelConfig.from_env(base_url=server.base_url, api_key="k", env={}))


def test_dsh_names_and_dshpy_names_run_at_the_same_moments_and_injection_is_sourced_to_the_plugin():
    store = dshpy.open_store("memory:")
    host = PluginHost(store)
    probe = Probe()
    script = [Reply.server_error(503), Reply.text("first"), Reply.text("second")]

    async def scenario():
        with FakeModelServer(script) as server:
            async with client_for(server) as client:
                agent = Agent(store.create(session_id="s"), client, retry=RetryPolicy(max_retries=2, base_delay=0))
                host.attach(agent)  # attached before the plugin is applied: it still gets its handlers
                host.apply(probe)
                return agent, await agent.run("hello")

    agent, result = asyncio.run(scenario())
    assert (result.steps, result.text) == (2, "second")
    agent_points = [s for s in probe.seen if s[0] != "session/flush"]
    retry = next(e for e in agent.session.events if e.type == "llm/retry")  # logged with the same failure
    attempt_code = retry.data["failure"]["code"]
    assert agent_points == [
        ("agent/pre-step", 1),
        ("pre-step", 1),
        ("agent/request", 1, 1),
        ("agent/request-error", 1, attempt_code),
        ("agent/request", 1, 2),
        ("agent/turn-stopping", 1),
        ("agent/pre-step", 2),
        ("pre-step", 2),
        ("agent/request", 2, 1),
        ("agent/turn-stopping", 2),
    ]
    assert agent_points[3][2]  # the failure's code, as logged with the attempt
    injected = [m for m in agent.session.derive_messages() if m.text == "one more thing"]
    assert len(injected) == 1 and injected[0].source == {"kind": "plugin:probe"}
    assert injected[0].id  # filled in
    flushes = [s for s in probe.seen if s[0] == "session/flush"]
    assert flushes and flushes[0][1] == 0
    assert all(b[1] == a[2] + 1 for a, b in itertools.pairwise(flushes))
    assert set(DSH_AGENT_POINTS) == {"agent/pre-step", "agent/request", "agent/request-error", "agent/turn-stopping"}
    agent.session.close()


def test_inject_accepts_the_seeds_shape_and_role_messages_and_names_what_is_wrong():
    store = dshpy.open_store("memory:")
    agent = Agent(store.create(), ChatClient(ModelConfig.from_env(base_url="http://127.0.0.1:9", api_key="k", env={})))
    seed = agent.inject({"type": "user", "content": [{"type": "text", "text": "[记忆] kiwi"}]})
    role = agent.inject({"role": "user", "content": "plain"})
    assert seed["source"] == role["source"] == {"kind": "user"} and seed["id"] != role["id"]
    assert role["content"] == [{"type": "text", "text": "plain"}]
    kept = agent.inject({"role": "user", "content": "x", "id": "m-1", "source": {"kind": "plugin:mine"}})
    assert (kept["id"], kept["source"]) == ("m-1", {"kind": "plugin:mine"})
    before = len(agent.session)
    for bad, message in [
        ({"type": "assistant", "content": "x"}, "got type='assistant'"),
        ({"type": "user", "content": []}, "non-empty list of blocks"),
        ({"type": "user", "content": [{"text": "no type"}]}, r"content\[0\] must be a block with a 'type'"),
        ({"type": "user", "content": "x", "extra": 1}, "unknown key 'extra'"),
        ({"type": "user", "content": "x", "source": "user"}, "source must be a mapping with a 'kind'"),
    ]:
        with pytest.raises(ValueError, match=message):
            agent.inject(bad)
    assert len(agent.session) == before  # nothing logged for a refused message
    spliced = [e for e in agent.session.events if e.type == "agent/inbox/spliced"]
    assert [e.data["inserted"][0]["id"] for e in spliced] == [seed["id"], role["id"], "m-1"]


def test_refusals_name_the_plugin_and_what_is_wrong():
    store = dshpy.open_store("memory:")
    host = PluginHost(store)

    class Needs:
        name = "needs-search"
        inject = ("search-engine",)

        def apply(self, ctx):
            raise AssertionError("not applied")

    with pytest.raises(PluginError, match=r"needs the service 'search-engine'.*services: query, sessions"):
        host.apply(Needs())

    class Typo:
        name = "typo"

        def apply(self, ctx):
            ctx.on("agent/turn-stoping", print)

    with pytest.raises(PluginError, match=r"unknown lifecycle point 'agent/turn-stoping'.*agent/turn-stopping"):
        host.apply(Typo())
    with pytest.raises(PluginError, match="has no 'name' string"):
        host.apply(object())

    created: list[str] = []

    class Broken:
        name = "broken"

        def apply(self, ctx):
            ctx.on("session/created", lambda p: created.append(p.session.id))
            raise KeyError("boom")

    with pytest.raises(PluginError, match=r'plugin "broken" failed in apply\(\): KeyError'):
        host.apply(Broken())
    store.create(session_id="after-broken").close()
    assert created == []  # the half-applied plugin left nothing subscribed
    assert "broken" not in host.plugins
    host.apply(Probe())
    with pytest.raises(PluginError, match='a plugin named "probe" is already applied'):
        host.apply(Probe())


def write_distribution(site: Path) -> None:
    """A real (tiny) installed distribution: a module and its dist-info with a dshpy.plugins entry point."""
    (site / "seedplug_mod.py").write_text(
        textwrap.dedent(
            """
            name = "seed-entry"
            inject = ["sessions"]
            def apply(ctx):
                ctx.on("session/created", lambda p: print("created", ctx.name, p.session.id, dict(ctx.options)))
            """
        )
    )
    (site / "local_plug.py").write_text(
        textwrap.dedent(
            """
            class Audit:
                name = "audit"
                def apply(self, ctx):
                    ctx.on("session/disposed", lambda p: print("disposed", ctx.name, p.session_id))
            """
        )
    )
    info = site / "seedplug-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: seedplug\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[dshpy.plugins]\nseed = seedplug_mod\n")


LOADER = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    import dshpy

    def names(config):
        try:
            return [[type(p.plugin).__name__, p.origin, dict(p.options)] for p in dshpy.load_plugins(config)]
        except dshpy.PluginError as error:
            return str(error)

    loaded = dshpy.load_plugins()  # $DSHPY_HOME/config.toml
    print(json.dumps(names(None)))
    store = dshpy.open_store("memory:")
    host = dshpy.PluginHost(store, loaded)
    store.create(session_id="x").close()
    print(json.dumps({path: names(Path(path)) for path in sys.argv[1:]}))
    """
)


def test_plugins_load_from_the_config_file_and_from_installed_entry_points(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    write_distribution(site)
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(
        '[plugins]\nload = ["local_plug:Audit"]\n[plugins.options."seed-entry"]\nlast = 3\n'
    )
    others = {
        "off": '[plugins]\nload = ["local_plug:Audit"]\nentry_points = false\n',
        "disabled": '[plugins]\ndisable = ["seed-entry"]\n',
        "missing": '[plugins]\nload = ["no_such_module_here"]\n',
        "typo": "[plugins]\nlaod = []\n",
    }
    for name, text in others.items():
        (tmp_path / f"{name}.toml").write_text(text)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSHPY_")}
    env["DSHPY_HOME"] = str(home)
    env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")])
    argv = [str(tmp_path / f"{name}.toml") for name in others]
    result = subprocess.run(
        [sys.executable, "-c", LOADER, *argv], capture_output=True, text=True, env=env, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    loaded = json.loads(lines[0])
    assert loaded[0][0] == "Audit" and "plugins.load 'local_plug:Audit'" in loaded[0][1]
    assert loaded[1][0] == "module" and "entry point 'seed' (dshpy.plugins) of seedplug" in loaded[1][1]
    assert loaded[1][2] == {"last": 3}
    assert lines[1:3] == ["created seed-entry x {'last': 3}", "disposed audit x"]
    by_name = {Path(path).stem: value for path, value in json.loads(lines[3]).items()}
    assert [row[0] for row in by_name["off"]] == ["Audit"]
    assert [row[0] for row in by_name["disabled"]] == []
    assert "plugins.load 'no_such_module_here': cannot import 'no_such_module_here'" in by_name["missing"]
    assert "unknown key plugins.laod" in by_name["typo"]
