"""HarnessClient / AsyncHarnessClient end to end, over stdio and HTTP, against FakeModelServer."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from server_support import http_server, server_env

import dshpy
from dshpy.sdk import HarnessError, load_profile
from dshpy.testing.fake_model import FakeModelServer, Reply


@pytest.fixture
def model() -> Iterator[FakeModelServer]:
    with FakeModelServer(default=Reply.text("pong")) as server:
        yield server


def _exercise(client: dshpy.HarnessClient) -> None:
    session = client.create_session()
    response = client.send_message(session.id, "ping")
    assert response.content == "pong" and response.finish_reason == "completed"
    assert response.usage["outputTokens"] == 12
    assert [e["type"] for e in response.events][-1] == "turn/end"
    assert session.id in [s.id for s in client.list_sessions()]
    info = client.get_session(session.id)
    assert info.event_count >= 8 and "projections" in info.raw
    events = client.events(session.id)
    assert [e["seq"] for e in events] == list(range(len(events)))
    assert [e["type"] for e in client.events(session.id, types=["turn/end"])] == ["turn/end"]
    streamed = list(client.stream(session.id, "again"))
    assert streamed[-1]["type"] == "turn/end" and streamed[-1]["data"]["turn"] == 2
    assert client.last_response is not None and client.last_response.content == "pong"
    child = client.fork_session(session.id, boundary=len(events) - 1)
    assert child.parent_session == session.id
    assert client.send_message(child.id, "in the fork").content == "pong"
    with pytest.raises(HarnessError) as caught:
        client.fork_session(session.id, boundary=10_000)
    assert caught.value.code == -32003 and caught.value.data["code"] == "INVALID_BOUNDARY"
    with pytest.raises(HarnessError) as caught:
        client.get_session("nope")
    assert caught.value.code == -32001
    with pytest.raises(dshpy.SessionNotFound) as missing:  # a typo never starts a session of its own
        client.send_message("nope", "hi")
    assert isinstance(missing.value, HarnessError) and missing.value.code == -32001
    assert "nope" not in [s.id for s in client.list_sessions()]
    created = client.request("session.send", {"sessionId": "made-here", "text": "hi", "create": True})
    assert created["content"] == "pong" and client.get_session("made-here").id == "made-here"


def test_stdio_client_end_to_end(tmp_path: Path, model: FakeModelServer) -> None:
    env = server_env(tmp_path / "home", model.base_url)
    with dshpy.HarnessClient(profile="sdk", env=env) as client:
        _exercise(client)
    assert client.transport.process.returncode == 0  # type: ignore[attr-defined]


def test_http_client_end_to_end_and_two_clients_at_once(tmp_path: Path, model: FakeModelServer) -> None:
    model.add(*[Reply.text("pong") for _ in range(0)])
    with http_server(tmp_path, model.base_url, "--token", "tok") as (url, _process):
        with dshpy.HarnessClient(url=url, token="tok") as client:
            _exercise(client)
        slow = FakeModelServer(default=Reply.text("slow answer", chunk_delay=0.05))
        results: dict[str, str] = {}

        def worker(name: str) -> None:
            with dshpy.HarnessClient(url=url, token="tok") as c:
                session = c.create_session(name)
                results[name] = c.send_message(session.id, f"hello {name}").content

        threads = [threading.Thread(target=worker, args=(name,)) for name in ("alpha", "beta")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        slow.close()
        assert results == {"alpha": "pong", "beta": "pong"}


def test_async_client(tmp_path: Path, model: FakeModelServer) -> None:
    env = server_env(tmp_path / "home", model.base_url)

    async def main() -> None:
        async with dshpy.AsyncHarnessClient(env=env) as client:
            first, second = await asyncio.gather(client.create_session("one"), client.create_session("two"))
            answers = await asyncio.gather(client.send_message(first.id, "a"), client.send_message(second.id, "b"))
            assert [a.content for a in answers] == ["pong", "pong"]
            types = [event["type"] async for event in client.stream(first.id, "c")]
            assert types[-1] == "turn/end"
            assert len(await client.list_sessions()) == 2

    asyncio.run(main())


def test_profiles(tmp_path: Path) -> None:
    assert load_profile("sdk", tmp_path).store is None
    (tmp_path / "config.toml").write_text('[profiles.work]\nstore = "memory:"\nmodel = "m"\nmax_tokens = 9\n')
    profile = load_profile("work", tmp_path)
    assert (profile.store, profile.model, profile.max_tokens) == ("memory:", "m", 9)
    with pytest.raises(dshpy.sdk.ProfileError):
        load_profile("missing", tmp_path)


def test_async_client_over_http(tmp_path: Path, model: FakeModelServer) -> None:
    """AsyncHarnessClient(url=...) runs on httpx's AsyncClient: concurrent calls, a streamed turn, errors."""
    with http_server(tmp_path, model.base_url, "--token", "tok") as (url, _process):

        async def main() -> None:
            async with dshpy.AsyncHarnessClient(url=url, token="tok") as client:
                first, second = await asyncio.gather(client.create_session("one"), client.create_session("two"))
                answers = await asyncio.gather(client.send_message(first.id, "a"), client.send_message(second.id, "b"))
                assert [a.content for a in answers] == ["pong", "pong"]
                types = [event["type"] async for event in client.stream(first.id, "c")]
                assert types[0] != "turn/end" and types[-1] == "turn/end"
                assert client.last_response is not None and client.last_response.turn == 2
                assert len(await client.list_sessions()) == 2
                assert [e["type"] for e in await client.events(first.id, types=["turn/end"])] == ["turn/end"] * 2
                child = await client.fork_session(first.id)
                assert child.parent_session == first.id
                with pytest.raises(HarnessError) as caught:
                    await client.get_session("nope")
                assert caught.value.code == -32001
            async with dshpy.AsyncHarnessClient(url=url, token="wrong") as client:
                with pytest.raises(HarnessError) as caught:
                    await client.list_sessions()
                assert "401" in caught.value.message

        asyncio.run(main())


