"""Model time limits over real HTTP (issue #11, item 14): connect, read (between chunks), total.

Each limit is tested against a server that really misbehaves: one that never answers
the connect (``SilentPort``), one that never sends the answer's headers
(``Reply.hang``), one that stops mid-stream (``Reply.stall``), one that trickles
(``chunk_delay``). A read or total timeout ends the attempt as a logged
``assistant/attempt`` and is retried under the agent's retry policy; every message
names the limit and the server's base URL.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from e2e_support import FAST_RETRY, of_type, stream_types

import dshpy
from dshpy.agent import Agent
from dshpy.llm import ChatClient, ModelConfig, ModelConfigError, ModelTimeouts, RetryPolicy
from dshpy.testing.fake_model import FakeModelServer, Reply, SilentPort


def run_turn(base_url: str, timeouts: ModelTimeouts, retry: RetryPolicy = FAST_RETRY):
    session = dshpy.Session.new()

    async def scenario():
        config = ModelConfig.from_env(base_url=base_url, api_key="test-key", env={}, timeouts=timeouts)
        async with ChatClient(config) as client:
            return await Agent(session, client, retry=retry).run("hi")

    started = time.monotonic()
    result = asyncio.run(scenario())
    return session, result, time.monotonic() - started


def failures(session: dshpy.Session) -> list[dict]:
    return [a.data["stream"][-1]["chunk"]["reason"]["failure"] for a in of_type(session, "assistant/attempt")]


def test_a_server_that_never_sends_headers_hits_the_read_timeout_and_the_try_is_retried():
    with FakeModelServer([Reply.hang(), Reply.text("fine")]) as server:
        url = server.base_url
        session, result, elapsed = run_turn(url, ModelTimeouts(read=0.3))
        assert len(server.requests) == 2
    assert result.kind == "completed" and result.text == "fine"
    assert elapsed < 5
    [failure] = failures(session)
    assert failure["code"] == "TIMEOUT"
    assert failure["message"] == f"the model server at {url} sent nothing for longer than the read timeout (0.3 s)"
    [retry] = of_type(session, "llm/retry")
    assert retry.data["failure"] == failure and retry.data["retry"] == 1
    dshpy.validate(session.events)


def test_a_stream_that_stalls_mid_answer_hits_the_read_timeout_keeps_its_partial_stream_and_is_retried():
    stalled = Reply.text("Hello world, this will stall", pieces=5).stall(3)
    with FakeModelServer([stalled, Reply.text("done")]) as server:
        url = server.base_url
        session, result, elapsed = run_turn(url, ModelTimeouts(read=0.3))
    assert result.kind == "completed" and result.text == "done"
    assert elapsed < 5
    [attempt] = of_type(session, "assistant/attempt")
    assert stream_types(attempt.data["stream"]) == ["block-start", "text-chunks", "finish"]
    assert attempt.data["stream"][1]["texts"] == ["Hello ", "world,"]
    [failure] = failures(session)
    assert failure["code"] == "TIMEOUT" and "read timeout (0.3 s)" in failure["message"]
    assert url in failure["message"]
    assert of_type(session, "llm/retry")[0].data["failure"]["code"] == "TIMEOUT"


def test_the_total_timeout_bounds_a_trickling_stream_and_a_silent_server():
    trickle = Reply.text("slow " * 20, pieces=20, chunk_delay=0.1)  # ~2 s, never 0.3 s silent
    with FakeModelServer([trickle, Reply.hang(), Reply.text("quick")]) as server:
        url = server.base_url
        session, result, elapsed = run_turn(url, ModelTimeouts(read=5, total=0.6))
    assert result.kind == "completed" and result.text == "quick"
    assert elapsed < 4
    first, second = failures(session)
    expected = f"the model server at {url} did not finish its answer within the total timeout (0.6 s)"
    assert first == {"message": expected, "code": "TIMEOUT"}
    assert second == {"message": expected, "code": "TIMEOUT"}
    trickled = of_type(session, "assistant/attempt")[0].data["stream"]
    assert stream_types(trickled) == ["block-start", "text-chunks", "finish"]
    assert 1 <= len(trickled[1]["texts"]) < 20


def test_a_connect_that_never_completes_hits_the_connect_timeout():
    with SilentPort() as port:
        session, result, elapsed = run_turn(
            port.base_url, ModelTimeouts(connect=0.3), RetryPolicy(max_retries=1, base_delay=0.001)
        )
    assert elapsed < 3
    assert result.reason["kind"] == "error"
    assert result.error == {
        "message": f"could not connect to the model server at {port.base_url} within the connect timeout (0.3 s)",
        "code": "TIMEOUT",
    }
    assert len(of_type(session, "assistant/attempt")) == 2


def test_a_refused_connection_names_the_base_url():
    with FakeModelServer() as server:
        url = server.base_url
    # closed: the port refuses connections now
    session, result, _ = run_turn(url, ModelTimeouts(), RetryPolicy(max_retries=1, base_delay=0.001))
    assert result.error["code"] == "CONNECTION"
    assert result.error["message"].startswith(f"cannot reach the model server at {url}: ")
    assert all(url in failure["message"] for failure in failures(session))


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("api.deepseek.com", "must start with http:// or https://"),
        ("localhost:8080", "must start with http:// or https://"),
        ("127.0.0.1:8080/v1", "must start with http:// or https://"),
        ("ftp://example.com", "must start with http:// or https://"),
        ("http:/example.com", "must start with http:// or https://"),
        ("https://", "must start with http:// or https://"),
        ("http://:8080/v1", "names no host"),
        ("http://127.0.0.1:99999", "port must be a number from 1 to 65535"),
        ("http://127.0.0.1:80a", "port must be a number from 1 to 65535"),
        ("http://127.0.0.1:0", "port must be a number from 1 to 65535"),
        ("http://127.0.0.1:/v1", "port must be a number from 1 to 65535"),
        ("http://exa mple.com", "contains spaces or control characters"),
        (" https://api.deepseek.com", "contains spaces or control characters"),
        ("https://api.deepseek.com/#v1", "has no #fragment"),
    ],
)
def test_a_malformed_base_url_is_a_configuration_error(url, why):
    with pytest.raises(ModelConfigError) as caught:
        ModelConfig.from_env(base_url=url, api_key="k", env={})
    assert str(caught.value).startswith(f"malformed model base URL {url.rstrip('/')!r}: ")
    assert why in str(caught.value)


def test_a_malformed_base_url_from_the_environment_says_where_it_came_from():
    with pytest.raises(ModelConfigError, match=r"'localhost:8080'.*\(from DEEPSEEK_BASE_URL\)"):
        ModelConfig.from_env(env={"DEEPSEEK_BASE_URL": "localhost:8080", "DEEPSEEK_API_KEY": "k"})


@pytest.mark.parametrize("url", ["http://127.0.0.1:8000/v1", "https://api.deepseek.com", "HTTP://[::1]:9/x?a=b"])
def test_well_formed_base_urls_are_accepted(url):
    assert ModelConfig.from_env(base_url=url, api_key="k", env={}).base_url == url


@pytest.mark.parametrize(
    "values",
    [{"connect": 0}, {"read": -1}, {"total": 0}, {"read": float("nan")}, {"connect": float("inf")}, {"read": True}],
)
def test_timeouts_must_be_positive_seconds(values):
    with pytest.raises(ModelConfigError, match="timeout must be a positive number of seconds"):
        ModelTimeouts(**values)


def test_the_defaults_are_connect_10_read_120_and_no_total():
    assert ModelTimeouts() == ModelTimeouts(connect=10.0, read=120.0, total=None)
    assert ModelConfig.from_env(api_key="k", env={}).timeouts == ModelTimeouts()
