"""``HarnessClient.search`` and its async twin over stdio: the server's ``session.search`` page, refusals as errors."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from server_support import server_env

import dshpy
from dshpy.sdk import HarnessError
from dshpy.testing.fake_model import FakeModelServer, Reply


@pytest.fixture
def model() -> Iterator[FakeModelServer]:
    with FakeModelServer(default=Reply.text("the flux capacitor is charged")) as server:
        yield server


def test_search_finds_what_a_turn_said_and_refuses_bad_queries(tmp_path: Path, model: FakeModelServer) -> None:
    env = server_env(tmp_path / "home", model.base_url)
    with dshpy.HarnessClient(profile="sdk", env=env) as client:
        session = client.create_session()
        client.send_message(session.id, "is the flux capacitor ready?")
        page = client.search("flux capacitor", types=["assistant/message"])
        assert [(hit["sessionId"], hit["type"]) for hit in page["hits"]] == [(session.id, "assistant/message")]
        assert page["nextCursor"] is None
        assert client.search("flux capacitor", session_id=session.id, limit=1)["nextCursor"] is not None
        assert client.search("flux OR nothing", operators=True, filters={"excludeIds": [session.id]})["hits"] == []
        with pytest.raises(HarnessError) as caught:
            client.search("")
        assert caught.value.code == -32602 and caught.value.data == {"code": "SESSION_QUERY_INVALID_QUERY"}


def test_async_search(tmp_path: Path, model: FakeModelServer) -> None:
    env = server_env(tmp_path / "home", model.base_url)

    async def scenario() -> list[str]:
        async with dshpy.AsyncHarnessClient(profile="sdk", env=env) as client:
            session = await client.create_session()
            await client.send_message(session.id, "where is the flux capacitor")
            page = await client.search("flux capacitor", since="2000-01-01T00:00:00Z")
            with pytest.raises(HarnessError) as caught:
                await client.search("x", cursor="garbage")
            assert caught.value.data == {"code": "SESSION_QUERY_INVALID_CURSOR"}
            return [hit["sessionId"] for hit in page["hits"]]

    found = asyncio.run(scenario())
    assert len(found) == 2 and len(set(found)) == 1
