"""Full-text search on SQLite: query latency, index size, what the index adds to a durable append, rebuild time.

Run: .venv/bin/python benchmarks/search.py [--sessions N] [--events-per-session M] [--full] [--json]

The default corpus is 1,000 sessions of about 100 events (100k events) and runs in a
few minutes on 2 cores; ``--full`` is the issue's 10,000 sessions / 1M events. The
corpus is synthetic but shaped like agent work: prompts, replies that call tools,
tool calls with JSON arguments, tool output (code, logs, stack traces), failed
results with error codes, turn after turn, in one SQLite store written through live
sessions (one durable flush per session while building).

Measured, each in the same run (the machine is shared, absolute numbers drift):

* **search latency** — :meth:`SessionQuery.search` end to end (checking the query,
  FTS5 + bm25, the page of 20, snippets), p50/p95 over a mix of queries: a common
  word, a rare word, two- and three-word phrases and code identifiers taken from the
  corpus, and words that occur nowhere; across all sessions and within one session;
* **index size** — bytes of the index's tables and their indexes (``dbstat``) per
  stored event and per indexed event, beside the bytes of the log itself;
* **append cost** — the time of a durable append (one turn's 12 events appended
  and flushed, the agent loop's cadence) into the full store, with the index and with
  it switched off for the same kind of turn, alternating turn by turn (medians): the
  index's share of a durable append, and of the flush alone; and two measures a
  loaded machine does not move: the append's CPU time (this thread's, system time
  included) and the bytes its commit adds to the WAL (the pages it writes and syncs);
* **rebuild** — :meth:`SessionQuery.rebuild_index` over the whole store;
* with ``--semantic`` (needs ``pip install 'dshpy[semantic]'``): **embedding** — the
  local model embedding every indexed event's text from scratch (texts a second, the
  whole catch-up including reading the logs, and the model alone on the same texts),
  and **semantic / hybrid latency** — p50/p95 of ``search(mode="semantic")`` and
  ``search(mode="hybrid")`` over the same query mix, across all sessions.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import dshpy
from dshpy.log import records
from dshpy.query import SessionQuery
from dshpy.storage import sqlite as sqlite_module
from dshpy.testing.builders import assistant_data, user_message
from support import no_gc

QUERIES = 200

_VERBS = [
    "fix",
    "add",
    "remove",
    "rename",
    "refactor",
    "test",
    "debug",
    "explain",
    "optimize",
    "document",
    "migrate",
    "deploy",
    "review",
]
_NOUNS = [
    "parser",
    "tokenizer",
    "cache",
    "index",
    "scheduler",
    "migration",
    "endpoint",
    "handler",
    "session",
    "lease",
    "writer",
    "reader",
    "config",
    "logger",
    "socket",
    "buffer",
    "queue",
    "worker",
    "request",
    "response",
    "header",
    "payload",
    "schema",
    "table",
    "cursor",
    "snapshot",
    "projection",
    "checkpoint",
    "fork",
    "surface",
    "stream",
    "chunk",
    "frame",
    "retry",
    "timeout",
]
_ADJECTIVES = [
    "slow",
    "flaky",
    "broken",
    "stale",
    "missing",
    "duplicate",
    "corrupt",
    "async",
    "nested",
    "empty",
    "large",
    "concurrent",
]
_ERRORS = [
    "KeyError",
    "TypeError",
    "ValueError",
    "TimeoutError",
    "ConnectionResetError",
    "PermissionError",
    "IntegrityError",
    "OperationalError",
    "AssertionError",
    "RecursionError",
]
_FILES = [
    "store.py",
    "session.py",
    "sqlite.py",
    "jsonl.py",
    "surface.py",
    "loop.py",
    "client.py",
    "server.py",
    "cli.py",
    "fork.py",
]


def _identifier(rng: random.Random) -> str:
    return f"{rng.choice(_VERBS)}_{rng.choice(_NOUNS)}"


def _sentence(rng: random.Random, words: int) -> str:
    parts = []
    for _ in range(words):
        roll = rng.random()
        if roll < 0.35:
            parts.append(rng.choice(_NOUNS))
        elif roll < 0.5:
            parts.append(rng.choice(_ADJECTIVES))
        elif roll < 0.6:
            parts.append(rng.choice(_VERBS))
        elif roll < 0.66:
            parts.append(_identifier(rng))
        elif roll < 0.7:
            parts.append(f"w{rng.randrange(50_000)}")  # a long tail of rare words
        else:
            parts.append(rng.choice(("the", "a", "in", "of", "to", "and", "is", "when", "after", "with")))
    return " ".join(parts).capitalize() + "."


def _tool_output(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.4:
        name = _identifier(rng)
        return f"def {name}(self, value):\n    return self._{rng.choice(_NOUNS)}.get(value)\n" * rng.randint(1, 4)
    if kind < 0.7:
        error = rng.choice(_ERRORS)
        return (
            f'Traceback (most recent call last):\n  File "{rng.choice(_FILES)}", line {rng.randint(1, 900)}, in '
            f"{_identifier(rng)}\n{error}: {_sentence(rng, 6)}"
        )
    return "\n".join(f"{rng.choice(_FILES)}:{rng.randint(1, 900)}: {_sentence(rng, 5)}" for _ in range(3))


Step = tuple[str, dict[str, Any], bool, bool]
"""One event of a turn: type, data, whether it goes on the surface, whether it cites the event before it."""


def turn_steps(number: int, rng: random.Random) -> list[Step]:
    """One turn in the agent loop's order: 12 events, 6 of them with text (made before any timing starts)."""
    call = f"call-{number}-{rng.randrange(1 << 30)}"
    arguments = json.dumps({"path": rng.choice(_FILES), "pattern": _identifier(rng)})
    failed = rng.random() < 0.1
    result = records.tool_result_data(
        number,
        1,
        call,
        [{"type": "text", "text": _tool_output(rng)}],
        is_error=failed,
        error={"name": "ToolError", "code": "E_TOOL_FAILED"} if failed else None,
    )
    reply = assistant_data(number, 1, _sentence(rng, 12), tool_calls=[(call, "search_code", arguments)])
    return [
        ("turn/start", {"turn": number}, False, False),
        ("step/start", {"turn": number, "step": 1}, False, False),
        ("user/message", user_message(_sentence(rng, rng.randint(6, 20))), True, False),
        ("request/context", records.request_context_data("deepseek", "deepseek-chat", 128000), False, False),
        ("assistant/message", reply, True, False),
        ("tool/call", records.tool_call_data(number, 1, call, "search_code", arguments), False, False),
        ("tool/result", result, True, True),
        ("step/end", {"turn": number, "step": 1}, False, False),
        ("step/start", {"turn": number, "step": 2}, False, False),
        ("assistant/message", assistant_data(number, 2, _sentence(rng, 25)), True, False),
        ("step/end", {"turn": number, "step": 2}, False, False),
        ("turn/end", {"turn": number, "reason": {"kind": "completed"}}, False, False),
    ]


