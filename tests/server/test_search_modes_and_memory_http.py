"""Over real HTTP: ``session.search`` with ``mode`` (and ``HarnessClient.search(mode=)``), and ``serve --memory``."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import pytest
from server_support import http_server, server_env

import dshpy
from dshpy.log.event_text import event_text
from dshpy.sdk import HarnessError
from dshpy.testing.builders import TurnScript, user_message
from dshpy.testing.fake_model import FakeModelServer, Reply

PROMPTS = {
    "db": "the database connection was refused on port 5432",
    "bread": "bake a sourdough bread with rye flour and a long proof",
    "config": "parse_config raises KeyError when the section is missing",
}


def _store(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'sessions.db'}"
    store = dshpy.open_store(url)
    for session_id, text in PROMPTS.items():
        with store.create(session_id=session_id, cwd="/srv/app") as session:
            session.append("user/message", user_message(text), surface_op="append")
    store.close()
    return url


def test_search_modes_over_http(tmp_path: Path) -> None:
    pytest.importorskip("numpy", reason="semantic search needs the extra: pip install 'dshpy[semantic]'")
    pytest.importorskip("static_model", reason="the local model needs the extra: pip install 'dshpy[semantic]'")
    url = _store(tmp_path)
    vectors = tmp_path / "vectors.sqlite"
    server = http_server(tmp_path / "home", None, "--store", url, "--token", "tok", "--vectors", str(vectors))
    with server as (base, _process), dshpy.HarnessClient(url=base, token="tok") as client:
        paraphrase = "unable to connect to the postgres server"
        assert client.search(paraphrase)["hits"] == []  # fts by default
        meaning = client.search(paraphrase, mode="semantic")
        assert meaning["hits"][0]["sessionId"] == "db"
        fused = client.search("KeyError", mode="hybrid")
        assert fused["hits"][0]["sessionId"] == "config"
        assert len(fused["hits"]) == 3

        store = dshpy.open_store(url)  # written by another process: the next search catches up
        with store.create(session_id="later", cwd="/srv/app") as session:
            session.append("user/message", user_message("kneading dough for a rye loaf"), surface_op="append")
        store.close()
        later = client.search("bread", mode="semantic", limit=10)
        assert "later" in {hit["sessionId"] for hit in later["hits"]}
        assert client.search("bread", mode="semantic", session_id="later")["hits"][0]["sessionId"] == "later"

        with pytest.raises(HarnessError) as caught:
            client.search("bread", mode="vector")
        assert caught.value.code == -32602
        assert caught.value.data["code"] == "SESSION_QUERY_INVALID_QUERY"
        assert "mode must be one of fts, semantic, hybrid" in str(caught.value)
    with sqlite3.connect(vectors) as db:  # --vectors: what the server embedded is kept for its next run
        assert db.execute("SELECT count(*) FROM chunks").fetchone()[0] == 4


def test_memory_tools_in_serve_over_http(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'sessions.db'}"
    store = dshpy.open_store(url)
    with store.create(session_id="earlier", cwd="/srv/app") as session:
        TurnScript(session).turn("Which port does the staging proxy use?")
    with store.create(session_id="elsewhere", cwd="/other") as session:
        TurnScript(session).turn("the staging proxy of another project")
    store.close()
    with FakeModelServer(default=Reply.text("Done.")) as model:
        model.add(
            Reply.tool_calls(("session_search", json.dumps({"query": "staging proxy"}), "c1")),
            Reply.text("8443, as found earlier."),
        )
        # --tools none: only the memory tools, so the tool list below is theirs alone
        server = http_server(tmp_path / "home", model.base_url, "--store", url, "--memory", "--tools", "none")
        with server as (base, _process), dshpy.HarnessClient(url=base) as client:
            client.create_session("now", cwd="/srv/app")
            answer = client.send_message("now", "What did we find about the staging proxy?")
            assert answer.content == "8443, as found earlier."
        tools = [tool["function"]["name"] for tool in model.requests[0].get("tools", [])]
        assert tools == ["session_search", "session_read"]
        plain = http_server(tmp_path / "home", model.base_url, "--store", url, "--tools", "none")
        with plain as (base, _process), dshpy.HarnessClient(url=base) as client:
            client.create_session("plain")
            assert client.send_message("plain", "hi").content == "Done."
        assert model.requests[-1].get("tools", []) == []  # off unless asked
    store = dshpy.open_store(url)
    result = next(e for e in store.read("now") if e.type == "tool/result")
    found = event_text(result)
    assert "[earlier#" in found and "«staging proxy»" in found
    assert "elsewhere" not in found  # scoped to the session's working directory
    assert "[now#" not in found  # never the session's own surface
    store.close()


def test_dshpy_runtime_takes_memory_from_the_profile(tmp_path: Path) -> None:
    """``dshpy-runtime`` (what dsh's SDK launches) has no flags for it: the profile's ``memory`` keys decide."""
    home = tmp_path / "home"
    home.mkdir()
    url = f"sqlite:///{tmp_path / 'sessions.db'}"
    profile = f'[profiles.sdk]\nstore = "{url}"\nmemory = true\nmemory_scope = "all"\ntools = "none"\n'
    (home / "config.toml").write_text(profile)
    runtime = [sys.executable, "-c", "from dshpy.server.main import main; main()"]
    with FakeModelServer(default=Reply.text("Done.")) as model:
        env = server_env(home, model.base_url)
        with dshpy.HarnessClient(profile="sdk", env=env, command=runtime, store=url) as client:
            client.create_session("one")
            assert client.send_message("one", "hello").content == "Done."
        (home / "config.toml").write_text(f'[profiles.sdk]\nstore = "{url}"\ntools = "none"\n')
        with dshpy.HarnessClient(profile="sdk", env=env, command=runtime, store=url) as client:
            client.create_session("two")
            assert client.send_message("two", "hello").content == "Done."
    names = [[tool["function"]["name"] for tool in request.get("tools", [])] for request in model.requests]
    assert names == [["session_search", "session_read"], []]
