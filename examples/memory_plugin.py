"""Cross-session memory: the plugin from the dsh-05 seed ("Session 与记忆"), working.

The seed's point: a session's history is *derived* from its log, so any session can
be re-read at any time — no separate history store is needed. This plugin uses that
to carry memory across sessions. When the model is about to end a turn
(``turn-stopping``), it reads the previous session of the store, derives its
messages, summarises the last ten, and injects the summary into the current
session's next step, so the model answers once more, now knowing what happened
before.

Differences from the seed's pseudo-code, on purpose:

* it injects once per session (checked in the log itself, so also after a restart),
  not at every turn end — otherwise every turn would end in a memory step;
* the injected message has its own source kind (``plugin:cross-session-memory``),
  so it is never mistaken for the human's words (titles, reasoning replay);
* the previous session is read with ``store.inspect`` — a read-only view that never
  writes, even if that session's last turn was interrupted.

Run it: ``python examples/memory_plugin.py``. With ``DEEPSEEK_API_KEY`` set it talks
to the real model; without, to a scripted local fake, so the demo runs offline.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable, Sequence

import dshpy
from dshpy.agent import Agent, TurnStopping
from dshpy.llm import ChatClient, ModelConfig

MEMORY_SOURCE = {"kind": "plugin:cross-session-memory"}
"""Source of the injected memory message: a producer-named kind, as format v4 wants."""


def previous_session_id(store: dshpy.SessionStore, current_id: str) -> str | None:
    """The most recently active other session with at least one event (the seed's ``getPreviousSessionId``)."""
    for info in store.list():  # newest activity first
        if info.id != current_id and info.event_count > 0:
            return info.id
    return None


def build_summary(messages: Sequence[dshpy.Message], limit: int = 200) -> str:
    """One line per user or assistant message: what was asked and what was answered."""
    lines = []
    for message in messages:
        if message.role not in ("user", "assistant"):
            continue
        text = " ".join(message.text.split())
        if not text:
            continue
        lines.append(f"{message.role}: {text[:limit]}{'…' if len(text) > limit else ''}")
    return "\n".join(lines)


def already_injected(session: dshpy.Session) -> bool:
    """Whether this session already received (or has queued) the memory message — read from the log."""
    for event in session.events:
        if event.type == "agent/inbox/spliced":
            for message in event.data["inserted"]:
                if message["source"].get("kind") == MEMORY_SOURCE["kind"]:
                    return True
    return False


class CrossSessionMemory:
    """``turn-stopping`` hook that injects a summary of the previous session's last ``last`` messages."""

    def __init__(self, store: dshpy.SessionStore, *, last: int = 10, prefix: str = "[memory] ") -> None:
        self.store = store
        self.last = last
        self.prefix = prefix  # the seed writes "[记忆] "

    def install(self, agent: Agent) -> Callable[[], None]:
        """Register the hook on ``agent``; returns the function that removes it."""
        return agent.on("turn-stopping", self.on_turn_stopping)

    def on_turn_stopping(self, payload: TurnStopping) -> None:
        agent: Agent = payload.agent
        current = agent.session
        if already_injected(current):
            return
        previous_id = previous_session_id(self.store, current.id)
        if previous_id is None:
            return
        previous = self.store.inspect(previous_id)  # read-only: never writes the other session
        summary = build_summary(previous.derive_messages()[-self.last :])
        if summary:
            agent.inject(f"{self.prefix}Earlier session {previous_id}:\n{summary}", source=MEMORY_SOURCE)


async def demo(store: dshpy.SessionStore, config: ModelConfig) -> None:
    """Two sessions: the second one learns what the first one was told."""
    async with ChatClient(config) as client:
        first = Agent(store.create(cwd=os.getcwd()), client, system_prompt="Answer in one short sentence.")
        result = await first.run("Please remember: the password is kiwi.")
        print(f"session 1 ({first.session.id}): {result.text}")
        first.session.close()

        second = Agent(store.create(cwd=os.getcwd()), client, system_prompt="Answer in one short sentence.")
        CrossSessionMemory(store).install(second)
        result = await second.run("Hello! Do you know anything about me yet?")
        print(f"session 2 ({second.session.id}), after {result.steps} steps: {result.text}")
        for message in second.session.derive_messages():
            print(f"  {message.role}: {message.text[:100]!r}")
        second.session.close()


def main() -> int:
    store = dshpy.open_store("memory:")
    if os.environ.get("DEEPSEEK_API_KEY"):
        asyncio.run(demo(store, ModelConfig.from_env()))
        return 0
    from dshpy.testing.fake_model import FakeModelServer, Reply

    script = [
        Reply.text("Noted: the password is kiwi."),
        Reply.text("Not yet — this is our first exchange."),
        Reply.text("Actually, I remember now: the password is kiwi."),
    ]
    with FakeModelServer(script) as server:
        print("(no DEEPSEEK_API_KEY: using a scripted local model)")
        asyncio.run(demo(store, ModelConfig.from_env(base_url=server.base_url, api_key="demo")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
