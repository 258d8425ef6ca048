"""Failure classification, Retry-After parsing and the retry policy."""

from __future__ import annotations

import random

import pytest

from dshpy.llm.failures import LlmError, classify_exception, classify_status, parse_retry_after
from dshpy.llm.retry import RetryPolicy


@pytest.mark.parametrize(
    ("status", "body", "code", "retryable"),
    [
        (429, {"error": {"message": "slow down"}}, "RATE_LIMITED", True),
        (500, {"error": {"message": "boom"}}, "SERVER", True),
        (503, "overloaded", "SERVER", True),
        (401, {"error": {"message": "Authentication Fails"}}, "INVALID_CREDENTIAL", False),
        (403, {}, "INVALID_CREDENTIAL", False),
        (402, {"error": {"message": "Insufficient Balance"}}, "QUOTA", False),
        (400, {"error": {"message": "x", "code": "context_length_exceeded"}}, "CONTEXT_WINDOW_EXCEEDED", False),
        (
            400,
            {"error": {"message": "This model's maximum context length is 131072 tokens."}},
            "CONTEXT_WINDOW_EXCEEDED",
            False,
        ),
        (400, {"error": {"message": "bad tool schema"}}, "INVALID_REQUEST", False),
    ],
)
def test_status_classification(status, body, code, retryable):
    error = classify_status(status, body)
    assert error.code == code
    assert error.retryable is retryable
    assert error.failure["status"] == status


def test_invalid_credential_names_the_variable():
    assert "DEEPSEEK_API_KEY" in classify_status(401, {}).failure["message"]


def test_retry_after_forms():
    assert parse_retry_after({"Retry-After": "2"}) == 2000
    assert parse_retry_after({"retry-after": "0.5"}) == 500
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 250
    assert parse_retry_after({"Retry-After": "Wed, 21 Oct 2015 07:28:10 GMT"}, now=1445412480.0) == 10_000
    assert parse_retry_after({"Retry-After": "soon"}) is None
    assert parse_retry_after({}) is None


def test_rate_limit_keeps_the_servers_delay():
    error = classify_status(429, {}, {"Retry-After": "3"})
    assert error.retry_after_ms == 3000
    assert RetryPolicy().delay_ms(error, 1) == 3000


def test_backoff_grows_and_is_capped():
    policy = RetryPolicy(base_delay=1.0, max_delay=4.0, jitter=0.0)
    error = LlmError({"message": "x", "code": "SERVER"})
    assert [policy.delay_ms(error, n) for n in (1, 2, 3, 4)] == [1000, 2000, 4000, 4000]
    jittered = RetryPolicy(base_delay=1.0, jitter=0.5).delay_ms(error, 1, random.Random(1))
    assert 500 <= jittered <= 1500


def test_should_retry_only_transient_failures_within_budget():
    policy = RetryPolicy(max_retries=2, max_retry_after=10)
    server = LlmError({"message": "x", "code": "SERVER"})
    assert policy.should_retry(server, 1)
    assert policy.should_retry(server, 2)
    assert not policy.should_retry(server, 3)
    assert not policy.should_retry(LlmError({"message": "x", "code": "CONTEXT_WINDOW_EXCEEDED"}), 1)
    far = LlmError({"message": "x", "code": "RATE_LIMITED", "providerRetryAfterMs": 60_000})
    assert not policy.should_retry(far, 1)


def test_exceptions_during_the_stream_are_interruptions():
    assert classify_exception(ConnectionResetError("reset"), streaming=True).code == "STREAM_INTERRUPTED"
    assert classify_exception(ConnectionRefusedError("refused"), streaming=False).code == "CONNECTION"
    assert classify_exception(TimeoutError(), streaming=True).code == "TIMEOUT"
    assert classify_exception(ValueError("odd"), streaming=False).code == "UNKNOWN"


def test_connection_and_timeout_failures_name_the_server_and_the_limit():
    url = "http://127.0.0.1:9"
    refused = classify_exception(ConnectionRefusedError("refused"), streaming=False, base_url=url)
    assert refused.failure == {"message": f"cannot reach the model server at {url}: refused", "code": "CONNECTION"}
    broken = classify_exception(ConnectionResetError("reset"), streaming=True, base_url=url)
    assert broken.failure["message"] == f"the stream from the model server at {url} broke off before it finished: reset"
    assert classify_exception(TimeoutError(), streaming=True, base_url=url).failure == {
        "message": f"the model server at {url} did not answer in time",
        "code": "TIMEOUT",
    }


def test_a_host_that_does_not_resolve_fails_fast_naming_the_url() -> None:
    import socket

    import httpx2 as httpx
    import openai

    request = httpx.Request("POST", "https://api.deepseek.example/v1/chat/completions")
    error = openai.APIConnectionError(request=request)
    error.__cause__ = httpx.ConnectError("[Errno -2] Name or service not known")
    error.__cause__.__context__ = socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    failure = classify_exception(error, streaming=False, base_url="https://api.deepseek.example/v1")
    assert failure.code == "UNKNOWN_HOST" and not failure.retryable
    assert "https://api.deepseek.example/v1" in str(failure) and "check the base URL" in str(failure)
    error.__cause__.__context__ = socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
    assert classify_exception(error, streaming=False, base_url="https://x.example").code == "CONNECTION"
