"""Derived messages → chat-completions messages (what the model is sent)."""

from __future__ import annotations

from dshpy.llm.messages import to_chat_messages
from dshpy.log.messages import Message


def message(seq, role, content, **extra):
    source = extra.pop("source", {"kind": "user"} if role == "user" else {"kind": role})
    return Message(seq, {"id": f"m{seq}", "role": role, "content": content, "source": source, **extra})


def text(value):
    return {"type": "text", "text": value}


HISTORY = [
    message(0, "system", [text("Be brief.")]),
    message(1, "user", [text("first")]),
    message(2, "assistant", [{"type": "reasoning", "text": "old thought"}, text("answer 1")]),
    message(3, "user", [text("second")]),
    message(
        4,
        "assistant",
        [
            {"type": "reasoning", "text": "new thought"},
            {"type": "tool-call", "id": "c1", "name": "ls", "arguments": "{}"},
        ],
    ),
    message(5, "tool", [text("a.txt")], toolCallId="c1"),
    message(6, "user", [text("[memory] x")], source={"kind": "plugin:memory"}),
]


def test_roles_tool_calls_and_results():
    out = to_chat_messages(HISTORY)
    assert out[0] == {"role": "system", "content": "Be brief."}
    assert out[4] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}],
        "reasoning_content": "new thought",
    }
    assert out[5] == {"role": "tool", "tool_call_id": "c1", "content": "a.txt"}
    assert out[6] == {"role": "user", "content": "[memory] x"}


def test_reasoning_is_sent_only_for_the_latest_turn():
    out = to_chat_messages(HISTORY)
    assert out[2] == {"role": "assistant", "content": "answer 1"}  # before the last human prompt: dropped
    assert "reasoning_content" in out[4]
    assert all("reasoning_content" not in m for m in to_chat_messages(HISTORY, reasoning="none"))
    assert to_chat_messages(HISTORY, reasoning="all")[2]["reasoning_content"] == "old thought"


def test_blocks_a_text_endpoint_cannot_take_become_placeholders():
    out = to_chat_messages(
        [
            message(0, "user", [text("look"), {"type": "image", "attachment": {"name": "cat.png"}}]),
            message(1, "developer", [{"type": "tool-addition", "toolName": "grep"}]),
        ]
    )
    assert out == [
        {"role": "user", "content": "look\n\n[image omitted: cat.png]"},
        {"role": "system", "content": "[tool added: grep]"},
    ]
