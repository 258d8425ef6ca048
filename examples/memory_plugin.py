"""Cross-session memory: the plugin of the dsh-05 seed ("Session 与记忆"), as the seed writes it.

The seed's point: a session's history is *derived* from its log, so any session can
be re-read at any time — no separate history store is needed. This plugin uses that
to carry memory across sessions: when the model is about to end a turn
(``agent/turn-stopping``) it finds the previous session, derives its messages,
summarises the last ten and injects the summary into the current session's next
step, so the model answers once more, now knowing what happened before.

The seed's pseudo-code, line for line::

    export const name = 'cross-session-memory'       name = "cross-session-memory"
    export const inject = ['sessions']               inject = ["sessions", "query"]
    export function apply(ctx) {                     def apply(ctx):
      ctx.on('agent/turn-stopping', async (p) => {     ctx.on("agent/turn-stopping", on_turn_stopping)
        const { agent } = payload                        agent = payload.agent
        const prevSessionId = await getPrev…()           previous_session_id(ctx.query, current.id)
        const prevSession = await loadSession(id)        ctx.sessions.inspect(previous_id)
        const prevMessages = prevSession.deriveMessages()  previous.derive_messages()
        const summary = buildSummary(msgs.slice(-10))    build_summary(messages[-10:])
        agent.inject({type: 'user', content: [...]})     agent.inject({"type": "user", "content": [...]})

What differs, on purpose: "the previous session" comes from the session query service
(``ctx.query``: the most recently active other session with a turn); the memory is
injected once per session (checked in the log itself, so also after a restart), not
at every turn end; the previous session is read with ``inspect`` — a read-only view
that never writes, even if that session's last turn was interrupted. The injected
message's source is ``{"kind": "plugin:cross-session-memory"}`` (the host sources
what a plugin injects), so it is never mistaken for the human's words.

Run it: ``python examples/memory_plugin.py``. With ``DEEPSEEK_API_KEY`` set it talks
to the real model; without, to a scripted local fake, so the demo runs offline. To
load it in ``dshpy`` itself, name it in ``config.toml`` (``[plugins] load =
["memory_plugin"]``, with ``examples/`` on the path) or ship it with an entry point
in the ``dshpy.plugins`` group.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Sequence
from typing import Any

import dshpy
from dshpy.agent import Agent
from dshpy.llm import ChatClient, ModelConfig

name = "cross-session-memory"
inject = ["sessions", "query"]
PREFIX = "[memory] "  # the seed writes "[记忆] "
LAST = 10


def previous_session_id(query: dshpy.SessionQuery, current_id: str) -> str | None:
    """The seed's ``getPreviousSessionId``: the most recently active other session that ran a turn."""
    page = query.list({"exclude_ids": [current_id], "min_turns": 1}, sort="updated", limit=1)
    return page.sessions[0].id if page.sessions else None


def build_summary(messages: Sequence[dshpy.Message], limit: int = 200) -> str:
    """One line per user or assistant message: what was asked and what was answered."""
    lines = []
    for message in messages:
        if message.role not in ("user", "assistant"):
            continue
        text = " ".join(message.text.split())
        if text:
            lines.append(f"{message.role}: {text[:limit]}{'…' if len(text) > limit else ''}")
    return "\n".join(lines)


def already_injected(session: dshpy.Session) -> bool:
    """Whether this session already received (or has queued) the memory — read from the log."""
    for event in session.events:
        if event.type == "agent/inbox/spliced":
            for message in event.data["inserted"]:
                if message["source"].get("kind") == f"plugin:{name}":
                    return True
    return False


def apply(ctx: Any) -> None:
    """Subscribe to the turn's last moment; ``ctx.sessions`` is the store, ``ctx.query`` its query service."""

    def on_turn_stopping(payload: Any) -> None:
        agent = payload.agent
        current = agent.session
        if already_injected(current):
            return
        previous_id = previous_session_id(ctx.query, current.id)
        if previous_id is None:
            return
        previous = ctx.sessions.inspect(previous_id)  # read-only: never writes the other session
        summary = build_summary(previous.derive_messages()[-ctx.options.get("last", LAST) :])
        if summary:
            text = f"{PREFIX}Earlier session {previous_id}:\n{summary}"
            agent.inject({"type": "user", "content": [{"type": "text", "text": text}]})

    ctx.on("agent/turn-stopping", on_turn_stopping)


async def demo(store: dshpy.SessionStore, config: ModelConfig) -> None:
    """Two sessions: the second one learns what the first one was told."""
    host = dshpy.PluginHost(store, [sys.modules[__name__]])  # this module is the plugin
    async with ChatClient(config) as client:
        first = Agent(store.create(cwd=os.getcwd()), client, system_prompt="Answer in one short sentence.")
        host.attach(first)  # nothing to remember yet: no previous session
        result = await first.run("Please remember: the password is kiwi.")
        print(f"session 1 ({first.session.id}): {result.text}")
        first.session.close()

        second = Agent(store.create(cwd=os.getcwd()), client, system_prompt="Answer in one short sentence.")
        host.attach(second)
        result = await second.run("Hello! Do you know anything about me yet?")
        print(f"session 2 ({second.session.id}), after {result.steps} steps: {result.text}")
        for message in second.session.derive_messages():
            print(f"  {message.role}: {message.text[:100]!r}")
        second.session.close()
    host.close()


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
