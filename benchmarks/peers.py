"""dshpy's stores beside raw baselines and the OpenAI Agents SDK's ``SQLiteSession``, on one agent workload.

Run: .venv/bin/python benchmarks/peers.py [--items N] [--json]

The workload is ``agent_items.py``'s: cycles of a user message, the assistant's answer
asking for a tool, the tool call and the tool's result (four items; dshpy writes them
as the dsh v4 events of one turn, brackets included). Every store gets the same items:

* ``dshpy sqlite``, ``dshpy jsonl`` and ``dshpy jsonl+zstd`` through a live session
  (``append`` + ``flush``: durable at each flush);
* ``raw sqlite3``: the items' JSON (orjson) in a ``(session_id, seq)`` table, WAL,
  ``synchronous=FULL``, one transaction per append — the floor for a SQLite store;
* ``raw jsonl``: the items' JSON lines appended to one file, ``fsync`` per append;
* ``agents SQLiteSession``: ``add_items`` of the OpenAI Agents SDK (``pip install
  openai-agents``; the column is skipped, with the reason printed, when it is missing).

Measured, each in one run on the same disk (the machine is shared: compare the ratios):
appends per item and per turn (items/s, p50 and p99 of one durable append), the per-item
append's p50 over the first 100 items, around 1k and around 10k (cost growth), replay
(every item read back through a fresh handle; dshpy's store is opened before the clock starts), resume (open a
fresh handle and load the history; dshpy opens the store and the session and derives its message list) and bytes per
item on disk after close (and as a multiple of the payload: the items' compact JSON).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

import orjson

import dshpy
from agent_items import ITEM_EVENTS, Cycle, cycles, dshpy_events, payload_bytes


class Peer(Protocol):
    """One store under test: a fresh one per run, appends of items, then reads of them."""

    name: str

    def start(self, root: Path) -> None: ...
    def append(self, cycle: Cycle, turn: int, items: tuple[int, ...]) -> None: ...
    def finish(self) -> None: ...
    def replay(self) -> float: ...
    def resume(self) -> float: ...
    def files(self) -> list[Path]: ...


class DshpyPeer:
    """A dshpy store through its public API: a live session, ``append`` per event, ``flush`` per append."""

    def __init__(self, name: str, url: str) -> None:
        self.name = name
        self._url = url

    def start(self, root: Path) -> None:
        self._location = root / self.name.replace(" ", "-")
        self.url = self._url.format(root=self._location)
        self._location.mkdir(parents=True, exist_ok=True)
        self.store = dshpy.open_store(self.url)
        self.session = self.store.create(cwd="/bench")
        self.id = self.session.id
        self._pending: dict[int, list[tuple[str, dict[str, Any], str | None, bool]]] = {}

    def append(self, cycle: Cycle, turn: int, items: tuple[int, ...]) -> None:
        events = self._pending.get(turn) or dshpy_events(cycle, turn)
        self._pending = {turn: events}
        session = self.session
        previous = None
        for item in items:
            for index in ITEM_EVENTS[item]:
                kind, data, surface_op, cites = events[index]
                seqs = [session.events[-1].seq] if cites else None
                previous = session.append(kind, data, surface_op=surface_op, source_event_seqs=seqs)
        assert previous is not None
        session.flush()

    def finish(self) -> None:
        self.session.close()
        self.store.close()

    def replay(self) -> float:
        store = dshpy.open_store(self.url)  # a fresh handle (nothing cached), opened before the clock starts
        try:
            start = time.perf_counter()
            read = sum(1 for _ in store.read(self.id))
            elapsed = time.perf_counter() - start
        finally:
            store.close()
        assert read > 0
        return elapsed

    def resume(self) -> float:
        start = time.perf_counter()
        store = dshpy.open_store(self.url)
        try:
            session = store.open(self.id)
            assert session.derive_messages()
            elapsed = time.perf_counter() - start
            session.close()
        finally:
            store.close()
        return elapsed

    def files(self) -> list[Path]:
        return [p for p in self._location.rglob("*") if p.is_file()]


class RawSqlitePeer:
    """The items' JSON in one table, nothing else: what any SQLite store must at least write."""

    name = "raw sqlite3"

    def start(self, root: Path) -> None:
        self.path = root / "raw.db"
        self.db = self._connect()
        self.db.execute(
            "CREATE TABLE items (session_id TEXT NOT NULL, seq INTEGER NOT NULL, body BLOB NOT NULL, "
            "PRIMARY KEY (session_id, seq)) STRICT"
        )
        self.seq = 0

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, isolation_level=None)
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = FULL")
        return db

    def append(self, cycle: Cycle, turn: int, items: tuple[int, ...]) -> None:
        rows = [("s", self.seq + n, orjson.dumps(cycle.items[item])) for n, item in enumerate(items)]
        self.seq += len(rows)
        self.db.execute("BEGIN IMMEDIATE")
        self.db.executemany("INSERT INTO items VALUES (?, ?, ?)", rows)
        self.db.execute("COMMIT")

    def finish(self) -> None:
        self.db.close()

    def replay(self) -> float:
        start = time.perf_counter()
        db = self._connect()
        try:
            rows = db.execute("SELECT body FROM items WHERE session_id = 's' ORDER BY seq").fetchall()
            assert [orjson.loads(row[0]) for row in rows]
        finally:
            db.close()
        return time.perf_counter() - start

    resume = replay

    def files(self) -> list[Path]:
        return [p for p in self.path.parent.glob("raw.db*") if p.is_file()]


