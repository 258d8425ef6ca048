"""dsh's runtime records from the agent loop: runtime-context snapshot, fallback title, session-log delivery.

The agent runs against FakeModelServer's Messages dialect over real HTTP; the shapes
are checked against the real dsh runtime's own session (``tests/fixtures/dsh``).
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import pytest

import dshpy
from dshpy.agent import Agent
from dshpy.agent.fallback_title import fallback_title, fallback_title_data
from dshpy.agent.runtime_context import CLEARED, RuntimeContext, permission_sections
from dshpy.agent.session_log import SessionLogUpload
from dshpy.llm import AnthropicClient, ModelConfig
from dshpy.llm.client import ChatClient
from dshpy.llm.retry import RetryPolicy
from dshpy.log.records import user_message
from dshpy.testing.fake_model import FakeModelServer, Reply

DSH_TEXT_TURNS = (
    Path(__file__).parents[1]
    / "fixtures/dsh/sessions/plain/--tmp-dshpy-dsh-fixtures-workspace--/text-2-prompts/session.v4.jsonl"
)


def dsh_events() -> list[dict[str, Any]]:
    return [json.loads(line) for line in DSH_TEXT_TURNS.read_text().splitlines()[1:]]


def key_paths(value: Any, prefix: str = "") -> list[str]:
    """Every key path of a JSON value, in order (list items by position), to compare shapes and key order."""
    if isinstance(value, dict):
        return [p for key, item in value.items() for p in [f"{prefix}.{key}", *key_paths(item, f"{prefix}.{key}")]]
    if isinstance(value, list):
        return [p for index, item in enumerate(value) for p in key_paths(item, f"{prefix}[{index}]")]
    return []


def client_for(server: FakeModelServer, provider: str = "deepseek-official") -> Any:
    config = ModelConfig.from_env(base_url=server.base_url, api_key="k", provider=provider, env={})
    return AnthropicClient(config) if provider == "deepseek-official" else ChatClient(config)


class Sections:
    """A runtime-context provider whose directory and policies the test changes between turns."""

    def __init__(self, cwd: str, mode: str = "workspace-write", policy: str = "ask") -> None:
        self.cwd, self.mode, self.policy = cwd, mode, policy

    def __call__(self) -> list[dict[str, str]]:
        return permission_sections(self.cwd, self.mode, self.policy)


def run_turns(session: Any, server: FakeModelServer, prompts: list[str], **options: Any) -> None:
    async def go() -> None:
        client = client_for(server, options.pop("provider", "deepseek-official"))
        try:
            async with Agent(session, client, **options) as agent:
                for prompt in prompts:
                    result = await agent.run(prompt)
                    assert result.reason["kind"] == "completed", result.reason
        finally:
            await client.close()

    asyncio.run(go())


def types_of(session: Any) -> list[str]:
    out = []
    for event in session.events:
        kind = event.data.get("source", {}).get("kind") if event.type == "user/message" else None
        out.append(f"{event.type}:{kind}" if kind else event.type)
    return out


# -- the fallback title -------------------------------------------------------------


def test_fallback_title_is_dshs_first_five_words_within_forty_bytes():
    assert fallback_title("What is 2 + 2?") == "What is 2 + 2?"
    assert fallback_title("  Please\tfix\n\nthe failing tests in CI now  ") == "Please fix the failing tests"
    assert fallback_title("\x1b[31mRed\x1b[0m \x1b]0;title\x07alert\u202e here\x00") == "Red alert here"
    # at most 40 bytes of UTF-8, cut between code points, trailing space dropped
    long = "Supercalifragilisticexpialidocious antidisestablishment"
    assert fallback_title(long) == long[:40].rstrip() and len(fallback_title(long).encode()) <= 40
    japanese = "日本語のテキストはとても長いのでここで切れます"  # one word of 3-byte characters
    assert fallback_title(japanese) == japanese[:13]  # 39 bytes: a 14th character would not fit
    assert fallback_title(" \n\t ") == ""
    with pytest.raises(ValueError):
        fallback_title("x", max_words=0)


def test_fallback_title_data_cites_the_first_human_prompt_and_only_once():
    session = dshpy.open_store("memory:").create()
    assert fallback_title_data(session.events) is None  # nothing to name it by
    session.append("user/message", user_message("  ", None), surface_op="append")  # blank: not eligible
    context = {"kind": "runtime-context"}
    session.append("user/message", user_message("Context text", context), surface_op="append")
    session.append("user/message", user_message("Deploy the app to staging please"), surface_op="append")
    assert fallback_title_data(session.events) == {
        "title": "Deploy the app to staging",
        "messageSeqs": [2],
        "source": {"kind": "fallback"},
    }
    session.append("session/title", {"title": "Mine", "messageSeqs": [], "source": {"kind": "user"}})
    assert fallback_title_data(session.events) is None  # a session with a title keeps it


# -- the loop writes them in dsh's order and shapes ------------------------------------


def test_agent_writes_dshs_runtime_records_in_dshs_order_and_shapes(tmp_path):
    session = dshpy.open_store("memory:").create(cwd=str(tmp_path))
    with FakeModelServer([Reply.text("Four.", reasoning="Sum.", signature="sig-1"), Reply.text("Twelve.")]) as server:
        run_turns(
            session,
            server,
            ["What is 2 + 2?", "And 4 × 3?"],
            system_prompt="Be brief.",
            runtime_context=Sections(str(tmp_path)),
            fallback_title=True,
            upload_session_log=True,
        )
        requests = server.requests
    kinds = types_of(session)
    first_answer = kinds.index("assistant/message")
    assert kinds[: first_answer + 1] == [
        "agent/inbox/spliced",
        "turn/start",
        "agent/inbox/spliced",
        "step/start",
        "system/message",
        "user/message:user",
        "user/message:runtime-context",
        "request/header",
        "request/context",
        "session/title",
        "session-log-deepseek/delivery-accepted",
        "assistant/message",
    ]
    assert kinds[first_answer + 1 :] == [  # turn 2: the context is unchanged, the session has its title
        "step/end",
        "turn/end",
        "agent/inbox/spliced",
        "turn/start",
        "agent/inbox/spliced",
        "step/start",
        "user/message:user",
        "session-log-deepseek/delivery-accepted",
        "assistant/message",
        "step/end",
        "turn/end",
    ]
    events = session.events
    title = next(e for e in events if e.type == "session/title")
    assert dshpy.thaw(title.data) == {"title": "What is 2 + 2?", "messageSeqs": [5], "source": {"kind": "fallback"}}
    accepted = [dshpy.thaw(e.data) for e in events if e.type == "session-log-deepseek/delivery-accepted"]
    assert accepted == [
        {"sessionId": session.id, "sessionFormatVersion": 4, "throughSeq": 9},
        {"sessionId": session.id, "sessionFormatVersion": 4, "throughSeq": 18},
    ]
    # every new record has exactly the keys, in the order, that the real runtime wrote
    ours = {kind: dshpy.thaw(e.data) for e in events for kind in [types_of_event(e)]}
    theirs = {types_of_event_raw(e): e["data"] for e in dsh_events()}
    for kind in ("session/title", "session-log-deepseek/delivery-accepted", "user/message:runtime-context"):
        assert key_paths(ours[kind]) == key_paths(theirs[kind]), kind
    # the snapshot is what dsh writes for this policy, and the model sees it; the markers it does not see
    context = ours["user/message:runtime-context"]["content"][0]["text"]
    assert context.startswith("Current runtime context. This snapshot supersedes earlier runtime-context snapshots.")
    assert f'Current working directory: "{tmp_path}".' in context
    assert f'may modify files under the session workspace: "{tmp_path}"' in context
    assert "Approval policy: ask." in context
    assert [m.role for m in session.derive_messages()] == ["system", "user", "user", "assistant", "user", "assistant"]
    # the requests carried the log, each from the last accepted event on, contiguous
    uploads = [body["dsh_session_log"] for body in requests]
    assert [(u["afterSeq"], u["throughSeq"]) for u in uploads] == [(-1, 9), (9, 18)]
    assert [e["seq"] for e in uploads[0]["events"]] == list(range(10))
    assert [e["seq"] for e in uploads[1]["events"]] == list(range(10, 19))
    assert uploads[0]["session"]["id"] == session.id and uploads[0]["session"]["cwd"] == str(tmp_path)
    assert list(uploads[0]["events"][5]) == ["seq", "time", "data", "type", "surfaceOp"]  # dsh's wire order
    assert uploads[0]["events"][5]["data"] == dshpy.thaw(events[5].data)


def types_of_event(event: Any) -> str:
    kind = event.data.get("source", {}).get("kind") if event.type == "user/message" else None
    return f"{event.type}:{kind}" if kind else event.type


def types_of_event_raw(event: dict[str, Any]) -> str:
    kind = event["data"].get("source", {}).get("kind") if event["type"] == "user/message" else None
    return f"{event['type']}:{kind}" if kind else event["type"]


def test_runtime_context_is_written_again_only_when_it_changes(tmp_path):
    store = dshpy.open_store("memory:")
    session = store.create(cwd=str(tmp_path))
    sections = Sections(str(tmp_path))
    with FakeModelServer(default=Reply.text("ok")) as server:
        run_turns(session, server, ["one", "two"], runtime_context=sections)
        sections.cwd, sections.mode, sections.policy = "/srv/other", "danger-full-access", "never"
        run_turns(session, server, ["three"], runtime_context=sections)  # a new agent: restored, then changed
        run_turns(session, server, ["four"], runtime_context=sections)  # resumed unchanged: nothing
    snapshots = [e for e in session.events if types_of_event(e) == "user/message:runtime-context"]
    assert len(snapshots) == 2
    later = snapshots[1].data
    assert [s["name"] for s in later["source"]["sections"]] == [
        "working-directory:current",
        "sandbox:policy",
        "approval:policy",
    ]
    assert 'Current working directory: "/srv/other".' in later["content"][0]["text"]
    assert "Approval prompts are disabled in this session" in later["content"][0]["text"]


def test_runtime_context_returns_after_a_replacement_shadows_it_and_clears_when_empty(tmp_path):
    session = dshpy.open_store("memory:").create(cwd=str(tmp_path))
    tracker = RuntimeContext(session)
    assert tracker.message([]) is None  # nothing shown, nothing to show
    sections = permission_sections(str(tmp_path), "read-only", "ask")
    first = tracker.message(sections)
    assert first is not None and first["source"]["form"] == "snapshot"
    seq = session.append("user/message", first, surface_op="append").seq
    assert tracker.message(sections) is None
    assert RuntimeContext(session).message(sections) is None  # restored from the surface
    summary = user_message("Earlier work, summarized.")
    session.append("user/message", summary, surface_op=dshpy.SurfaceReplace(seq, seq), source_event_seqs=[seq])
    again = tracker.message(sections)  # the model no longer sees it: shown again
    assert again is not None and again["content"] == first["content"]
    assert RuntimeContext(session).message(sections) is not None
    session.append("user/message", again, surface_op="append")
    cleared = tracker.message([{"name": "sandbox:policy", "text": ""}])
    assert cleared is not None and cleared["content"][0]["text"] == CLEARED and cleared["source"] == {
        "kind": "runtime-context"
    }


# -- the session-log upload ----------------------------------------------------------


def test_a_refused_request_is_not_accepted_and_its_events_go_again(tmp_path):
    session = dshpy.open_store("memory:").create(cwd=str(tmp_path))
    script = [Reply.server_error(), Reply.text("partial answer").fail(after=2), Reply.text("Done.")]
    with FakeModelServer(script) as server:
        run_turns(session, server, ["go"], upload_session_log=True, retry=RetryPolicy(base_delay=0.01, jitter=0))
        uploads = [body["dsh_session_log"] for body in server.requests]
    # the 500 was never accepted, so the next request sends the same events again (and the failed try's);
    # the broken stream did get a 200: accepted, then its attempt settles; the last request starts after it
    assert [(u["afterSeq"], u["throughSeq"]) for u in uploads] == [(-1, 7), (-1, 10), (10, 14)]
    assert [e.type for e in session.events][6:] == [
        "request/header",
        "request/context",
        "assistant/attempt",
        "llm/retry",
        "llm/retry-started",
        "session-log-deepseek/delivery-accepted",
        "assistant/attempt",
        "llm/retry",
        "llm/retry-started",
        "session-log-deepseek/delivery-accepted",
        "assistant/message",
        "step/end",
        "turn/end",
    ]
    accepted = [e.data["throughSeq"] for e in session.events if e.type == "session-log-deepseek/delivery-accepted"]
    assert accepted == [10, 14]


def test_the_chat_completions_client_gets_no_session_log(tmp_path):
    session = dshpy.open_store("memory:").create(cwd=str(tmp_path))
    with FakeModelServer([Reply.text("ok")]) as server:
        run_turns(session, server, ["hi"], upload_session_log=True, provider="deepseek")
        assert "dsh_session_log" not in server.requests[0]
    assert "session-log-deepseek/delivery-accepted" not in [e.type for e in session.events]


def test_the_watermark_is_this_sessions_and_the_field_keeps_under_its_cap(caplog):
    store = dshpy.open_store("memory:")
    session = store.create()
    for n in range(4):
        session.append("user/message", user_message(f"message {n} " + "x" * 200), surface_op="append")
    upload = SessionLogUpload(session, max_bytes=1200)
    prepared = upload.prepare()
    assert prepared is not None
    value, accept = prepared
    assert (value["afterSeq"], value["throughSeq"]) == (-1, len(value["events"]) - 1)
    assert len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()) <= 1200
    assert 0 < len(value["events"]) < 4  # the whole log would not fit: the rest waits for the next request
    accept()
    assert upload.watermark() == value["throughSeq"]
    rest = upload.prepare()
    assert rest is not None and rest[0]["afterSeq"] == value["throughSeq"]
    # a fork inherits the parent's marker, which vouches for the parent only: the child uploads from the start
    session.flush()
    child = store.fork(session.id)
    assert SessionLogUpload(child).watermark() == -1 and SessionLogUpload(session).watermark() == value["throughSeq"]
    # an event too large for the cap blocks the upload there (once logged), never the request
    session.append("user/message", user_message("y" * 5000), surface_op="append")
    blocked = SessionLogUpload(session, max_bytes=1200)
    blocked._through, blocked._scanned = len(session.events) - 2, len(session.events)
    with caplog.at_level(logging.WARNING, "dshpy.agent.session_log"):
        assert blocked.prepare() is None and blocked.prepare() is None
    assert len([r for r in caplog.records if "above the 1200-byte cap" in r.getMessage()]) == 1
