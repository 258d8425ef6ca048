"""Replay benchmark: ``store.read()`` of a 10k-item agent session against raw sqlite3/file reads + orjson.

Run: .venv/bin/python benchmarks/replay.py [--items N] [--rounds N] [--profile]

The workload is issue #20's: turns of a user message, an assistant message with a
tool call, the tool call and its result (then the assistant's answer), written by
dshpy as a real agent loop writes them, lifecycle events included. The baselines read
*the same events* with no dshpy code at all: ``SELECT body`` over a plain sqlite3 table
holding each event's JSON and ``orjson.loads`` of each (SQLite: dshpy's own file
compresses its bodies since schema v6, so the baseline keeps the JSON the bodies
decompress to in a table of its own), or one read of the JSONL file and
``orjson.loads`` of each line. So the ratio is what dshpy's storage, checks, decoding
and immutable events cost on top of parsing the JSON.

Each round opens a fresh store object and a fresh raw connection (no statement or
scan cache carried over; the OS page cache is warm for both) and times, in order:
``list(store.read(sid))`` on the fresh store ("cold"), then ``list(store.read(sid))``
twice more on the same store ("again" — the JSONL store serves these from its scan
cache, SQLite decodes again). Numbers are CPU milliseconds, the best of the rounds
(as ``timeit`` reports), raw and dshpy alternating, so load on a shared machine hits
both alike.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

import dshpy
from dshpy.core.events import encode_event
from dshpy.testing.builders import TurnScript
from support import no_gc

ITEM_TYPES = frozenset({"user/message", "assistant/message", "tool/call", "tool/result"})


def workload(items: int) -> list[dshpy.SessionEvent]:
    """Whole turns (user message, assistant tool call, the call and its result, the answer) until ``items`` items."""
    session = dshpy.Session.new(cwd="/bench")
    script = TurnScript(session)
    count = 0
    while count < items:
        turn = script.turn("please read a.txt and summarise it", steps=2, tools_per_step=1)
        count += sum(1 for event in turn if event.type in ITEM_TYPES)
    return list(session.events)


def write(url: str, events: list[dshpy.SessionEvent]) -> str:
    store = dshpy.open_store(url)
    session = store.create(cwd="/bench")
    session.append_events(events)
    session.flush()
    session.close()
    sid = session.id
    store.close()
    return sid


def raw_table(path: Path, session_id: str, events: list[dshpy.SessionEvent]) -> None:
    """The baseline's table: the session's events as stored JSON, keyed like dshpy's rows."""
    db = sqlite3.connect(path)
    with db:
        db.execute("CREATE TABLE events (session_id TEXT, seq INTEGER, body BLOB, PRIMARY KEY (session_id, seq))")
        db.executemany(
            "INSERT INTO events VALUES (?, ?, ?)",
            [(session_id, e.seq, encode_event(e, seq_ranges=False)) for e in events],
        )
    db.close()


def raw_sqlite(path: Path, session_id: str) -> int:
    """The same events through sqlite3 and orjson only."""
    db = sqlite3.connect(path)
    try:
        rows = db.execute("SELECT body FROM events WHERE session_id = ? ORDER BY seq", (session_id,)).fetchall()
        parsed = [orjson.loads(body) for (body,) in rows]
    finally:
        db.close()
    return len(parsed)


def raw_jsonl(path: Path) -> int:
    """The same lines through one file read and orjson only (the header line skipped)."""
    with open(path, "rb") as file:
        data = file.read()
    parsed = [orjson.loads(line) for line in data.split(b"\n")[1:] if line]
    return len(parsed)


def jsonl_file(root: Path) -> Path:
    (found,) = [p for p in root.rglob("*.jsonl")]
    return found


def timed(action: Callable[[], Any]) -> float:
    """CPU milliseconds (user + system) of ``action``: on a shared machine, time spent waiting for a core
    is not the code's; this work is single-threaded and reads from the page cache, so it equals wall time
    on an idle machine."""
    with no_gc():
        start = time.process_time()
        action()
        return (time.process_time() - start) * 1000


def dshpy_reads(url: str, session_id: str, expected: int) -> tuple[float, float, float]:
    store = dshpy.open_store(url)
    try:
        times = []
        for _ in range(3):
            result: list[Any] = []
            times.append(timed(lambda result=result: result.extend(store.read(session_id))))
            assert len(result) == expected, (len(result), expected)
    finally:
        store.close()
    return times[0], times[1], times[2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--items", type=int, default=10_000, help="items in the session (default 10000)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds per backend (default 5)")
    parser.add_argument("--profile", action="store_true", help="print a cProfile of one cold dshpy read per backend")
    args = parser.parse_args()
    events = workload(args.items)
    print(f"replay of a {args.items}-item session ({len(events)} events), CPU ms, best of {args.rounds} rounds")
    print(f"{'backend':<8}{'raw':>9}{'cold':>9}{'again':>9}{'again':>9}{'cold/raw':>10}{'again/raw':>10}")
    with tempfile.TemporaryDirectory(dir=os.environ.get("DSHPY_BENCH_DIR")) as tmp:
        root = Path(tmp)
        targets: dict[str, tuple[str, Callable[[str], int]]] = {}
        sqlite_path = root / "replay.db"
        raw_path = root / "raw.db"
        targets["sqlite"] = (f"sqlite:///{sqlite_path}", lambda sid: raw_sqlite(raw_path, sid))
        jsonl_root = root / "jsonl"
        targets["jsonl"] = (f"jsonl:///{jsonl_root}?compression=none", lambda _sid: raw_jsonl(jsonl_file(jsonl_root)))
        for name, (url, raw) in targets.items():
            sid = write(url, events)
            if name == "sqlite":
                with dshpy.open_store(url) as store:
                    raw_table(raw_path, sid, list(store.read(sid)))
            raws: list[float] = []
            runs: list[tuple[float, float, float]] = []
            for _ in range(args.rounds):
                raws.append(timed(lambda raw=raw, sid=sid: raw(sid)))
                runs.append(dshpy_reads(url, sid, len(events)))
            raw_ms = min(raws)
            cold, again1, again2 = (min(run[i] for run in runs) for i in range(3))
            print(
                f"{name:<8}{raw_ms:>9.1f}{cold:>9.1f}{again1:>9.1f}{again2:>9.1f}"
                f"{cold / raw_ms:>10.2f}{min(again1, again2) / raw_ms:>10.2f}"
            )
            if args.profile:
                import cProfile
                import pstats

                store = dshpy.open_store(url)
                profiler = cProfile.Profile()
                profiler.runcall(lambda store=store, sid=sid: list(store.read(sid)))
                store.close()
                pstats.Stats(profiler).sort_stats("tottime").print_stats(15)


if __name__ == "__main__":
    main()