def test_http_client_survives_its_idle_connection_being_dropped(tmp_path: Path) -> None:
    """The server drops idle keep-alive connections first when its connection cap is reached; clients reconnect."""
    with http_server(tmp_path, None, "--max-connections", "2") as (url, _process):
        parts = urlsplit(url)
        with dshpy.HarnessClient(url=url) as client:
            assert client.list_sessions() == []  # leaves a pooled keep-alive connection
            for _ in range(3):
                flood = [socket.create_connection((parts.hostname, parts.port)) for _ in range(2)]
                time.sleep(0.1)  # the server evicted the client's idle connection for these
                for sock in flood:
                    sock.close()
                assert client.create_session().id in [s.id for s in client.list_sessions()]


def test_compact_session_and_context_usage_over_stdio(tmp_path: Path, model: FakeModelServer) -> None:
    env = server_env(tmp_path / "home", model.base_url)
    with dshpy.HarnessClient(profile="sdk", env=env, context_window=50_000, auto_compact=False) as client:
        session = client.create_session()
        with pytest.raises(HarnessError) as caught:
            client.compact_session(session.id)
        assert caught.value.code == -32000 and caught.value.data["code"] == "empty"
        for text in ("remember the kiwi " * 100, "and the plum " * 100):
            client.send_message(session.id, text)
        before = client.context_usage(session.id)
        assert before["window"] == 50_000 and 0 < before["ratio"] < 1
        plan = client.compact_session(session.id, dry_run=True)
        assert plan["dryRun"] is True and len(plan["shadowedSeqs"]) == 3
        result = client.compact_session(session.id)
        assert result["shadowedSeqs"] == plan["shadowedSeqs"]
        assert result["context"]["used"] < before["used"]
        assert client.get_session(session.id).context == result["context"]
        types = [e["type"] for e in client.events(session.id, from_seq=result["startSeq"])]
        assert types == ["compaction/start", "compaction/summary", "user/message", "compaction/end"]


def test_async_client_compacts(tmp_path: Path, model: FakeModelServer) -> None:
    env = server_env(tmp_path / "home", model.base_url)

    async def scenario() -> dict[str, Any]:
        async with dshpy.AsyncHarnessClient(profile="sdk", env=env) as client:
            session = await client.create_session()
            await client.send_message(session.id, "a long prompt " * 200)
            await client.send_message(session.id, "again")
            assert (await client.context_usage(session.id))["window"] == 131_072
            return await client.compact_session(session.id)

    result = asyncio.run(scenario())
    assert result["summarySeq"] == result["startSeq"] + 1