class RawJsonlPeer:
    """The items' JSON lines appended to one file, ``fsync`` per append."""

    name = "raw jsonl"

    def start(self, root: Path) -> None:
        self.path = root / "raw.jsonl"
        self.handle = open(self.path, "ab")  # noqa: SIM115 (held open for the whole run)

    def append(self, cycle: Cycle, turn: int, items: tuple[int, ...]) -> None:
        self.handle.write(b"".join(orjson.dumps(cycle.items[item]) + b"\n" for item in items))
        self.handle.flush()
        os.fsync(self.handle.fileno())

    def finish(self) -> None:
        self.handle.close()

    def replay(self) -> float:
        start = time.perf_counter()
        assert [orjson.loads(line) for line in self.path.read_bytes().splitlines()]
        return time.perf_counter() - start

    resume = replay

    def files(self) -> list[Path]:
        return [self.path]


class AgentsSessionPeer:
    """The OpenAI Agents SDK's ``SQLiteSession`` (WAL; its own JSON encoding and thread hop per call)."""

    name = "agents SQLiteSession"

    def __init__(self) -> None:
        from agents import SQLiteSession

        self._kind = SQLiteSession
        self._loop = asyncio.new_event_loop()

    def start(self, root: Path) -> None:
        self.path = root / "agents.db"
        self.session = self._kind("s", self.path)

    def append(self, cycle: Cycle, turn: int, items: tuple[int, ...]) -> None:
        self._loop.run_until_complete(self.session.add_items([cycle.items[item] for item in items]))  # type: ignore[list-item]

    def finish(self) -> None:
        self.session.close()

    def replay(self) -> float:
        start = time.perf_counter()
        session = self._kind("s", self.path)
        try:
            assert self._loop.run_until_complete(session.get_items())
        finally:
            session.close()
        return time.perf_counter() - start

    resume = replay

    def files(self) -> list[Path]:
        return [p for p in self.path.parent.glob("agents.db*") if p.is_file()]


def peers() -> tuple[list[Peer], str | None]:
    """Every store, and why the SDK's column is missing (if it is)."""
    made: list[Peer] = [
        DshpyPeer("dshpy sqlite", "sqlite:///{root}/dshpy.db"),
        DshpyPeer("dshpy jsonl", "jsonl:///{root}?compression=none"),
        DshpyPeer("dshpy jsonl+zstd", "jsonl:///{root}?compression=zstd"),
        RawSqlitePeer(),
        RawJsonlPeer(),
    ]
    try:
        made.append(AgentsSessionPeer())
    except ImportError as error:
        return made, f"agents SQLiteSession skipped: openai-agents is not installed ({error})"
    return made, None


def appends(made: list[Cycle], per_turn: bool) -> Iterator[tuple[Cycle, int, tuple[int, ...]]]:
    for turn, cycle in enumerate(made, 1):
        if per_turn:
            yield cycle, turn, (0, 1, 2, 3)
        else:
            for item in range(4):
                yield cycle, turn, (item,)


def run_appends(peer: Peer, root: Path, made: list[Cycle], per_turn: bool) -> list[float]:
    """Seconds of each durable append, in order."""
    peer.start(root)
    latencies: list[float] = []
    clock = time.perf_counter
    gc.collect()
    for cycle, turn, items in appends(made, per_turn):
        start = clock()
        peer.append(cycle, turn, items)
        latencies.append(clock() - start)
    peer.finish()
    return latencies