def play(session: dshpy.Session, steps: list[Step]) -> None:
    for kind, data, surface, cites in steps:
        sources = [session.next_seq - 1] if cites else None
        session.append(kind, data, surface_op="append" if surface else None, source_event_seqs=sources)


def turn(session: dshpy.Session, rng: random.Random) -> None:
    play(session, turn_steps(session.next_turn, rng))


def build(store: dshpy.SessionStore, sessions: int, per_session: int, rng: random.Random) -> list[str]:
    ids = []
    started = time.perf_counter()
    for index in range(sessions):
        with store.create(cwd=f"/work/project-{index % 20}") as session:
            while len(session.events) + 12 <= per_session:
                turn(session, rng)
        ids.append(session.id)
        if (index + 1) % max(1, sessions // 10) == 0:
            rate = (index + 1) / (time.perf_counter() - started)
            print(f"  built {index + 1}/{sessions} sessions ({rate:.0f}/s)", file=sys.stderr)
    return ids


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50_ms": round(1000 * statistics.median(ordered), 3),
        "p95_ms": round(1000 * ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))], 3),
        "max_ms": round(1000 * ordered[-1], 3),
    }


def queries(store: dshpy.SessionStore, ids: list[str], rng: random.Random, count: int) -> list[str]:
    """A mix: common and rare words, phrases and identifiers lifted from stored prompts, and absent words."""
    texts: list[str] = []
    for session_id in rng.sample(ids, min(len(ids), 50)):
        texts += [e.data["content"][0]["text"] for e in store.read_types(session_id, ["user/message"])]
    mix: list[str] = []
    while len(mix) < count:
        words = rng.choice(texts).rstrip(".").split()
        roll = rng.random()
        if roll < 0.2:
            mix.append(rng.choice(_NOUNS))
        elif roll < 0.35:
            mix.append(f"w{rng.randrange(50_000)}")
        elif roll < 0.75 and len(words) >= 3:
            start = rng.randrange(len(words) - 2)
            mix.append(" ".join(words[start : start + rng.choice((2, 3))]))
        elif roll < 0.9:
            mix.append(_identifier(rng))
        else:
            mix.append(f"absent{rng.randrange(1000)}")
    return mix


