"""Agent loop overhead per step, against the bare HTTP round trip to the same model server.

Run: .venv/bin/python benchmarks/agent.py [--steps N] [--json]
     .venv/bin/python benchmarks/agent.py --large-answers [--sizes 1,4,20] [--chunk-bytes N] [--compare-src DIR]

``--large-answers`` times one agent turn whose answer is 1, 4 and 20 MB, streamed by
the same server in deltas of ``--chunk-bytes``: the streaming path alone (HTTP, SSE,
chunk mapping, packing, the message event), which must grow linearly with the
answer. ``--compare-src`` times another source tree (e.g. main's ``src``) in a
subprocess of the same run and prints both and the ratio; a size it cannot finish
within ``--limit`` seconds is shown as ``> limit``.

The model is FakeModelServer answering instantly (a short streamed text with usage),
so what is measured is everything around the model: building the request from the
log, the ``openai`` client, mapping and packing the stream, appending the step's
events (validated) and flushing them (checkpoints: pre-step, before the request,
end of turn). Each step here is a one-step turn (9–11 events).

Baselines, in the same run against the same server, replaying exactly the request
bodies the agent sent (the conversation grows by two messages per turn, so later
requests carry more history):

* **raw HTTP** — ``http.client`` on a kept-alive connection: POST the same body,
  read the whole SSE answer. Nothing parsed.
* **openai client** — :meth:`ChatClient.stream` with the same messages, consumed to
  the end (SSE parsing, pydantic chunk models, chunk mapping), no session.

Ratios compare numbers of one run; the machine is shared and absolute numbers drift.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import dshpy
from dshpy.agent import Agent
from dshpy.llm import ChatClient, ModelConfig
from dshpy.testing.fake_model import FakeModelServer, Reply

ROUNDS = 3


def raw_round_trips(server: FakeModelServer, bodies: list[dict[str, Any]]) -> float:
    """Seconds per request: POST each body + read the full streamed answer, on one kept-alive connection."""
    payloads = [json.dumps(body).encode() for body in bodies]
    connection = http.client.HTTPConnection("127.0.0.1", server.port)
    headers = {"Content-Type": "application/json", "Authorization": "Bearer bench"}
    for payload in payloads[:5]:  # warm up
        connection.request("POST", "/chat/completions", payload, headers)
        connection.getresponse().read()
    started = time.perf_counter()
    for payload in payloads:
        connection.request("POST", "/chat/completions", payload, headers)
        data = connection.getresponse().read()
        assert data.endswith(b"data: [DONE]\n\n"), data[-40:]
    elapsed = time.perf_counter() - started
    connection.close()
    return elapsed / len(payloads)


async def timed(count: int, step: Callable[[int], Awaitable[Any]]) -> float:
    for index in range(3):
        await step(index)
    started = time.perf_counter()
    for index in range(count):
        await step(index)
    return (time.perf_counter() - started) / count


async def client_round_trips(server: FakeModelServer, bodies: list[dict[str, Any]]) -> float:
    """Seconds per request: the same messages through :meth:`ChatClient.stream`, consumed to the end."""
    async with ChatClient(ModelConfig.from_env(base_url=server.base_url, api_key="bench", env={})) as client:

        async def one(index: int) -> None:
            async for _chunk in client.stream(bodies[index]["messages"]):
                pass

        return await timed(len(bodies), one)


async def agent_steps(server: FakeModelServer, url: str, count: int) -> tuple[float, float]:
    """Seconds per one-step turn, and events written per turn."""
    store = dshpy.open_store(url)
    session = store.create(cwd="/bench")
    try:
        async with ChatClient(ModelConfig.from_env(base_url=server.base_url, api_key="bench", env={})) as client:
            agent = Agent(session, client, system_prompt="You are a benchmark.")

            async def one(_index: int) -> None:
                result = await agent.run("hi")
                assert result.kind == "completed", result.reason

            before = len(session)
            per_step = await timed(count, one)
            events = (len(session) - before) / (count + 3)
        return per_step, events
    finally:
        session.close()
        store.close()


MB = 1_000_000


async def large_answer_turn(size: int, chunk_bytes: int) -> float:
    """Seconds for one turn whose whole answer is ``size`` characters, streamed in ``chunk_bytes`` deltas."""
    text = ("0123456789abcdef" * (size // 16 + 1))[:size]
    with FakeModelServer([Reply.text(text, pieces=max(1, size // chunk_bytes))]) as server:
        async with ChatClient(ModelConfig.from_env(base_url=server.base_url, api_key="bench", env={})) as client:
            agent = Agent(dshpy.Session.new(), client)
            started = time.perf_counter()
            result = await agent.run("write a lot")
            elapsed = time.perf_counter() - started
    assert result.kind == "completed" and len(result.text) == size, result.reason
    return elapsed


def time_other_tree(src: str, size_mb: int, chunk_bytes: int, limit: float) -> float | None:
    """Seconds for the same turn with ``src`` (another checkout's source) first on the path; None past ``limit``."""
    script = [sys.executable, __file__, "--large-answers", "--sizes", str(size_mb), "--chunk-bytes", str(chunk_bytes)]
    env = {**os.environ, "PYTHONPATH": src}
    try:
        done = subprocess.run([*script, "--json"], env=env, capture_output=True, text=True, timeout=limit, check=True)
    except subprocess.TimeoutExpired:
        return None
    return float(json.loads(done.stdout)["seconds"][str(size_mb)])


def large_answers(args: argparse.Namespace) -> int:
    sizes = [int(size) for size in args.sizes.split(",")]
    ours = {size: asyncio.run(large_answer_turn(size * MB, args.chunk_bytes)) for size in sizes}
    if args.json:
        print(json.dumps({"chunk_bytes": args.chunk_bytes, "seconds": {str(k): round(v, 3) for k, v in ours.items()}}))
        return 0
    print(f"one agent turn, its answer streamed in {args.chunk_bytes}-byte deltas (FakeModelServer, memory session)")
    other: dict[int, float | None] = {}
    if args.compare_src:
        other = {size: time_other_tree(args.compare_src, size, args.chunk_bytes, args.limit) for size in sizes}
        print(f"  {'answer':>8}  {'this tree':>10}  {args.compare_src:>20}  ratio")
    for size in sizes:
        line = f"  {size:>5} MB  {ours[size]:8.2f} s"
        if args.compare_src:
            before = other[size]
            shown = f"> {args.limit:g} s" if before is None else f"{before:.2f} s"
            ratio = f"> {args.limit / ours[size]:.0f}x" if before is None else f"{before / ours[size]:.1f}x"
            line += f"  {shown:>20}  {ratio}"
        print(line)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300, help="steps (requests) per measurement")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--large-answers", action="store_true", help="time turns with 1-20 MB answers instead")
    parser.add_argument("--sizes", default="1,4,20", help="answer sizes in MB (--large-answers)")
    parser.add_argument("--chunk-bytes", type=int, default=1000, help="bytes per streamed delta (--large-answers)")
    parser.add_argument("--compare-src", metavar="DIR", help="also time this source tree, e.g. /work/main/src")
    parser.add_argument("--limit", type=float, default=120.0, help="seconds allowed per size for --compare-src")
    args = parser.parse_args()
    if args.large_answers:
        return large_answers(args)
    count = args.steps
    results: dict[str, list[float]] = {"raw": [], "client": [], "memory": [], "sqlite": []}
    events_per_step = 0.0
    reply = Reply.text("The answer is 42.", pieces=4)
    with FakeModelServer(default=reply) as server, tempfile.TemporaryDirectory() as tmp:
        for round_number in range(ROUNDS):
            seen = len(server.requests)
            results["memory"].append(asyncio.run(agent_steps(server, "memory:", count))[0])
            bodies = server.requests[seen:]  # exactly what the agent sent, history included
            db = Path(tmp) / f"bench-{round_number}.db"
            per_step, events_per_step = asyncio.run(agent_steps(server, f"sqlite:///{db}", count))
            results["sqlite"].append(per_step)
            results["raw"].append(raw_round_trips(server, bodies))
            results["client"].append(asyncio.run(client_round_trips(server, bodies[3:])))
    best = {key: min(values) for key, values in results.items()}
    summary = {
        "steps": count,
        "rounds": ROUNDS,
        "events_per_step": round(events_per_step, 1),
        "ms_per_step": {key: round(value * 1000, 3) for key, value in best.items()},
        "median_ms_per_step": {key: round(statistics.median(v) * 1000, 3) for key, v in results.items()},
        "ratio_vs_raw_http": {key: round(best[key] / best["raw"], 1) for key in ("client", "memory", "sqlite")},
        "loop_overhead_ms": {
            "memory_vs_client": round((best["memory"] - best["client"]) * 1000, 3),
            "sqlite_vs_client": round((best["sqlite"] - best["client"]) * 1000, 3),
        },
    }
    if args.json:
        print(json.dumps(summary))
        return 0
    ms = summary["ms_per_step"]
    ratio = summary["ratio_vs_raw_http"]
    print(
        f"agent loop, {count} one-step turns per measurement, best of {ROUNDS} rounds "
        f"({summary['events_per_step']} events per step)"
    )
    print(f"  raw HTTP round trip (http.client)      {ms['raw']:8.3f} ms/request   1.0x")
    print(f"  openai client stream (ChatClient)      {ms['client']:8.3f} ms/request  {ratio['client']:4.1f}x")
    print(f"  agent step, memory: store (no I/O)     {ms['memory']:8.3f} ms/step     {ratio['memory']:4.1f}x")
    print(f"  agent step, sqlite store (3 flushes)   {ms['sqlite']:8.3f} ms/step     {ratio['sqlite']:4.1f}x")
    overhead = summary["loop_overhead_ms"]
    print(
        f"  loop overhead beyond the client: {overhead['memory_vs_client']:.3f} ms/step in memory, "
        f"{overhead['sqlite_vs_client']:.3f} ms/step with durable SQLite flushes"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
