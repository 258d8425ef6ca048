"""Resume benchmark: ``store.open()`` + the first ``derive_messages()`` of a long session, from its resume point
(after) and from its whole log (before), at 1k, 10k and 100k events (issue #20: ≤ 50 ms, ≤ 20 MB at 100k).

Run: .venv/bin/python benchmarks/resume.py [--sizes 1000 10000 100000] [--backends sqlite jsonl memory postgres]
     [--runs 5] [--json]

The log is realistic: TurnScript turns of 3 steps with 2 tool calls per step (user
message, assistant messages with tool calls, tool calls, tool results, boundaries).
Each store is built once per size and closed through ``open``/``close`` so that it
holds the resume point and projection rows a live session leaves. "Before" is the
same store with the resume point made unusable (its row moved beyond the log): the
whole log is read and replayed, as every open did before resume points.

Every measurement runs in a fresh child process (``--child``), so memory and the
JSONL scan cache start cold:

* ``cold ms`` — the first open + derive of the session in the process (after one open of a small session, which
  pays the process's one-time imports): what a server pays per session it has not opened yet;
* ``warm ms`` — the median of ``--runs`` more (each closes its session first);
* ``retained MB`` — tracemalloc's current size after open + derive, minus before (what
  stays allocated while the session is held), and ``peak MB`` its peak during them;
* ``rss MB`` — the resident set growth across the cold open;
* ``all msgs ms`` — reading every derived message and every event afterwards (the
  lazy part's cost when someone does read it all).

The memory store has no cold state between processes (it is built in the child).
PostgreSQL is measured when ``DSH_TEST_POSTGRES_DSN`` is set.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from typing import Any

import dshpy
from dshpy.storage.resume_cache import RESUME_KEY

HERE = os.path.dirname(os.path.abspath(__file__))


def _events(count: int) -> list[dshpy.SessionEvent]:
    from dshpy.testing.builders import TurnScript

    session = dshpy.Session.new(session_id="build", cwd="/bench")
    script = TurnScript(session)
    while len(session) < count:
        script.turn("please look at the files", steps=3, tools_per_step=2)
    return list(session.events)


def _fill(store: Any, count: int) -> None:
    """The session ``bench`` with ``count`` events, closed once (so its resume point and rows exist)."""
    from dshpy.storage.records import StoredRecord

    events = _events(count)
    header = dshpy.SessionHeader.new("bench", cwd="/bench", created_at=events[0].time)
    store._insert(StoredRecord(header, None, events))
    store.open("bench").close()
    small = _events(100)
    store._insert(StoredRecord(dshpy.SessionHeader.new("warmup", cwd="/bench"), None, small))
    store.open("warmup").close()


def _disable_point(store: Any) -> None:
    """Move the resume point's row beyond the log: the store reads and replays the whole log instead."""
    rows = [row for row in store._load_projection_rows("bench") if row.key == RESUME_KEY]
    store._save_projection_rows("bench", [row._replace(seq=10**12) for row in rows])


def _rss_mb() -> float:
    with open("/proc/self/statm") as file:
        return int(file.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _open_derive(store: Any) -> tuple[Any, Any]:
    session = store.open("bench")
    return session, session.derive_messages()


def child(url: str, mode: str, count: int, runs: int) -> dict[str, Any]:
    store = dshpy.open_store(url)
    if url == "memory:":
        _fill(store, count)
    if mode == "before":
        _disable_point(store)
    warmup = store.open("warmup")  # the process's first open imports and builds what every later one reuses
    warmup.derive_messages()
    warmup.close()
    gc.collect()
    rss0 = _rss_mb()
    started = time.perf_counter()
    session, messages = _open_derive(store)
    cold = time.perf_counter() - started
    rss = _rss_mb() - rss0
    resumed = session.resumed_from
    started = time.perf_counter()
    walked = sum(1 for _ in messages) + sum(1 for _ in session.events)
    read_all = time.perf_counter() - started
    session.close()
    if mode == "before":
        _disable_point(store)  # close wrote a fresh point: keep measuring the whole-log path
    del session, messages
    warm: list[float] = []
    for _ in range(runs):
        gc.collect()
        started = time.perf_counter()
        session, messages = _open_derive(store)
        warm.append(time.perf_counter() - started)
        session.close()
        if mode == "before":
            _disable_point(store)
        del session, messages
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    session, messages = _open_derive(store)
    current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    session.close()
    store.close()
    return {
        "events": count,
        "messages": len(messages),
        "resumed_from": resumed,
        "cold_ms": cold * 1000,
        "warm_ms": statistics.median(warm) * 1000 if warm else None,
        "retained_mb": (current - base) / 2**20,
        "peak_mb": (peak - base) / 2**20,
        "rss_mb": rss,
        "read_all_ms": read_all * 1000,
        "walked": walked,
    }


def _urls(root: str, size: int) -> dict[str, str]:
    urls = {
        "sqlite": f"sqlite:///{root}/sqlite-{size}.db",
        "jsonl": f"jsonl:///{root}/jsonl-{size}?compression=zstd",
        "memory": "memory:",
    }
    dsn = os.environ.get("DSH_TEST_POSTGRES_DSN")
    if dsn:
        urls["postgres"] = f"{dsn}?schema=dshpy_bench_resume_{os.getpid()}_{size}"
    return urls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 100_000])
    parser.add_argument("--backends", nargs="+", default=["sqlite", "jsonl", "memory", "postgres"])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--child", nargs=3, metavar=("URL", "MODE", "COUNT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        url, mode, count = args.child
        print(json.dumps(child(url, mode, int(count), args.runs)))
        return
    results: list[dict[str, Any]] = []
    header = (
        f"{'backend':<9}{'events':>8}{'msgs':>7} {'path':<7}{'cold ms':>9}{'warm ms':>9}"
        f"{'retained MB':>13}{'peak MB':>9}{'rss MB':>8}{'all msgs ms':>13}"
    )
    print(header)
    with tempfile.TemporaryDirectory(prefix="dshpy-resume-bench-") as root:
        for size in args.sizes:
            urls = _urls(root, size)
            for backend in args.backends:
                url = urls.get(backend)
                if url is None:
                    continue
                if backend != "memory":
                    store = dshpy.open_store(url)
                    _fill(store, size)
                    store.close()
                for mode in ("before", "after"):
                    command = [sys.executable, __file__, "--child", url, mode, str(size), "--runs", str(args.runs)]
                    out = subprocess.run(command, check=True, capture_output=True, text=True, cwd=HERE).stdout
                    result = {"backend": backend, "path": mode, **json.loads(out.strip().splitlines()[-1])}
                    results.append(result)
                    warm = result["warm_ms"]
                    print(
                        f"{backend:<9}{result['events']:>8}{result['messages']:>7} {mode:<7}"
                        f"{result['cold_ms']:>9.1f}{warm if warm is not None else float('nan'):>9.1f}"
                        f"{result['retained_mb']:>13.1f}{result['peak_mb']:>9.1f}{result['rss_mb']:>8.1f}"
                        f"{result['read_all_ms']:>13.1f}",
                        flush=True,
                    )
                if backend == "postgres":
                    _drop_schema(url)
    if args.json:
        print(json.dumps(results))


def _drop_schema(url: str) -> None:
    import psycopg

    base, _, query = url.partition("?schema=")
    with psycopg.connect(base, autocommit=True) as db:
        db.execute(f'DROP SCHEMA IF EXISTS "{query}" CASCADE')


if __name__ == "__main__":
    main()
