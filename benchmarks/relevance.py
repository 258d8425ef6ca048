"""Search relevance on a labelled synthetic corpus: recall@5 and MRR of full-text, semantic and hybrid search.

Run: .venv/bin/python benchmarks/relevance.py [--json] [--sessions N]   (needs ``pip install 'dshpy[semantic]'``)

The corpus (made here, from a fixed seed, so every run is the same): 240 *facts*, each
a problem in a component of an application (20 components × 12 problems), each told
in one session the way agent work tells it: the user describes the problem, the
assistant calls a tool with the function's identifier, the tool answers with the
error. The other sessions (1,000 in all by default) are the search benchmark's filler
turns (code, logs, tracebacks and prose over the same vocabulary), and every fact
session has filler turns too. Facts share components and problems, so a query must
get both right.

Three queries per fact (720 in all), each labelled with the session that holds it:

* **paraphrase** — the problem in other words, with a synonym for the component
  ("sign-in is very slow and eventually gives up waiting" for "the login request
  times out after thirty seconds");
* **identifier** — the function's name (``fetch_auth``);
* **error** — the error message the tool printed.

A query's hit is relevant when it is an event of the fact's session. recall@5: the
share of queries with a relevant hit in the first 5; MRR: the mean of 1/rank of the
first relevant hit (0 when none is in the first 10); each mode's search latency (p50/p95,
``SessionQuery.search`` end to end, the vectors already caught up). Modes: ``fts`` (the default
literal phrase), ``fts-any`` (any of the query's words, ``a OR b …`` with operators),
``semantic`` (the local model's cosine), ``hybrid`` (RRF of the phrase and the cosine),
``hybrid-any`` (RRF of any-word bm25 and the cosine).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import dshpy
from dshpy.log.search_text import words
from dshpy.query import SessionQuery
from dshpy.query.embedder_static import StaticModelEmbedder
from dshpy.query.vector_store import VectorStore
from dshpy.testing.builders import user_message
from search import Step, percentiles, play, turn_steps

COMPONENTS = [
    ("login", "sign-in", "auth"),
    ("payment", "billing", "billing"),
    ("database", "postgres", "db"),
    ("cache", "redis", "cache"),
    ("email", "mail delivery", "mailer"),
    ("search", "lookup", "search"),
    ("upload", "file transfer", "upload"),
    ("checkout", "purchase flow", "checkout"),
    ("notification", "alerting", "notify"),
    ("report", "export", "report"),
    ("scheduler", "cron job", "scheduler"),
    ("webhook", "callback handler", "webhook"),
    ("invoice", "receipt", "invoice"),
    ("session token", "auth cookie", "token"),
    ("image resize", "thumbnail generation", "thumbs"),
    ("queue worker", "background job", "worker"),
    ("config loader", "settings reader", "config"),
    ("api gateway", "reverse proxy", "gateway"),
    ("user profile", "account page", "profile"),
    ("audit log", "activity history", "audit"),
]
"""(name in the session, the synonym a paraphrase uses, the identifier's stem)."""

PROBLEMS = [
    (
        "the {c} request times out after thirty seconds",
        "{s} is very slow and eventually gives up waiting",
        "fetch",
        "TimeoutError: {m} upstream did not answer within 30s",
    ),
    (
        "the {c} service crashes with a null pointer on startup",
        "{s} dies immediately when it boots because something is missing",
        "init",
        "AttributeError: 'NoneType' object has no attribute '{m}_client'",
    ),
    (
        "{c} returns duplicate rows after the retry",
        "{s} shows the same entry twice when we try again",
        "dedupe",
        'IntegrityError: duplicate key value violates unique constraint "{m}_pkey"',
    ),
    (
        "memory usage of the {c} grows until the process is killed",
        "{s} leaks ram and the oom killer stops it",
        "release",
        "MemoryError: {m} buffer exceeded 4096 MB",
    ),
    (
        "the {c} rejects valid input with a permission denied error",
        "{s} refuses correct data saying access is forbidden",
        "authorize",
        "PermissionError: [Errno 13] Permission denied: '/var/lib/{m}/state'",
    ),
    (
        "{c} tests fail intermittently on ci",
        "{s} checks are flaky in the build pipeline",
        "verify",
        "AssertionError: expected 200 from {m} endpoint, got 503",
    ),
    (
        "the {c} uses the wrong timezone for dates",
        "{s} shows times shifted by hours because of utc offsets",
        "localize",
        "ValueError: naive datetime passed to {m}.schedule_at",
    ),
    (
        "{c} deadlocks when two requests arrive together",
        "{s} hangs forever under concurrent load",
        "lock",
        "OperationalError: deadlock detected while updating {m}_rows",
    ),
    (
        "the {c} config file is not found after deploy",
        "{s} cannot locate its settings once released to production",
        "load",
        "FileNotFoundError: [Errno 2] No such file or directory: '/etc/{m}/config.yaml'",
    ),
    (
        "{c} sends the message twice",
        "{s} delivers every notification two times",
        "send",
        "RuntimeError: {m} delivery acknowledged twice for message 42",
    ),
    (
        "the {c} migration fails on the new column",
        "{s} schema upgrade breaks when adding a field",
        "migrate",
        'ProgrammingError: column "{m}_status" of relation does not exist',
    ),
    (
        "{c} is slow because of an n plus one query",
        "{s} page makes hundreds of small sql calls",
        "prefetch",
        "SlowQueryWarning: {m} issued 512 queries for one page",
    ),
]
"""(statement, paraphrase, identifier verb, error message)."""

MODES = ("fts", "fts-any", "semantic", "hybrid", "hybrid-any")
KINDS = ("paraphrase", "identifier", "error")


def fact_steps(
    number: int, rng: random.Random, component: tuple[str, str, str], problem: tuple[str, ...]
) -> list[Step]:
    """A filler turn rewritten to tell one fact: the prompt, the tool call's identifier, the tool's error."""
    name, _, stem = component
    statement, _, verb, error = problem
    identifier = f"{verb}_{stem}"
    steps = turn_steps(number, rng)
    told: list[Step] = []
    for kind, original, surface, cites in steps:
        data = original
        if kind == "user/message":
            prompt = f"{statement.format(c=name).capitalize()}. Can you find out why and fix it?"
            data = user_message(prompt)
        elif kind == "tool/result":
            text = (
                f'Traceback (most recent call last):\n  File "{stem}/service.py", line {rng.randint(10, 900)}, '
                f"in {identifier}\n{error.format(m=stem)}"
            )
            data = {**data, "message": {**data["message"], "content": [{"type": "text", "text": text}]}}
        told.append((kind, data, surface, cites))
    return told


def build(store: dshpy.SessionStore, sessions: int, rng: random.Random) -> list[tuple[str, str, str]]:
    """The corpus; returns the labelled queries (kind, query, the session that holds the answer)."""
    facts = [(c, p) for c in COMPONENTS for p in PROBLEMS]
    slots = sorted(rng.sample(range(sessions), len(facts)))
    labelled: list[tuple[str, str, str]] = []
    for index in range(sessions):
        with store.create(cwd=f"/work/project-{index % 20}") as session:
            for _ in range(rng.randint(1, 2)):
                play(session, turn_steps(session.next_turn, rng))
            if slots and slots[0] == index:
                slots.pop(0)
                component, problem = facts.pop()
                play(session, fact_steps(session.next_turn, rng, component, problem))
                play(session, turn_steps(session.next_turn, rng))
                labelled += [
                    ("paraphrase", problem[1].format(s=component[1]), session.id),
                    ("identifier", f"{problem[2]}_{component[2]}", session.id),
                    ("error", problem[3].format(m=component[2]), session.id),
                ]
    return labelled


def run_mode(query: SessionQuery, mode: str, text: str) -> list[str]:
    """The sessions of the first 10 hits, in order."""
    if mode.endswith("-any"):
        expression = " OR ".join(words(text))
        hits = query.search(expression, operators=True, limit=10, mode=mode.removesuffix("-any")).hits
    else:
        hits = query.search(text, limit=10, mode=mode).hits
    return [hit.session_id for hit in hits]


def score(found: list[str], target: str) -> tuple[float, float]:
    """(recall@5, reciprocal rank) of one query."""
    rank = next((i for i, session in enumerate(found, start=1) if session == target), None)
    return (1.0 if rank is not None and rank <= 5 else 0.0), (1.0 / rank if rank else 0.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        store = dshpy.open_store(f"sqlite:///{Path(tmp) / 'relevance.db'}")
        labelled = build(store, args.sessions, rng)
        events = sum(info.event_count for info in store.list())
        query = SessionQuery(store, embedder=StaticModelEmbedder(), vectors=VectorStore(Path(tmp) / "vectors.db"))
        started = time.perf_counter()
        embedded = query.semantic.sync()
        embed_seconds = time.perf_counter() - started
        results: dict[str, Any] = {}
        for mode in MODES:
            per_kind: dict[str, list[tuple[float, float]]] = {kind: [] for kind in KINDS}
            took: list[float] = []
            for kind, text, target in labelled:
                started = time.perf_counter()
                found = run_mode(query, mode, text)
                took.append(time.perf_counter() - started)
                per_kind[kind].append(score(found, target))
            every = [pair for pairs in per_kind.values() for pair in pairs]
            results[mode] = {
                name: {
                    "recall@5": round(statistics.fmean(p[0] for p in pairs), 3),
                    "mrr": round(statistics.fmean(p[1] for p in pairs), 3),
                }
                for name, pairs in [("all", every), *per_kind.items()]
            }
            results[mode]["latency_ms"] = percentiles(took)
        store.close()
    report = {
        "sessions": args.sessions,
        "events": events,
        "queries": len(labelled),
        "texts_embedded": embedded,
        "embed_seconds": round(embed_seconds, 2),
        "results": results,
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(
        f"{args.sessions} sessions, {events} events, {len(labelled)} queries; embedded {embedded} texts in "
        f"{embed_seconds:.1f} s",
        file=sys.stderr,
    )
    print(f"{'mode':<12}" + "".join(f"{k + ' R@5':>16}{k + ' MRR':>16}" for k in ("all", *KINDS)))
    for mode, table in results.items():
        cells = "".join(f"{table[k]['recall@5']:>16.3f}{table[k]['mrr']:>16.3f}" for k in ("all", *KINDS))
        print(f"{mode:<12}{cells}   p50/p95 {table['latency_ms']['p50_ms']}/{table['latency_ms']['p95_ms']} ms")


if __name__ == "__main__":
    main()
