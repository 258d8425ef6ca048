"""Round-trip cost of the server: session.events and session.send over stdio and HTTP vs in-process.

    python benchmarks/server.py [--events N] [--sends N]

The model is FakeModelServer answering at once; every path uses a SQLite store in a
temporary directory. The in-process baseline reads with ``store.read`` (the server
answers from its live session, so it can beat that); in-process turns share the
GIL with the fake model's thread, which the server processes do not.
Prints per-call latency, calls/s, and the ratio to in-process.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from itertools import islice
from pathlib import Path

import dshpy
from dshpy.agent import Agent
from dshpy.llm.client import ChatClient, ModelConfig
from dshpy.testing.fake_model import FakeModelServer, Reply


def timed(calls: int, fn: Callable[[], object]) -> float:
    fn()  # warm up
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def in_process(home: Path, base_url: str, events: int, sends: int) -> tuple[float, float]:
    store = dshpy.open_store(f"sqlite:///{home / 'inproc.db'}")
    session = store.create(session_id="bench")

    async def run_turns(count: int) -> float:
        async with ChatClient(ModelConfig.from_env(base_url=base_url, api_key="x", env={})) as client:
            agent = Agent(session, client)
            await agent.run("warm up")
            start = time.perf_counter()
            for _ in range(count):
                await agent.run("hi")
            return (time.perf_counter() - start) / count

    send = asyncio.run(run_turns(sends))
    read = timed(events, lambda: [e.to_wire() for e in islice(store.read("bench", 0), 100)])
    live = timed(events, lambda: [e.to_wire() for e in session.events[:100]])
    print(f"(in-process, live session.events[:100]: {live * 1e3:.3f} ms)")
    session.close()
    store.close()
    return read, send


def over(client: dshpy.HarnessClient, events: int, sends: int) -> tuple[float, float]:
    session = client.create_session("bench")
    client.send_message(session.id, "warm up")
    start = time.perf_counter()
    for _ in range(sends):
        client.send_message(session.id, "hi")
    send = (time.perf_counter() - start) / sends
    read = timed(events, lambda: client.request("session.events", {"sessionId": "bench", "limit": 100}))
    return read, send


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=500)
    parser.add_argument("--sends", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, FakeModelServer(default=Reply.text("pong")) as model:
        home = Path(tmp)
        env = {"DSHPY_HOME": str(home / "stdio"), "DEEPSEEK_API_KEY": "x", "DEEPSEEK_BASE_URL": model.base_url}
        results = {"in-process": in_process(home, model.base_url, args.events, args.sends)}
        with dshpy.HarnessClient(env=env) as client:
            results["stdio"] = over(client, args.events, args.sends)
        http_env = {**os.environ, **env, "DSHPY_HOME": str(home / "http")}
        server = subprocess.Popen(
            [sys.executable, "-m", "dshpy", "serve", "--http", "--port", "0"], env=http_env, stderr=subprocess.PIPE
        )
        try:
            assert server.stderr is not None
            match = re.search(r"serving (http://\S+)", server.stderr.readline().decode())
            assert match, "the HTTP server did not start"
            with dshpy.HarnessClient(url=match.group(1)) as client:
                results["http"] = over(client, args.events, args.sends)
        finally:
            server.terminate()
            server.wait(10)
            server.stderr.close() if server.stderr else None
    base_read, base_send = results["in-process"]
    print(f"{'path':<11} {'events(100) ms':>15} {'calls/s':>9} {'x':>6}   {'send ms':>8} {'turns/s':>8} {'x':>6}")
    for name, (read, send) in results.items():
        print(
            f"{name:<11} {read * 1e3:>15.3f} {1 / read:>9.0f} {read / base_read:>6.1f}   "
            f"{send * 1e3:>8.2f} {1 / send:>8.0f} {send / base_send:>6.2f}"
        )


if __name__ == "__main__":
    main()
