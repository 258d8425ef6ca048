"""Upgrade benchmark: what reading and storing an old dsh log (format v0) costs, against reading v4.

Run: .venv/bin/python benchmarks/upgrade.py [--quick] [--json] [--events N] [--compression none|zstd]

The v0 log is 100k events in rc.8's shape (:mod:`dshpy.testing.dsh_v0`: every answer
streams 24 text deltas, packed in one row, cited by its ``assistant/message``), so
96 % of it is chunk events, as dsh measured on its own logs (dsh-v4 §7). Rows, each
timed as the median of the rounds, with the cyclic GC off:

1. ``upgrade in memory`` — a fresh store reads the v0 log: parse, decode, the four
   edges, decode and check the v4 events (what ``read``/``inspect``/``list`` pay the
   first time; the result is cached by the file's revision). Throughput is in v0
   events per second, the unit of the input.
2. ``upgrade on disk`` — ``store.upgrade(id)`` after that read: encode the v4 file,
   stage, fsync, read back and verify, link.
3. ``read the upgraded v4`` — a fresh store reads the v4 file the upgrade wrote: the
   same session, now ~5x fewer events (the chunks are inside the messages).
4. ``read a native v4 log`` — a fresh store reads a v4 log of the same size in
   events, written by dshpy's own writer (TurnScript turns), for scale.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

import dshpy
from dshpy.storage.jsonl import JsonlStore
from dshpy.testing.builders import TurnScript
from dshpy.testing.dsh_v0 import write_v0_log
from support import no_gc

CWD = "/tmp/dshpy-v0"


def write_v0(root: Path, events: int, compression: str) -> Path:
    return write_v0_log(root, "old", events=events, cwd=CWD, compression=compression)


def write_v4(root: Path, events: int, compression: str) -> None:
    store = JsonlStore(root, compression=compression)
    session = store.create(session_id="native", cwd=CWD)
    script = TurnScript(session)
    while len(session) < events:
        script.turn(steps=2, tools_per_step=1)
        if len(session.events) - session.pending_count < len(session) - 2_000:
            session.flush()
    session.close()


def timed(rounds: int, prepare: Callable[[], Any], run: Callable[[Any], int]) -> tuple[float, int]:
    """Median seconds of ``run(prepare())`` over ``rounds`` (``prepare`` untimed); returns it and run's count."""
    seconds = []
    count = 0
    for _ in range(rounds):
        state = prepare()
        with no_gc():
            started = time.perf_counter()
            count = run(state)
            seconds.append(time.perf_counter() - started)
    return statistics.median(seconds), count


def measure(events: int, compression: str, rounds: int) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="dshpy-upgrade-bench-"))
    try:
        source = write_v0(work / "old", events, compression)
        size = source.stat().st_size
        v4_target = source.with_name("session.v4.jsonl" + (".zstd" if compression == "zstd" else ""))

        def fresh_old() -> JsonlStore:
            v4_target.unlink(missing_ok=True)
            return JsonlStore(work / "old", compression=compression)

        in_memory, upgraded = timed(rounds, fresh_old, lambda store: len(list(store.read("old"))))

        def read_first() -> JsonlStore:
            store = fresh_old()
            store.stat("old")
            return store

        on_disk, _ = timed(rounds, read_first, lambda store: store.upgrade("old").event_count)
        v4_size = v4_target.stat().st_size
        upgraded_read, _ = timed(
            rounds, lambda: JsonlStore(work / "old", compression=compression), lambda s: len(list(s.read("old")))
        )
        write_v4(work / "native", events, compression)
        native, native_events = timed(
            rounds, lambda: JsonlStore(work / "native", compression=compression), lambda s: len(list(s.read("native")))
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {
        "compression": compression,
        "v0Events": events,
        "v0Bytes": size,
        "v4Events": upgraded,
        "v4Bytes": v4_size,
        "upgradeInMemorySeconds": in_memory,
        "upgradeInMemoryEventsPerSecond": events / in_memory,
        "upgradeOnDiskSeconds": on_disk,
        "readUpgradedSeconds": upgraded_read,
        "readUpgradedEventsPerSecond": upgraded / upgraded_read,
        "nativeV4Events": native_events,
        "readNativeV4Seconds": native,
        "readNativeV4EventsPerSecond": native_events / native,
    }


def report(result: dict[str, Any]) -> None:
    print(f"compression {result['compression']}")
    print(f"  v0 log: {result['v0Events']:,} events, {result['v0Bytes'] / 1e6:.1f} MB")
    print(f"  v4 log: {result['v4Events']:,} events, {result['v4Bytes'] / 1e6:.1f} MB after the upgrade")
    rows = [
        ("upgrade in memory (first read)", result["upgradeInMemorySeconds"], result["v0Events"], "v0 events"),
        ("upgrade on disk (after the read)", result["upgradeOnDiskSeconds"], result["v4Events"], "v4 events"),
        ("read the upgraded v4", result["readUpgradedSeconds"], result["v4Events"], "v4 events"),
        ("read a native v4 log", result["readNativeV4Seconds"], result["nativeV4Events"], "v4 events"),
    ]
    for label, seconds, count, unit in rows:
        print(f"  {label:<34} {seconds * 1000:8.0f} ms   {count / seconds:>10,.0f} {unit}/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="10k events, 2 rounds (a smoke run)")
    parser.add_argument("--json", action="store_true", help="also print one JSON line with every number")
    parser.add_argument("--events", type=int, default=None, help="v0 events (default 100,000)")
    parser.add_argument("--compression", choices=["none", "zstd", "both"], default="both")
    args = parser.parse_args()
    events = args.events or (10_000 if args.quick else 100_000)
    rounds = 2 if args.quick else 5
    print(f"dshpy from {dshpy.__file__}\n")
    started = time.perf_counter()
    results = []
    for compression in ("none", "zstd") if args.compression == "both" else (args.compression,):
        result = measure(events, compression, rounds)
        report(result)
        results.append(result)
        print()
    elapsed = time.perf_counter() - started
    print(f"({elapsed:.1f} s)")
    if args.json:
        print(orjson.dumps({"results": results, "seconds": elapsed}).decode())


if __name__ == "__main__":
    main()
