"""Sessions shaped like an agent's (system prompt, prompts, tool calls and results, usage) and scripted summarizers."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dshpy import Session
from dshpy.compaction import SummaryOutput, SummaryRequest
from dshpy.log import records
from dshpy.testing.builders import text_stream

TOOLS = [
    {"name": "read_file", "description": "Read a file.", "parameters": {"type": "object", "properties": {}}},
    {"name": "bash", "description": "Run a command.", "parameters": {"type": "object", "properties": {}}},
]

SUMMARY = "## Primary Request and Intent\n- read the files\n\n## Next Step\n- (none)"


def new_session(session_id: str = "compaction-test") -> Session:
    clock = itertools.count(1_700_000_000_000, 5)
    return Session.new(session_id=session_id, clock=lambda: next(clock))


class Agent:
    """Writes turns in dsh's order: prompt, header and context, answers, tool calls and results."""

    def __init__(self, session: Session, *, window: int | None = 128_000, max_tokens: int | None = None) -> None:
        self.session = session
        self.window = window
        self.max_tokens = max_tokens
        self.ids = itertools.count(1)
        self.header_logged = False

    def new_id(self, prefix: str) -> str:
        return f"{prefix}-{next(self.ids)}"

    def open_turn(self, prompt: str, *, system: str | None = None) -> int:
        s = self.session
        turn = s.next_turn
        s.append("turn/start", {"turn": turn})
        s.append("step/start", {"turn": turn, "step": 1})
        if system is not None:
            data = records.system_data(turn, 1, system, message_id=self.new_id("system"))
            s.append("system/message", data, surface_op="append")
        s.append("user/message", records.user_message(prompt, message_id=self.new_id("user")), surface_op="append")
        if not self.header_logged:
            header = records.request_header("deepseek", "deepseek-chat", max_tokens=self.max_tokens, tools=TOOLS)
            s.append("request/header", records.request_header_data(header, "initial"))
            s.append("request/context", records.request_context_data("deepseek", "deepseek-chat", self.window))
            self.header_logged = True
        return turn

    def answer(
        self, turn: int, step: int, text: str, *, calls: int = 0, usage: dict[str, int] | None = None
    ) -> list[str]:
        """An assistant message with ``calls`` tool calls (returned ids), then ``tool/call`` for each."""
        ids = [self.new_id("call") for _ in range(calls)]
        content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        content += [
            {"type": "tool-call", "id": cid, "name": "read_file", "arguments": '{"path":"a.txt"}'} for cid in ids
        ]
        data = records.assistant_data(
            turn,
            step,
            content,
            provider="deepseek",
            model="deepseek-chat",
            stream=text_stream(text or "x"),
            usage=usage,
            message_id=self.new_id("assistant"),
        )
        self.session.append("assistant/message", data, surface_op="append")
        return ids

    def call_and_result(self, turn: int, step: int, call_id: str, result: str) -> int:
        s = self.session
        call = s.append("tool/call", records.tool_call_data(turn, step, call_id, "read_file", '{"path":"a.txt"}'))
        data = records.tool_result_data(
            turn, step, call_id, [{"type": "text", "text": result}], is_error=False, message_id=self.new_id("tool")
        )
        return s.append("tool/result", data, surface_op="append", source_event_seqs=[call.seq]).seq

    def tool_turn(
        self,
        prompt: str,
        *,
        result: str = "file contents " * 20,
        system: str | None = None,
        close: bool = True,
        usage: dict[str, int] | None = None,
    ) -> int:
        """One turn: step 1 calls a tool and gets its result, step 2 answers; returns the turn number."""
        s = self.session
        turn = self.open_turn(prompt, system=system)
        [call_id] = self.answer(turn, 1, "Let me look.", calls=1, usage=usage)
        self.call_and_result(turn, 1, call_id, result)
        s.append("step/end", {"turn": turn, "step": 1})
        s.append("step/start", {"turn": turn, "step": 2})
        self.answer(turn, 2, f"Done with: {prompt}", usage=usage)
        s.append("step/end", {"turn": turn, "step": 2})
        if close:
            s.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
        return turn


def agent_session(turns: int = 4, *, system: str | None = "You are a careful coding agent.", **options: Any) -> Session:
    session = new_session()
    agent = Agent(session, **options)
    for index in range(turns):
        agent.tool_turn(f"task {index}: " + "please read the file " * 5, system=system if index == 0 else None)
    return session


@dataclass
class ScriptedSummarizer:
    """Answers every request with ``answer`` (text, a SummaryOutput, or a callable of the request)."""

    answer: str | SummaryOutput | Callable[[SummaryRequest], Any] = SUMMARY
    requests: list[SummaryRequest] = field(default_factory=list)

    def __call__(self, request: SummaryRequest) -> SummaryOutput | str:
        self.requests.append(request)
        if callable(self.answer):
            result: SummaryOutput | str = self.answer(request)
            return result
        return self.answer


def model_summary(text: str = SUMMARY, **options: Any) -> SummaryOutput:
    """An answer as the agent's model summarizer would give it (with reasoning and usage)."""
    content = [{"type": "reasoning", "text": "Let me condense."}, {"type": "text", "text": text}]
    options.setdefault("usage", {"inputTokens": 900, "outputTokens": 60, "cacheReadTokens": 100})
    return SummaryOutput.of(content, provider="deepseek", model="deepseek-chat", **options)