def timed_searches(search: Callable[[str], Any], mix: list[str]) -> tuple[list[float], int]:
    for text in mix[:10]:
        search(text)
    samples, hits = [], 0
    with no_gc():
        for text in mix:
            started = time.perf_counter()
            page = search(text)
            samples.append(time.perf_counter() - started)
            hits += len(page.hits)
    return samples, hits


def index_bytes(path: Path) -> tuple[int, int]:
    """Bytes of the search tables (and their indexes), and of everything else, from ``dbstat``."""
    import sqlite3

    db = sqlite3.connect(path)
    rows = db.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name").fetchall()
    owners = dict(db.execute("SELECT name, tbl_name FROM sqlite_schema").fetchall())
    db.close()
    search = sum(size for name, size in rows if owners.get(name, name).startswith("search_"))
    return search, sum(size for _, size in rows) - search


@contextmanager
def index_switched_off() -> Iterator[None]:
    """Appends as they were before the index: no text rows (the same code path, the same transaction)."""
    real = sqlite_module.text_rows
    sqlite_module.text_rows = lambda events: []
    try:
        yield
    finally:
        sqlite_module.text_rows = real


def append_costs(store: dshpy.SessionStore, path: Path, rng: random.Random, turns: int) -> dict[str, float]:
    """Median microseconds of a durable append (one turn's 12 appends and their flush) with the index and
    without it, alternating turn by turn between two live sessions of the same store, so both see the same
    disk at the same moments; the flush alone is timed too, and two measures the machine's load does not move:
    the CPU time of the append (this thread's) and the bytes its commit wrote to the WAL (checkpoints held off
    while measuring, so the WAL only grows)."""
    indexed, plain = store.create(cwd="/bench/indexed"), store.create(cwd="/bench/plain")
    wal = path.with_name(path.name + "-wal")
    db = store._db  # type: ignore[attr-defined]
    db.execute("PRAGMA wal_autocheckpoint = 0")
    parts = ("", "_flush", "_cpu", "_wal")
    timings: dict[str, list[float]] = {f"{name}{part}": [] for name in ("indexed", "plain") for part in parts}
    with no_gc():
        for number in range(1, turns + 1):
            for name, session in (("indexed", indexed), ("plain", plain)):
                steps = turn_steps(number, rng)
                with contextlib.ExitStack() as stack:
                    if name == "plain":
                        stack.enter_context(index_switched_off())
                    wal_before = wal.stat().st_size
                    cpu = time.thread_time()
                    started = time.perf_counter()
                    play(session, steps)
                    flushing = time.perf_counter()
                    session.flush()
                    done = time.perf_counter()
                    cpu_done = time.thread_time()
                timings[name].append(done - started)
                timings[f"{name}_flush"].append(done - flushing)
                timings[f"{name}_cpu"].append(cpu_done - cpu)
                timings[f"{name}_wal"].append((wal.stat().st_size - wal_before) / 1e6)
    db.execute("PRAGMA wal_autocheckpoint = 1000")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    indexed.close()
    plain.close()
    return {
        name: 1e6 * (statistics.mean if name.endswith("_wal") else statistics.median)(values)
        for name, values in timings.items()
    }


