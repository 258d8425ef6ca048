"""The PostgreSQL section of benchmarks/storage.py: durable appends from concurrent writers against raw psycopg.

Each writer is a thread with its own session (dshpy) or its own session id (raw), appending the
same realistic events and committing every ``batch`` events. dshpy goes through a live
``Session`` (validation, conditional append: row lock, seq check, insert, NOTIFY, commit)
on one ``PostgresStore`` and its pool; the baseline inserts the same encoded rows with
``executemany`` in one transaction per batch, on one plain connection per thread, into a
table of the same shape. Both are durable (``synchronous_commit`` as the server has it).
"""

from __future__ import annotations

import statistics
import threading
import time
import uuid
from collections.abc import Callable

import psycopg
from psycopg import sql

import dshpy
from dshpy.core.events import encode_event
from dshpy.storage.postgres import PostgresStore
from dshpy.testing.postgres import drop_schema

WRITERS = (1, 4, 16)


def _run_threads(writers: int, work: Callable[[int, threading.Barrier], None]) -> float:
    """Wall time from the moment all ``writers`` are ready until the last one finishes."""
    barrier = threading.Barrier(writers + 1)
    errors: list[BaseException] = []

    def target(index: int) -> None:
        try:
            work(index, barrier)
        except BaseException as error:  # reported below
            errors.append(error)
            barrier.abort()

    threads = [threading.Thread(target=target, args=(i,)) for i in range(writers)]
    for thread in threads:
        thread.start()
    barrier.wait()
    start = time.perf_counter()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return time.perf_counter() - start


def dshpy_writers(store: PostgresStore, events: list[dshpy.SessionEvent], writers: int, batch: int) -> float:
    def work(_index: int, barrier: threading.Barrier) -> None:
        session = store.create(cwd="/bench")
        barrier.wait()
        for count, event in enumerate(events, 1):
            session.append(
                event.type, event.data, surface_op=event.surface_op, source_event_seqs=event.source_event_seqs
            )
            if count % batch == 0:
                session.flush()
        session.close()

    return writers * len(events) / _run_threads(writers, work)


def raw_writers(dsn: str, schema: str, events: list[dshpy.SessionEvent], writers: int, batch: int) -> float:
    insert = sql.SQL("INSERT INTO {}.events VALUES (%s, %s, %s, %s, %s)").format(sql.Identifier(schema))

    def work(_index: int, barrier: threading.Barrier) -> None:
        session_id = f"raw-{uuid.uuid4().hex}"
        with psycopg.connect(dsn, autocommit=True) as conn:
            barrier.wait()
            for offset in range(0, len(events), batch):
                rows = [
                    (session_id, e.seq, e.type, e.time, encode_event(e, seq_ranges=False).decode())
                    for e in events[offset : offset + batch]
                ]
                with conn.transaction(), conn.cursor() as cursor:
                    cursor.executemany(insert, rows)

    return writers * len(events) / _run_threads(writers, work)


def replay_and_fork(store: PostgresStore, small: list[dshpy.SessionEvent], large: list[dshpy.SessionEvent]) -> None:
    """Open (replay) the large session and fork both: zero-copy forks cost the same for either size."""
    ids = {}
    for name, events in (("small", small), ("large", large)):
        session = store.create(cwd="/bench")
        session.append_events(events)
        session.flush()
        session.close()
        ids[name] = session.id
    start = time.perf_counter()
    store.open(ids["large"]).close()
    replay = len(large) / (time.perf_counter() - start)
    fork_ms = {}
    for name, session_id in ids.items():
        start = time.perf_counter()
        store.fork_stored(session_id)
        fork_ms[name] = (time.perf_counter() - start) * 1000
    print(
        f"postgresql: open/replay {len(large)} events {replay:.0f} ev/s; fork of {len(small)} events "
        f"{fork_ms['small']:.2f} ms, of {len(large)} events {fork_ms['large']:.2f} ms"
    )


def run(
    dsn: str,
    events: list[dshpy.SessionEvent],
    *,
    rounds: int,
    batch: int = 5,
    small: list[dshpy.SessionEvent] | None = None,
    large: list[dshpy.SessionEvent] | None = None,
) -> dict[str, dict[str, float]]:
    """Print the table and return ``{"<n> writers": {"dshpy", "raw", "ratio"}}``."""
    tag = uuid.uuid4().hex[:8]
    ours_schema, raw_schema = f"dshpy_bench_{tag}", f"dshpy_bench_raw_{tag}"
    results: dict[str, dict[str, float]] = {}
    store = PostgresStore(dsn, schema=ours_schema, pool_max=max(WRITERS) + 2)
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(raw_schema)))
            conn.execute(
                sql.SQL(
                    "CREATE TABLE {}.events (session_id text NOT NULL, seq bigint NOT NULL, type text NOT NULL, "
                    "time bigint NOT NULL, body text NOT NULL, PRIMARY KEY (session_id, seq))"
                ).format(sql.Identifier(raw_schema))
            )
        print(
            f"\npostgresql durable appends, {len(events)} events per writer, flush per {batch}-event batch, "
            f"events/s (all writers), median of {rounds} alternating rounds"
        )
        print(f"{'writers':<12}{'dshpy':>10}{'raw':>10}{'ratio':>8}")
        for writers in WRITERS:
            ours_runs: list[float] = []
            raw_runs: list[float] = []
            for _ in range(rounds):
                raw_runs.append(raw_writers(dsn, raw_schema, events, writers, batch))
                ours_runs.append(dshpy_writers(store, events, writers, batch))
            ours, raw = statistics.median(ours_runs), statistics.median(raw_runs)
            results[f"{writers} writers"] = {"dshpy": ours, "raw": raw, "ratio": ours / raw}
            print(f"{writers:<12}{ours:>10.0f}{raw:>10.0f}{ours / raw:>8.2f}")
        if small is not None and large is not None:
            replay_and_fork(store, small, large)
    finally:
        store.close()
        drop_schema(dsn, ours_schema)
        drop_schema(dsn, raw_schema)
    return results
