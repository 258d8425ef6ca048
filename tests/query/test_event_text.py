"""The text each event contributes to search follows dsh's extraction rules, and nothing else is text."""

from __future__ import annotations

import pytest

from dshpy.core.events import event_from_parts
from dshpy.log.event_text import MAX_INDEXED_CHARS, event_text, indexable_text, text_of
from dshpy.testing.builders import assistant_data, attempt_data, user_message


def test_user_messages_give_their_text_blocks_only() -> None:
    data = user_message("  look at this  ")
    data["content"] = [*data["content"], {"type": "image", "attachment": {"name": "shot.png"}}, {"type": "text"}]
    assert text_of("user/message", data) == "look at this"


def test_assistant_messages_give_text_and_tool_calls_but_no_reasoning() -> None:
    data = assistant_data(1, 1, "Let me look.", tool_calls=[("c1", "read_file", '{"path":"a.py"}')], reasoning="hmm")
    assert text_of("assistant/message", data) == 'Let me look.\nread_file\n{"path":"a.py"}'


def test_tool_calls_give_name_and_raw_arguments() -> None:
    data = {"turn": 1, "step": 1, "callId": "c1", "name": "bash", "arguments": '{"cmd": "ls -la"}'}
    assert text_of("tool/call", data) == 'bash\n{"cmd": "ls -la"}'


def test_tool_results_give_their_text_and_error_name_and_code() -> None:
    v4 = {
        "message": {"role": "tool", "content": [{"type": "text", "text": "permission denied"}]},
        "error": {"name": "ToolError", "code": "EACCES", "reason": "not indexed"},
    }
    assert text_of("tool/result", v4) == "permission denied\nToolError\nEACCES"
    v0 = {"message": {"content": [{"type": "tool-result", "content": [{"type": "text", "text": "wrapped output"}]}]}}
    assert text_of("tool/result", v0) == "wrapped output"


def test_todos_give_status_and_content() -> None:
    data = {"todos": [{"content": "write tests", "status": "pending"}, {"content": "ship", "status": "completed"}]}
    assert text_of("todo/write", data) == "pending\nwrite tests\ncompleted\nship"


@pytest.mark.parametrize(
    ("reason", "text"),
    [
        ({"kind": "completed"}, ""),
        ({"kind": "error", "error": {"message": "rate limited", "code": "QUOTA"}}, "error\nrate limited"),
        ({"kind": "aborted", "reason": {"kind": "user"}}, "aborted"),
        ({"kind": "max-tokens"}, "max-tokens"),
        ({"kind": "interrupted"}, "interrupted"),
        ({"kind": "forked"}, ""),
        ({"kind": "blocked"}, ""),
    ],
)
def test_turn_ends_give_words_for_what_went_wrong(reason: dict[str, object], text: str) -> None:
    assert text_of("turn/end", {"turn": 1, "reason": reason}) == text


@pytest.mark.parametrize(
    ("event_type", "data"),
    [
        ("assistant/attempt", attempt_data(1, 1, "never shown to the model")),
        ("turn/start", {"turn": 1}),
        ("step/start", {"turn": 1, "step": 1}),
        ("request/header", {"header": {"config": {"provider": "p", "model": "m"}, "system": "be kind"}, "reason": "x"}),
        ("request/context", {"provider": "deepseek", "model": "deepseek-chat"}),
        ("system/message", {"turn": 1, "step": 1, "message": {"content": [{"type": "text", "text": "sys"}]}}),
        ("session/title", {"title": "a title", "messageSeqs": [], "source": {"kind": "user"}}),
        ("agent/inbox/spliced", {"target": "next-turn", "start": 0, "inserted": [user_message("queued")]}),
        ("plugin:dshpy/session-state", {"state": "paused", "reason": "lunch"}),
        ("some/future-type", {"text": "unknown"}),
    ],
)
def test_everything_else_holds_no_text(event_type: str, data: object) -> None:
    assert text_of(event_type, data) == ""


@pytest.mark.parametrize(
    "data",
    [None, [], "text", {"content": "not a list"}, {"content": [None, 3, {"type": "text", "text": 7}]}],
)
def test_damaged_shapes_give_nothing_rather_than_failing(data: object) -> None:
    assert text_of("user/message", data) == ""
    assert text_of("tool/result", data) == ""
    assert text_of("todo/write", data) == ""


def test_event_text_reads_a_stored_event() -> None:
    event = event_from_parts("user/message", 3, 1000, user_message("from the log"), surface_op="append")
    assert event_text(event) == "from the log"


def test_indexable_text_is_storable_and_bounded() -> None:
    assert indexable_text("a\x00b") == "a b"
    assert indexable_text("lone \udcff surrogate") == "lone \ufffd surrogate"
    assert len(indexable_text("x" * (MAX_INDEXED_CHARS + 10))) == MAX_INDEXED_CHARS
