"""One agent turn in a process of its own, for the resume and SIGKILL tests.

    python agent_worker.py STORE_URL BASE_URL PROMPT [--session ID] [--system TEXT]

Prints ``{"session": id}`` once the session is open, then ``{"kind", "text", "turn"}``
when the turn ends. Its ``slow_write`` tool writes a marker file and then works for a
minute: long enough to be killed inside the tool body.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path

import dshpy
from dshpy.agent import Agent, tool
from dshpy.llm import ChatClient, ModelConfig


@tool
def slow_write(marker: str) -> str:
    """Write a marker file, then keep working for a long time."""
    Path(marker).write_text("started")
    time.sleep(60)
    return "finished"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("store")
    parser.add_argument("base_url")
    parser.add_argument("prompt")
    parser.add_argument("--session")
    parser.add_argument("--system", default="You are a test agent.")
    args = parser.parse_args()
    store = dshpy.open_store(args.store)
    session = store.open(args.session) if args.session else store.create(cwd="/srv/app")
    print(json.dumps({"session": session.id}), flush=True)

    async def turn() -> None:
        async with ChatClient(ModelConfig.from_env(base_url=args.base_url, api_key="test-key", env={})) as client:
            agent = Agent(session, client, system_prompt=args.system, tools=[slow_write])
            result = await agent.run(args.prompt)
            print(json.dumps({"kind": result.kind, "text": result.text, "turn": result.turn}), flush=True)

    asyncio.run(turn())
    session.close()
    store.close()


if __name__ == "__main__":
    main()