def semantic_costs(store: dshpy.SessionStore, mix: list[str], scratch: Path) -> dict[str, Any]:
    """Embedding throughput (the catch-up and the model alone) and semantic/hybrid search latency."""
    from dshpy.query.embedder_static import StaticModelEmbedder
    from dshpy.query.vector_store import VectorStore

    embedder = StaticModelEmbedder()
    embedder.embed(["warm up"])
    query = SessionQuery(store, embedder=embedder, vectors=VectorStore(scratch / "vectors.db"))
    started = time.perf_counter()
    embedded = query.semantic.sync()
    sync_s = time.perf_counter() - started
    texts = [chunk.text[:2000] for chunk, _ in query.semantic.vectors.chunks(embedder.name, None)][:embedded]
    started = time.perf_counter()
    for at in range(0, len(texts), 2048):
        embedder.embed(texts[at : at + 2048])
    model_s = time.perf_counter() - started
    semantic, _ = timed_searches(lambda text: query.search(text, mode="semantic"), mix)
    hybrid, _ = timed_searches(lambda text: query.search(text, mode="hybrid"), mix)
    chunks, vectors = query.semantic.vectors.count()
    return {
        "embedding": {
            "texts": embedded,
            "catch_up_s": round(sync_s, 1),
            "catch_up_texts_per_s": round(embedded / sync_s),
            "model_texts_per_s": round(len(texts) / model_s),
            "chunks": chunks,
            "vectors": vectors,
        },
        "search_semantic": percentiles(semantic),
        "search_hybrid": percentiles(hybrid),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--events-per-session", type=int, default=100)
    parser.add_argument("--full", action="store_true", help="10,000 sessions / 1M events")
    parser.add_argument("--queries", type=int, default=QUERIES)
    parser.add_argument("--append-turns", type=int, default=1000, help="turns appended with and without the index")
    parser.add_argument("--dir", help="where to build the store (default: a temporary directory)")
    parser.add_argument("--semantic", action="store_true", help="also embedding throughput and semantic/hybrid latency")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.full:
        args.sessions, args.events_per_session = 10_000, 100
    rng = random.Random(20240614)
    with tempfile.TemporaryDirectory(dir=args.dir) as scratch:
        path = Path(scratch) / "search.db"
        store = dshpy.open_store(f"sqlite:///{path}")
        started = time.perf_counter()
        ids = build(store, args.sessions, args.events_per_session, rng)
        build_s = time.perf_counter() - started
        query = SessionQuery(store)
        status = query.index_status()
        events = sum(info.event_count for info in store.list())
        mix = queries(store, ids, rng, args.queries)
        across, across_hits = timed_searches(query.search, mix)
        within, _ = timed_searches(lambda text: query.search(text, session_id=rng.choice(ids)), mix)
        filtered, _ = timed_searches(lambda text: query.search(text, filters={"cwd": "/work/project-3"}), mix)
        search_bytes, log_bytes = index_bytes(path)
        meaning = semantic_costs(store, mix, Path(scratch)) if args.semantic else None
        costs = append_costs(store, path, rng, args.append_turns)
        rebuild_started = time.perf_counter()
        rebuilt = query.rebuild_index()
        rebuild_s = time.perf_counter() - rebuild_started
        store.close()
    report = {
        "corpus": {
            "sessions": args.sessions,
            "events": events,
            "indexed_events": status.documents,
            "build_s": round(build_s, 1),
        },
        "search_all_sessions": {**percentiles(across), "mean_hits": round(across_hits / len(mix), 1)},
        "search_one_session": percentiles(within),
        "search_cwd_filter": percentiles(filtered),
        "index_size": {
            "index_bytes": search_bytes,
            "log_bytes": log_bytes,
            "bytes_per_event": round(search_bytes / max(1, events), 1),
            "bytes_per_indexed_event": round(search_bytes / max(1, status.documents or 1), 1),
            "share_of_file": round(search_bytes / max(1, search_bytes + log_bytes), 3),
        },
        "durable_append": {
            "events_per_flush": 12,
            "us_with_index": round(costs["indexed"]),
            "us_without_index": round(costs["plain"]),
            "index_cost": round(costs["indexed"] / costs["plain"] - 1, 3),
            "flush_us_with_index": round(costs["indexed_flush"]),
            "flush_us_without_index": round(costs["plain_flush"]),
            "cpu_us_with_index": round(costs["indexed_cpu"]),
            "cpu_us_without_index": round(costs["plain_cpu"]),
            "cpu_cost": round(costs["indexed_cpu"] / costs["plain_cpu"] - 1, 3),
            "wal_bytes_with_index": round(costs["indexed_wal"]),
            "wal_bytes_without_index": round(costs["plain_wal"]),
            "wal_cost": round(costs["indexed_wal"] / costs["plain_wal"] - 1, 3),
        },
        "rebuild": {"seconds": round(rebuild_s, 1), "documents": rebuilt.documents},
    }
    if meaning is not None:
        report.update(meaning)
    if args.json:
        print(json.dumps(report, indent=2))
        return
    for section, values in report.items():
        print(f"{section}:")
        for key, value in values.items():
            print(f"  {key}: {value}")


if __name__ == "__main__":
    main()
