"""FakeModelServer speaks the chat-completions SSE protocol over real HTTP (checked with a raw client)."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time

import pytest

from dshpy.testing.fake_model import FakeModelServer, Reply, ToolCall, Usage, prompt_tokens


def post(server: FakeModelServer, body: dict | None = None, timeout: float = 5.0):
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=timeout)
    connection.request(
        "POST",
        "/v1/chat/completions",
        json.dumps(body or {"model": "m", "messages": []}),
        {"Content-Type": "application/json"},
    )
    return connection, connection.getresponse()


def events(raw: bytes) -> list[str]:
    return [line.removeprefix(b"data: ").decode() for line in raw.split(b"\n\n") if line.startswith(b"data: ")]


def test_text_stream_with_reasoning_usage_and_done():
    with FakeModelServer(
        [Reply.text("Hello", reasoning="hm", pieces=2, usage=Usage(100, 7, cache_hit_tokens=60))]
    ) as s:
        connection, response = post(s, {"model": "deepseek-chat", "messages": [{"role": "user", "content": "hi"}]})
        assert response.status == 200
        assert response.getheader("Content-Type") == "text/event-stream"
        data = events(response.read())
        connection.close()
    assert data[-1] == "[DONE]"
    chunks = [json.loads(d) for d in data[:-1]]
    assert all(c["object"] == "chat.completion.chunk" and c["model"] == "deepseek-chat" for c in chunks)
    deltas = [c["choices"][0]["delta"] for c in chunks]
    assert [d.get("reasoning_content") for d in deltas[1:3]] == ["h", "m"]
    assert "".join(d.get("content") or "" for d in deltas) == "Hello"
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["usage"]["prompt_cache_hit_tokens"] == 60
    assert chunks[-1]["usage"]["prompt_cache_miss_tokens"] == 40
    assert s.requests == [{"model": "deepseek-chat", "messages": [{"role": "user", "content": "hi"}]}]


def test_tool_call_deltas():
    with FakeModelServer([Reply.tool_calls(ToolCall("read", '{"p": 1}', id="c7", pieces=2))]) as s:
        connection, response = post(s)
        chunks = [json.loads(d) for d in events(response.read())[:-1]]
        connection.close()
    calls = [c["choices"][0]["delta"]["tool_calls"][0] for c in chunks if c["choices"][0]["delta"].get("tool_calls")]
    assert calls[0] == {"index": 0, "id": "c7", "type": "function", "function": {"name": "read", "arguments": ""}}
    assert "".join(c["function"]["arguments"] for c in calls) == '{"p": 1}'
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_errors_have_status_body_and_retry_after():
    with FakeModelServer([Reply.rate_limited(3), Reply.unauthorized(), Reply.context_window_exceeded("openai")]) as s:
        for status in (429, 401, 400):
            connection, response = post(s)
            body = json.loads(response.read())
            assert response.status == status
            assert body["error"]["message"]
            if status == 429:
                assert response.getheader("Retry-After") == "3"
            connection.close()
        assert body["error"]["code"] == "context_length_exceeded"


def test_cut_stream_ends_without_done_and_incomplete():
    with FakeModelServer([Reply.text("abcdef", pieces=6).cut(3)]) as s:
        connection, response = post(s)
        with pytest.raises(http.client.IncompleteRead):
            response.read()
        connection.close()


def test_hang_never_answers_until_close_and_requests_are_recorded():
    server = FakeModelServer([Reply.hang()]).start()
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    body = b'{"model": "m", "messages": []}'
    sock.sendall(b"POST /chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    assert server.wait_for_requests(1)[0]["model"] == "m"
    sock.settimeout(0.2)
    with pytest.raises(TimeoutError):
        sock.recv(1)
    closer = threading.Thread(target=server.close)
    started = time.monotonic()
    closer.start()
    closer.join(5)
    assert time.monotonic() - started < 3
    sock.close()


def test_script_exhaustion_and_default():
    with FakeModelServer(default=Reply.text("again")) as s:
        for _ in range(2):
            connection, response = post(s)
            assert events(response.read())[-1] == "[DONE]"
            connection.close()
        assert len(s.requests) == 2
    with FakeModelServer() as s:
        connection, response = post(s)
        assert response.status == 500
        response.read()
        connection.close()


def test_a_context_window_refuses_long_prompts_without_using_up_the_script():
    small = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    large = {"model": "m", "messages": [{"role": "user", "content": "x" * 4000}]}
    assert prompt_tokens(small) == 4 + 1 and prompt_tokens(large) == 4 + 1000
    with FakeModelServer(
        [Reply.text("ok", usage=Usage(prompt_tokens=1, completion_tokens=3))], context_window=500
    ) as s:
        connection, response = post(s, large)
        body = json.loads(response.read())
        connection.close()
        assert response.status == 400
        assert "maximum context length is 500 tokens" in body["error"]["message"]
        assert "you requested 1004 tokens" in body["error"]["message"]
        assert s.remaining == 1 and s.refused == 1
        connection, response = post(s, small)
        chunks = [json.loads(d) for d in events(response.read())[:-1]]
        connection.close()
        usage = chunks[-1]["usage"]
        assert (usage["prompt_tokens"], usage["completion_tokens"], usage["total_tokens"]) == (5, 3, 8)
        assert usage["prompt_cache_miss_tokens"] == 5
        assert s.prompt_sizes == [1004, 5]


def test_prompt_tokens_count_reasoning_tool_calls_and_tool_schemas():
    tools = [{"type": "function", "function": {"name": "read", "parameters": {}}}]
    request = {
        "messages": [
            {
                "role": "assistant",
                "content": None,
                "reasoning_content": "abcd",
                "tool_calls": [{"id": "c", "type": "function", "function": {"name": "read", "arguments": '{"a":1}'}}],
            },
            {"role": "tool", "tool_call_id": "c", "content": "12345678"},
        ],
        "tools": tools,
    }
    expected = (4 + 4) + (4 + 2) + -(-len(json.dumps(tools)) // 4)  # 4+4+7 chars -> 4 tokens; 8 chars -> 2
    assert prompt_tokens(request) == expected


def test_response_model_names_every_chunk_whatever_was_asked():
    with FakeModelServer([Reply.text("Hi")], response_model="deepseek-chat-2026-03-01") as s:
        connection, response = post(s, {"model": "deepseek-chat", "messages": []})
        chunks = [json.loads(d) for d in events(response.read())[:-1]]
        connection.close()
    assert chunks and all(c["model"] == "deepseek-chat-2026-03-01" for c in chunks)


def test_a_delayed_reply_sends_its_headers_at_once_and_its_first_chunk_later():
    with FakeModelServer([Reply.text("Hi").delayed(0.3)]) as s:
        started = time.monotonic()
        connection, response = post(s)
        headers_at = time.monotonic() - started
        raw = response.read()
        done_at = time.monotonic() - started
        connection.close()
    assert response.status == 200 and events(raw)[-1] == "[DONE]"
    assert headers_at < 0.3 <= done_at  # headers held back for the delay would arrive after 0.3 s
