"""Sessions that show every part of a transcript, for the web UI's tests, screenshots and benchmark.

:func:`build_showcase` writes, in dsh's write order, a session with a system prompt, a
tool call and its (failed) result, a failed model attempt followed by ``llm/retry``, a
compaction checkpoint shadowing the first turn, and a fork made at the first turn's
end. :func:`build_long_session` appends many small turns (a 100k-event log in seconds).
"""

from __future__ import annotations

from dataclasses import dataclass

from dshpy.compaction.engine import compact
from dshpy.compaction.summarizer import SummaryRequest
from dshpy.log import records
from dshpy.log.session import Session
from dshpy.storage.contract import SessionStore
from dshpy.testing.builders import (
    TurnScript,
    assistant_data,
    attempt_data,
    system_data,
    tool_result_data,
    user_message,
)

__all__ = ["Showcase", "build_long_session", "build_showcase"]

SYSTEM_PROMPT = "You are a careful coding agent."
FIRST_PROMPT = "Read config.toml and tell me the port."
TOOL_ERROR = "ENOENT: config.toml does not exist"
ANSWER = "The port is **8080**, set in `settings.toml`:\n\n```toml\nport = 8080\n```"
SECOND_PROMPT = "Now summarise what you found."
SECOND_ANSWER = "Found the port in settings.toml; config.toml is missing."
SUMMARY = "The user asked for the port; it is 8080 (settings.toml)."
PARTIAL = "The po"


@dataclass(frozen=True, slots=True)
class Showcase:
    """Ids of the showcase session, its fork, and the seq the fork was made at."""

    session_id: str
    fork_id: str
    fork_boundary: int


def _tool_turn(session: Session) -> None:
    """Turn 1: system head, a tool call that fails, a failed attempt and a retry, then the answer."""
    turn = session.next_turn
    message = user_message(FIRST_PROMPT)
    session.append("turn/start", {"turn": turn})
    session.append("step/start", {"turn": turn, "step": 1})
    session.append("system/message", system_data(turn, 1, SYSTEM_PROMPT), surface_op="append")
    session.append("user/message", message, surface_op="append")
    header = records.request_header("deepseek", "deepseek-chat")
    session.append("request/header", records.request_header_data(header, "initial"))
    calls = [("call-read-1", "read_file", '{"path": "config.toml"}')]
    session.append(
        "assistant/message",
        assistant_data(turn, 1, "Let me read it.", tool_calls=calls, reasoning="The user wants the port."),
        surface_op="append",
    )
    call = session.append("tool/call", records.tool_call_data(turn, 1, *calls[0]))
    session.append(
        "tool/result",
        tool_result_data(turn, 1, "call-read-1", TOOL_ERROR, is_error=True),
        surface_op="append",
        source_event_seqs=[call.seq],
    )
    session.append("step/end", {"turn": turn, "step": 1})
    session.append("step/start", {"turn": turn, "step": 2})
    session.append("assistant/attempt", attempt_data(turn, 2, PARTIAL))
    failure = {"code": "HTTP_503", "message": "upstream overloaded"}
    retry = records.retry_data(
        "retry-1", turn, 2, provider="deepseek", policy_key="http-5xx", retry=1, max_retries=3, delay_ms=500,
        failure=failure,
    )  # fmt: skip
    session.append("llm/retry", retry)
    session.append("llm/retry-started", records.retry_started_data("retry-1", turn, 2, 1))
    usage = {"inputTokens": 420, "outputTokens": 64, "cacheReadTokens": 256, "reasoningTokens": 12}
    session.append("assistant/message", assistant_data(turn, 2, ANSWER, usage=usage), surface_op="append")
    session.append("step/end", {"turn": turn, "step": 2})
    session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})


def _second_turn(session: Session, prompt: str, answer: str) -> None:
    turn = session.next_turn
    session.append("turn/start", {"turn": turn})
    session.append("step/start", {"turn": turn, "step": 1})
    session.append("user/message", user_message(prompt), surface_op="append")
    session.append("assistant/message", assistant_data(turn, 1, answer), surface_op="append")
    session.append("step/end", {"turn": turn, "step": 1})
    session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})


def _summary(_request: SummaryRequest) -> str:
    return SUMMARY


def build_showcase(store: SessionStore, *, cwd: str = "/srv/app") -> Showcase:
    """Write the showcase session and its fork into ``store``; both are closed afterwards."""
    session = store.create(cwd=cwd)
    _tool_turn(session)
    boundary = session.events[-1].seq
    _second_turn(session, SECOND_PROMPT, SECOND_ANSWER)
    session.flush()
    compact(session, _summary)
    session.flush()
    session_id = session.id
    session.close()
    child = store.fork(session_id, boundary=boundary)
    _second_turn(child, "Try a different file instead.", "Looked at .env: PORT=9090.")
    child.flush()
    fork_id = child.id
    child.close()
    return Showcase(session_id, fork_id, boundary)


def build_long_session(store: SessionStore, *, events: int, cwd: str = "/srv/long") -> str:
    """A closed session of about ``events`` events (whole turns of one tool call each)."""
    session = store.create(cwd=cwd)
    script = TurnScript(session)
    while len(session.events) < events:
        script.turn(f"turn {session.next_turn}: list the files", steps=2)
        if len(session.events) % 2000 < 20:
            session.flush()
    session.flush()
    session_id = session.id
    session.close()
    return session_id
