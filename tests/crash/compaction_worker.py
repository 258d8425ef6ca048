"""A process that compacts a session until it is killed, for the compaction SIGKILL tests.

    python compaction_worker.py MODE STORE_URL SESSION_ID [BASE_URL]

Modes:

* ``manual`` — ``/compact``'s path: ask the model at BASE_URL for a summary of the
  stored session (the test's fake model never answers: the kill lands while the
  summary is being written);
* ``agent`` — agent turns against the model at BASE_URL with a 3,000-token window,
  so a pressure compaction starts inside a turn (and the kill lands while it waits
  for its summary);
* ``commit-loop`` — turns and compactions with a summary made in-process, as fast
  as it goes; prints the stored event count after every compaction (the kill lands
  anywhere, commits included);
* ``commit-failpoint`` — one compaction whose batch is built and appended, then the
  process kills itself before the flush makes it durable.

Prints ``ready`` once the session is open.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys

import dshpy
from dshpy.agent import Agent
from dshpy.agent.compaction import AgentCompaction
from dshpy.compaction import CompactionEngine, SummaryOutput
from dshpy.llm import ChatClient, ModelConfig
from dshpy.testing.builders import TurnScript

SUMMARY = "## Primary Request and Intent\n- keep going\n\n## Next Step\n- (none)"


def summary(_request: object) -> SummaryOutput:
    return SummaryOutput.text(SUMMARY, provider="local", model="template", model_call=False)


def client(base_url: str, window: int | None = None) -> ChatClient:
    config = ModelConfig.from_env(base_url=base_url, api_key="k", model="deepseek-chat", env={})
    if window is not None:
        from dataclasses import replace

        config = replace(config, context_window=window)
    return ChatClient(config)


async def manual(session: dshpy.Session, base_url: str) -> None:
    async with client(base_url) as model:
        await AgentCompaction(session, model).compact_now()


async def agent(session: dshpy.Session, base_url: str) -> None:
    async with client(base_url, 3_000) as model:
        runner = Agent(session, model, system_prompt="Be brief.")
        for number in range(1, 200):
            await runner.run(f"prompt {number}: " + "tell me more " * 40)


def commit_loop(session: dshpy.Session) -> None:
    engine = CompactionEngine()
    script = TurnScript(session)
    while True:
        for _ in range(3):
            script.turn("a prompt that is long enough to be worth condensing " * 5, steps=2)
        session.flush()
        engine.compact(session, summary)
        print(len(session.events), flush=True)


def commit_failpoint(session: dshpy.Session) -> None:
    flush = session.flush

    def dying_flush() -> object:
        if session.events[-1].type == "compaction/end":
            os.kill(os.getpid(), signal.SIGKILL)
        return flush()

    session.flush = dying_flush  # type: ignore[method-assign]
    CompactionEngine().compact(session, summary)


def main() -> None:
    mode, url, session_id = sys.argv[1:4]
    base_url = sys.argv[4] if len(sys.argv) > 4 else ""
    store = dshpy.open_store(url)
    session = store.open(session_id)
    print("ready", flush=True)
    if mode == "manual":
        asyncio.run(manual(session, base_url))
    elif mode == "agent":
        asyncio.run(agent(session, base_url))
    elif mode == "commit-loop":
        commit_loop(session)
    elif mode == "commit-failpoint":
        commit_failpoint(session)
    raise SystemExit(f"the {mode} worker finished without being killed")


if __name__ == "__main__":
    main()
