"""Storage benchmarks: durable appends against raw baselines, replay, fork cost, bytes per event.

Run: .venv/bin/python benchmarks/storage.py [--quick] [--json] [--postgres DSN]

Every ratio compares numbers measured in the same run on the same disk, because the
machine is shared and absolute numbers drift. Baselines do the same physical work
without dshpy: raw ``sqlite3`` inserting the same encoded rows with the same pragmas in
one transaction per batch, and a raw file append + fsync of the same encoded lines.
With ``--postgres DSN`` (or ``$DSH_TEST_POSTGRES_DSN``) it also measures concurrent
durable appends on PostgreSQL against raw psycopg (see ``storage_postgres.py``).
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

import dshpy
from dshpy.core.events import encode_event
from dshpy.storage.urls import _BACKENDS
from support import realistic_events, whole_turns

ROUNDS = 5


def backends(root: Path) -> dict[str, str]:
    urls = {"sqlite": f"sqlite:///{root}/bench.db"}
    if "jsonl" in _BACKENDS:
        urls["jsonl"] = f"jsonl:///{root}/jsonl-plain?compression=none"
        urls["jsonl+zstd"] = f"jsonl:///{root}/jsonl-zstd?compression=zstd"
    return urls


def dshpy_appends(url: str, events: list[dshpy.SessionEvent], batch: int) -> float:
    """Events/s through a live session: append (with validation) + flush every ``batch`` events.

    ``close()`` is timed too: it writes the projection cache rows the appends left due.
    """
    store = dshpy.open_store(url)
    session = store.create(cwd="/bench")
    start = time.perf_counter()
    for index, event in enumerate(events, 1):
        session.append(event.type, event.data, surface_op=event.surface_op, source_event_seqs=event.source_event_seqs)
        if index % batch == 0:
            session.flush()
    session.close()
    elapsed = time.perf_counter() - start
    store.close()
    return len(events) / elapsed


def raw_sqlite_appends(path: Path, events: list[dshpy.SessionEvent], batch: int) -> float:
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = FULL")
    db.execute("CREATE TABLE events (session_id TEXT, seq INTEGER, type TEXT, time INTEGER, body BLOB, "
               "PRIMARY KEY (session_id, seq)) STRICT, WITHOUT ROWID")
    start = time.perf_counter()
    for offset in range(0, len(events), batch):
        chunk = events[offset : offset + batch]
        db.execute("BEGIN IMMEDIATE")
        db.executemany("INSERT INTO events VALUES (?, ?, ?, ?, ?)",
                       [("s", e.seq, e.type, e.time, encode_event(e, seq_ranges=False)) for e in chunk])
        db.execute("COMMIT")
    elapsed = time.perf_counter() - start
    db.close()
    return len(events) / elapsed


def raw_file_appends(path: Path, events: list[dshpy.SessionEvent], batch: int) -> float:
    start = time.perf_counter()
    with open(path, "ab") as handle:
        for offset in range(0, len(events), batch):
            chunk = events[offset : offset + batch]
            handle.write(b"".join(encode_event(e) + b"\n" for e in chunk))
            handle.flush()
            os.fsync(handle.fileno())
    return len(events) / (time.perf_counter() - start)


def directory_bytes(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def storage_path(url: str) -> Path:
    location = url.split(":///", 1)[1].split("?", 1)[0]
    return Path(location)


def settle(store: Any) -> None:
    """Fold SQLite's WAL into the main file so that file sizes mean something."""
    database = getattr(store, "_db", None)
    if database is not None:
        database.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def timed(action: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = action()
    return time.perf_counter() - start, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller sizes (a smoke run)")
    parser.add_argument("--json", action="store_true", help="also print one JSON line with every number")
    parser.add_argument(
        "--postgres",
        metavar="DSN",
        default=os.environ.get("DSH_TEST_POSTGRES_DSN"),
        help="also measure PostgreSQL (default: $DSH_TEST_POSTGRES_DSN; skipped when neither is set)",
    )
    parser.add_argument("--appends-only", action="store_true", help="only the durable-append table")
    args = parser.parse_args()
    append_count = 300 if args.quick else 2000
    large = 5_000 if args.quick else 100_000
    results: dict[str, Any] = {"appends": {}, "replay": {}, "fork": {}, "bytes_per_event": {}}
    events = realistic_events(append_count if args.appends_only else max(append_count, large))

    with tempfile.TemporaryDirectory(dir=os.environ.get("DSHPY_BENCH_DIR")) as tmp:
        root = Path(tmp)
        print(f"durable appends ({append_count} realistic events), events/s, median of {ROUNDS} alternating rounds")
        print(f"{'backend':<12}{'batch':>6}{'dshpy':>10}{'raw':>10}{'ratio':>8}")
        for batch in (5, 1):
            for name, url in backends(root / f"append-{batch}").items():
                ours_runs: list[float] = []
                raw_runs: list[float] = []
                for round_ in range(ROUNDS):
                    tag = f"{name}-{batch}-{round_}"
                    if name == "sqlite":
                        raw_runs.append(raw_sqlite_appends(root / f"raw-{tag}.db", events[:append_count], batch))
                    else:
                        raw_runs.append(raw_file_appends(root / f"raw-{tag}.jsonl", events[:append_count], batch))
                    ours_runs.append(dshpy_appends(url.replace(f"append-{batch}", f"append-{tag}"),
                                                   events[:append_count], batch))
                ours, raw = statistics.median(ours_runs), statistics.median(raw_runs)
                results["appends"][f"{name}/batch{batch}"] = {"dshpy": ours, "raw": raw, "ratio": ours / raw}
                print(f"{name:<12}{batch:>6}{ours:>10.0f}{raw:>10.0f}{ours / raw:>8.2f}")

        if args.appends_only:
            if args.json:
                print(orjson.dumps(results, option=orjson.OPT_NON_STR_KEYS).decode())
            return
        print(f"\nopen/replay, fork and size of a {large}-event session")
        print(f"{'backend':<12}{'replay ev/s':>12}{'fork 1k ms':>11}{'fork big ms':>12}{'fork +B 1k':>11}"
              f"{'fork +B big':>12}{'B/event':>9}")
        for name, url in backends(root / "big").items():
            store = dshpy.open_store(url)
            sessions = {}
            for size in (1_000, large):
                session = store.create(cwd="/bench")
                session.append_events(whole_turns(events, size))
                session.flush()
                session.close()
                sessions[size] = session.id
            path = storage_path(url)
            settle(store)
            before_all = directory_bytes(path)
            cold = dshpy.open_store(url)  # a fresh store object: no scan or statement cache from the writes above
            replay_s, replayed = timed(lambda store=cold, sid=sessions[large]: store.open(sid))
            replayed.close()
            cold.close()
            fork_ms: dict[int, float] = {}
            fork_bytes: dict[int, int] = {}
            for size, session_id in sessions.items():
                settle(store)
                before = directory_bytes(path)
                elapsed, _ = timed(lambda store=store, sid=session_id: store.fork_stored(sid))
                settle(store)
                fork_ms[size] = elapsed * 1000
                fork_bytes[size] = directory_bytes(path) - before
            per_event = before_all / (1_000 + large)
            results["replay"][name] = large / replay_s
            results["fork"][name] = {"ms": fork_ms, "added_bytes": fork_bytes}
            results["bytes_per_event"][name] = per_event
            print(f"{name:<12}{large / replay_s:>12.0f}{fork_ms[1_000]:>11.2f}{fork_ms[large]:>12.2f}"
                  f"{fork_bytes[1_000]:>11}{fork_bytes[large]:>12}{per_event:>9.0f}")
            store.close()
    if args.postgres:
        from storage_postgres import run as run_postgres  # needs the [postgres] extra

        per_writer = whole_turns(events, 200 if args.quick else 1000)
        results["postgres"] = run_postgres(
            args.postgres,
            per_writer,
            rounds=ROUNDS,
            small=whole_turns(events, 1_000),
            large=whole_turns(events, large),
        )
    if args.json:
        print(orjson.dumps(results, option=orjson.OPT_NON_STR_KEYS).decode())


if __name__ == "__main__":
    sys.exit(main())
