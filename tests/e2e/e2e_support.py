"""Helpers for the end-to-end agent tests (imported by name: tests/ has no packages)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import dshpy
from dshpy.agent import Agent, tool
from dshpy.llm import ChatClient, ModelConfig, RetryPolicy, to_chat_messages
from dshpy.testing.fake_model import FakeModelServer

FAST_RETRY = RetryPolicy(base_delay=0.001, jitter=0.0)

DSH_ONLY = {
    "permission/preset",
    "sandbox/mode",
    "approval/policy",
    "session/title",
    "session-log-deepseek/delivery-accepted",
}
"""Events the real dsh runtime writes from plugins dshpy's agent does not have."""


def client_for(server: FakeModelServer, **options: Any) -> ChatClient:
    return ChatClient(ModelConfig.from_env(base_url=server.base_url, api_key="test-key", env={}), **options)


def make_agent(session: dshpy.Session, server: FakeModelServer, **options: Any) -> Agent:
    options.setdefault("retry", FAST_RETRY)
    return Agent(session, client_for(server), **options)


def types(session: dshpy.Session, start: int = 0) -> list[str]:
    return [event.type for event in session.events[start:]]


def of_type(session: dshpy.Session, kind: str) -> list[dshpy.SessionEvent]:
    return [event for event in session.events if event.type == kind]


def chat_view(session: dshpy.Session, upto: int | None = None) -> list[dict[str, Any]]:
    """What the agent sends for the session's surface (optionally only messages before seq ``upto``)."""
    messages = [m for m in session.derive_messages() if upto is None or m.seq < upto]
    return to_chat_messages(messages)


def stream_types(records: Sequence[Any]) -> list[str]:
    return [r["chunk"]["type"] if r["type"] == "chunk" else r["type"] for r in records]


@tool
def read_file(path: str) -> str:
    """Read a file from the workspace.

    Args:
        path: Path of the file.
    """
    return f"contents of {path}: hi"