def best_of(action: Callable[[], float], rounds: int) -> float:
    """The fastest of ``rounds`` runs of ``action`` (which times itself)."""
    times = []
    for _ in range(rounds):
        gc.collect()
        times.append(action())
    return min(times)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def growth(latencies: list[float]) -> dict[int, float]:
    """p50 of one per-item append over the 100 items around the 100th, 1,000th and 10,000th (those reached; the
    last 100 for the largest mark reached)."""
    found: dict[int, float] = {}
    for mark in (100, 1_000, 10_000):
        if len(latencies) >= mark:
            low = max(0, min(mark - 50, len(latencies) - 100))
            found[mark] = statistics.median(latencies[low : low + 100])
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=10_000, help="items per store (a multiple of 4; default 10k)")
    parser.add_argument("--rounds", type=int, default=3, help="replay/resume: best of this many")
    parser.add_argument("--json", action="store_true", help="also print one JSON line with every number")
    args = parser.parse_args()
    made = cycles(max(1, args.items // 4))
    items = 4 * len(made)
    payload = payload_bytes(made)
    stores, skipped = peers()
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(dir=os.environ.get("DSHPY_BENCH_DIR")) as tmp:
        for peer in stores:
            row: dict[str, Any] = {}
            per_item = run_appends(peer, Path(tmp) / "item", made, per_turn=False)
            row["item"] = per_item
            row["growth"] = growth(per_item)
            per_turn = run_appends(peer, Path(tmp) / "turn", made, per_turn=True)
            row["turn"] = per_turn
            row["replay"] = best_of(peer.replay, args.rounds)
            row["resume"] = best_of(peer.resume, args.rounds)
            row["bytes"] = sum(p.stat().st_size for p in peer.files())
            results[peer.name] = row
            print(f"  measured {peer.name}", file=sys.stderr)
    print(f"workload: {items} items ({len(made)} cycles), payload {payload / items:,.0f} B/item (items' compact JSON)")
    if skipped:
        print(skipped)
    raw = results["raw sqlite3"]
    print(
        f"{'store':<22}{'item/s':>9}{'p50 ms':>8}{'p99 ms':>8}{'turn it/s':>10}{'p50 ms':>8}{'p99 ms':>8}"
        f"{'replay ms':>10}{'resume ms':>10}{'B/item':>8}{'×payload':>9}"
    )
    for name, row in results.items():
        item_rate = len(row["item"]) / sum(row["item"])
        turn_rate = 4 * len(row["turn"]) / sum(row["turn"])
        print(
            f"{name:<22}{item_rate:>9,.0f}{pct(row['item'], 0.5) * 1e3:>8.2f}{pct(row['item'], 0.99) * 1e3:>8.2f}"
            f"{turn_rate:>10,.0f}{pct(row['turn'], 0.5) * 1e3:>8.2f}{pct(row['turn'], 0.99) * 1e3:>8.2f}"
            f"{row['replay'] * 1e3:>10.1f}{row['resume'] * 1e3:>10.1f}{row['bytes'] / items:>8,.0f}"
            f"{row['bytes'] / payload:>9.2f}"
        )
    print("\nratios to raw sqlite3 (throughput: higher is better; time and bytes: lower is better)")
    print(
        f"{'store':<22}{'item/s':>8}{'turn it/s':>10}{'replay':>8}{'resume':>8}{'bytes':>7}"
        f"{'growth 1k/100':>14}{'10k/100':>8}"
    )
    for name, row in results.items():
        marks = row["growth"]
        print(
            f"{name:<22}{sum(raw['item']) / sum(row['item']):>8.2f}{sum(raw['turn']) / sum(row['turn']):>10.2f}"
            f"{row['replay'] / raw['replay']:>8.2f}{row['resume'] / raw['resume']:>8.2f}"
            f"{row['bytes'] / raw['bytes']:>7.2f}"
            f"{marks.get(1_000, float('nan')) / marks[100]:>14.2f}{marks.get(10_000, float('nan')) / marks[100]:>8.2f}"
        )
    if args.json:
        summary = {
            name: {
                "item_p50": pct(row["item"], 0.5),
                "item_p99": pct(row["item"], 0.99),
                "turn_p50": pct(row["turn"], 0.5),
                "turn_p99": pct(row["turn"], 0.99),
                "replay": row["replay"],
                "resume": row["resume"],
                "bytes_per_item": row["bytes"] / items,
                "growth": row["growth"],
            }
            for name, row in results.items()
        }
        print(json.dumps({"items": items, "payload_per_item": payload / items, "stores": summary}))


if __name__ == "__main__":
    main()
