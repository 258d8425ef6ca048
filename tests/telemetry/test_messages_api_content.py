"""Captured request content (``gen_ai.input.messages``) from a Messages API request."""

from __future__ import annotations

from dshpy.telemetry.content import input_messages


def test_messages_api_blocks_become_convention_parts():
    sent = [
        {"role": "user", "content": [{"type": "text", "text": "read a.txt"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "need it", "signature": "sig"},
                {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "a.txt"}},
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "hi"}]}],
        },
    ]
    assert input_messages(sent) == [
        {"role": "user", "parts": [{"type": "text", "content": "read a.txt"}]},
        {
            "role": "assistant",
            "parts": [
                {"type": "reasoning", "content": "need it"},
                {"type": "tool_call", "id": "toolu_1", "name": "read", "arguments": {"path": "a.txt"}},
            ],
        },
        {"role": "user", "parts": [{"type": "tool_call_response", "id": "toolu_1", "response": "hi"}]},
    ]
