"""Projection benchmarks: what the built-in projections cost per append, and what a cache saves on open.

Run: .venv/bin/python benchmarks/projections.py [--quick] [--json] [--only NAME ...]

Sections (``--only`` picks some; each is a function in :data:`SECTIONS` returning a
JSON-able dict that :func:`main` prints and adds to the ``--json`` line):

1. ``per_append`` — the cost of folding one event through all built-in projections
   (``turn_boundary``, ``usage``, ``stats``, ``title``, ``todos``, ``lifecycle``) at
   1k, 10k and 100k events. It must be flat: the runner folds each event once and
   never re-reads the log. Shown beside it: the append itself, and append +
   projections as a caller sees them (the runner attached, its guard included).
2. ``open`` — attaching the built-ins to an opened 100k-event session: a cold fold of
   the whole log, against seeding from cache rows written 50 events before the end
   (what ``store.open`` will do with a warm projection cache), and at the end.
3. ``sessions_list`` — ``dshpy sessions list --json`` over a SQLite store of 10,000
   sessions x 50 events, timed as a whole CLI process (``python -m dshpy``, startup
   and imports included) with a warm projection cache: the median of ``--list-runs``
   runs. Beside it, for scale: the same process running ``dshpy sessions --help`` (the
   fixed cost of starting Python and importing dshpy; the two alternate run by run, as
   the shared machine's speed drifts), ``store.list_projections`` in process, and one
   cold ``list`` after the cache table is emptied (it folds every log and writes the
   rows back). The store is built in bulk through the SQLite store's own row encoders,
   in one transaction, then checkpointed (``--list-sessions`` to change the size).

The log is realistic: TurnScript turns (3 steps, 2 tool calls per step) with a
``todo/write`` after each, replayed event by event with their original seqs. The
sizes take turns in blocks of ``BLOCK`` appends so machine load falls on all alike;
per-append numbers are medians of many single timings, with the cyclic GC off
while timing, as ``timeit`` does.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import orjson

import dshpy
from dshpy.projections import BUILTINS, CachedState, ProjectionRegistry, ProjectionRunner, attach
from dshpy.storage.checksum import cache_row_crc, session_row_crc
from dshpy.storage.projection_cache import rows_of
from dshpy.storage.sqlite import SqliteStore
from dshpy.testing.builders import TurnScript
from support import no_gc

BLOCK = 50
TAIL = 50


def build_log(count: int) -> tuple[dshpy.SessionHeader, list[dshpy.SessionEvent]]:
    session = dshpy.Session.new(cwd="/bench")
    script = TurnScript(session)
    while len(session) < count:
        script.turn(f"turn {session.next_turn}: read the files and report", steps=3, tools_per_step=2)
        session.append("todo/write", {"todos": [{"content": "read", "status": "completed"}]})
    return session.header, list(session.events)


def whole_turns(events: Sequence[dshpy.SessionEvent], count: int) -> list[dshpy.SessionEvent]:
    """The longest prefix of at most ``count`` events that ends between turns."""
    end = max(i for i, e in enumerate(events[:count]) if e.type == "todo/write")
    return list(events[: end + 1])


def median_us(samples: Sequence[float]) -> float:
    return statistics.median(samples) * 1e6


# -- 1. per append -------------------------------------------------------------------------------


def bench_per_append(header: dshpy.SessionHeader, events: list[dshpy.SessionEvent], args: Any) -> dict[str, Any]:
    """Per size: ``appends`` single-event appends to three sessions holding the same prefix.

    ``bare`` has no projections: its appends are timed, then the same event is handed
    to a runner that follows it by hand (``fold``: all built-ins, nothing else).
    ``live`` has the runner attached as a caller has it (``append + projections``).
    """
    registry = ProjectionRegistry(BUILTINS)
    clock = time.perf_counter
    now = [0]  # appends keep each event's original time, so both sessions fold the same log

    def stamp() -> int:
        return now[0]

    lanes: dict[int, dict[str, Any]] = {}
    for size in args.sizes:
        prefix = whole_turns(events, size)
        bare = dshpy.Session(header, prefix, clock=stamp)
        follower = ProjectionRunner(bare, registry)
        follower.detach()  # fed by hand below, so its fold can be timed alone
        live = dshpy.Session(header, prefix, clock=stamp)
        attach(live, registry)
        lanes[size] = {"bare": bare, "follower": follower, "live": live, "next": len(prefix), "start": len(prefix)}
    samples: dict[int, dict[str, list[float]]] = {s: {"append": [], "fold": [], "live": []} for s in args.sizes}
    with no_gc():
        for _ in range(args.appends // BLOCK):
            for size, lane in lanes.items():
                bare, follower, live = lane["bare"], lane["follower"], lane["live"]
                times = samples[size]
                for _ in range(BLOCK):
                    event = events[lane["next"]]
                    lane["next"] += 1
                    kind, data, op, sources = event.type, event.data, event.surface_op, event.source_event_seqs
                    now[0] = event.time
                    t0 = clock()
                    committed = bare.append(kind, data, surface_op=op, source_event_seqs=sources)
                    t1 = clock()
                    follower._on_event(bare, committed)  # the runner's session listener, called directly
                    t2 = clock()
                    live.append(kind, data, surface_op=op, source_event_seqs=sources)
                    t3 = clock()
                    times["append"].append(t1 - t0)
                    times["fold"].append(t2 - t1)
                    times["live"].append(t3 - t2)
    out: dict[str, Any] = {}
    for size, lane in lanes.items():
        times = samples[size]
        with no_gc():  # the live runner folds lazily: what its appends left for the first read
            t0 = clock()
            attach(lane["live"]).sync()
            deferred = clock() - t0
        assert lane["follower"].snapshot() == attach(lane["live"]).snapshot()
        mix: dict[str, int] = {}
        for event in events[lane["start"] : lane["next"]]:
            mix[event.type] = mix.get(event.type, 0) + 1
        out[str(size)] = {
            "events": lane["start"],
            "appended": lane["next"] - lane["start"],
            "fold_us_median": median_us(times["fold"]),
            "fold_us_mean": statistics.fmean(times["fold"]) * 1e6,
            "append_us_median": median_us(times["append"]),
            "append_with_projections_us_median": median_us(times["live"]),
            "deferred_fold_us_per_event": deferred / (lane["next"] - lane["start"]) * 1e6,
            "mix": mix,
        }
    return out


# -- 2. opening with and without a cache ----------------------------------------------------------


def bench_open(header: dshpy.SessionHeader, events: list[dshpy.SessionEvent], args: Any) -> dict[str, Any]:
    registry = ProjectionRegistry(BUILTINS)
    log = whole_turns(events, args.open_size)
    early = dshpy.Session(header, log[: len(log) - TAIL])
    rows_tail = _through_json(attach(early, registry).checkpoint())
    rows_end = _through_json(attach(dshpy.Session(header, log), registry).checkpoint())

    def timed(rows: dict[str, CachedState] | None) -> Callable[[], float]:
        def run() -> float:
            session = dshpy.Session(header, log)  # restoring is the store's cost, not the projections'
            with no_gc():
                t0 = time.perf_counter()
                runner = ProjectionRunner(session, registry, cached=rows)
                elapsed = time.perf_counter() - t0
            expected = "fresh" if rows is None else "cached"
            assert {s.outcome for s in runner.seeding.values()} == {expected}
            return elapsed

        return run

    variants = {"cold_fold": timed(None), f"cache_{TAIL}_behind": timed(rows_tail), "cache_at_end": timed(rows_end)}
    best = {name: min(run() for _ in range(args.rounds)) for name, run in variants.items()}
    return {"events": len(log), **{f"{name}_ms": seconds * 1e3 for name, seconds in best.items()}}


def _through_json(rows: dict[str, CachedState]) -> dict[str, CachedState]:
    raw = orjson.dumps({key: row.to_json() for key, row in rows.items()})
    return {key: CachedState.from_json(value) for key, value in orjson.loads(raw).items()}


# -- 3. sessions list over a big store ------------------------------------------------------------

LIST_EVENTS = 50


def list_template() -> tuple[dshpy.SessionHeader, list[dshpy.SessionEvent]]:
    """A 50-event session of whole turns (1-2 steps, one tool call), padded with ``todo/write``, and a title."""
    session = dshpy.Session.new(cwd="/bench")
    script = TurnScript(session)
    script.turn("read notes.txt and summarize what it says about the release", steps=2, system="Be brief.")
    session.append("session/title", {"title": "Release notes summary", "messageSeqs": [], "source": {"kind": "user"}})
    while len(session) + 10 <= LIST_EVENTS:
        script.turn("and the next item?", steps=1)
    while len(session) < LIST_EVENTS:
        session.append("todo/write", {"todos": [{"content": "read", "status": "completed"}]})
    return session.header, list(session.events)


def build_list_store(path: Path, count: int) -> float:
    """``count`` sessions of the template, with their cache rows, in one transaction; returns the seconds it took."""
    started = time.perf_counter()
    template_header, events = list_template()
    checkpoint = attach(dshpy.Session(template_header, events)).checkpoint()
    store = SqliteStore(path)
    base_time = events[0].time
    try:
        with store._write() as db:
            for index in range(count):
                header = dshpy.SessionHeader.new(
                    f"bench-{index:06d}", cwd="/bench", created_at=base_time - count + index
                )
                raw = orjson.dumps(header.to_record()).decode()
                crc = session_row_crc(header.id, raw, header.created_at, header.cwd, None, None, 0)
                db.execute(
                    "INSERT INTO sessions (id, header, created_at, cwd, parent_session, base_id, base_count, "
                    "next_seq, crc) VALUES (?, ?, ?, ?, NULL, NULL, 0, ?, ?)",
                    (header.id, raw, header.created_at, header.cwd, len(events), crc),
                )
                db.executemany(
                    "INSERT INTO events (session_id, seq, type, time, body, crc) VALUES (?, ?, ?, ?, ?, ?)",
                    store._rows(header.id, events),
                )
                cache_rows = []
                for row in rows_of(header, checkpoint):
                    state = orjson.dumps(row.state)
                    crc = cache_row_crc(
                        header.id.encode(), row.key.encode(), row.state_version, row.seq, state, row.identity.encode()
                    )
                    cache_rows.append(
                        (header.id, row.key, row.state_version, row.seq, state.decode(), row.identity, crc)
                    )
                db.executemany(
                    "INSERT INTO projection_cache (session_id, key, state_version, seq, state, identity, crc) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)",
                    cache_rows,
                )
        store._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # as a long-lived store is: pages in the main file
    finally:
        store.close()
    return time.perf_counter() - started


def run_cli_process(url: str, *args: str) -> tuple[float, bytes]:
    env = {**os.environ, "DSHPY_HOME": str(Path(url.removeprefix("sqlite:///")).parent / "home")}
    env.pop("DSHPY_STORE", None)
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "dshpy", "--store", url, *args], capture_output=True, check=True, env=env
    )
    return time.perf_counter() - t0, done.stdout


def bench_sessions_list(header: dshpy.SessionHeader, events: list[dshpy.SessionEvent], args: Any) -> dict[str, Any]:
    count = args.list_sessions
    with tempfile.TemporaryDirectory(prefix="dshpy-bench-list-") as directory:
        path = Path(directory) / "sessions.db"
        build_s = build_list_store(path, count)
        url = f"sqlite:///{path}"
        run_cli_process(url, "sessions", "--help")  # warm the OS page cache and Python's bytecode cache
        run_cli_process(url, "sessions", "list", "--json")
        help_runs: list[float] = []
        list_runs: list[float] = []
        output = b""
        for _ in range(args.list_runs):  # alternating, so that both see the same machine (a shared VM drifts)
            help_runs.append(run_cli_process(url, "sessions", "--help")[0])
            elapsed, output = run_cli_process(url, "sessions", "list", "--json")
            list_runs.append(elapsed)
        rows = orjson.loads(output)
        assert len(rows) == count and rows[0]["turns"] >= 1 and rows[0]["lifecycle"] == "active", rows[0]
        store = SqliteStore(path)
        try:
            in_process = []
            for _ in range(args.list_runs):
                with no_gc():  # as the CLI runs it (this process also holds the 100k-event log of sections 1-2)
                    t0 = time.perf_counter()
                    listed = store.list_projections(("title", "stats", "lifecycle"))
                    in_process.append(time.perf_counter() - t0)
            assert len(listed) == count
            with store._write() as db:
                db.execute("DELETE FROM projection_cache")
        finally:
            store.close()
        cold_s, _ = run_cli_process(url, "sessions", "list", "--json")  # folds every log, writes the rows back
        rewarmed_s, _ = run_cli_process(url, "sessions", "list", "--json")
    return {
        "sessions": count,
        "events_per_session": LIST_EVENTS,
        "build_s": build_s,
        "runs": args.list_runs,
        "list_warm_s_median": statistics.median(list_runs),
        "list_warm_s_min": min(list_runs),
        "list_warm_s_all": list_runs,
        "help_s_median": statistics.median(help_runs),
        "list_minus_help_s_median": statistics.median(a - b for a, b in zip(list_runs, help_runs, strict=True)),
        "list_projections_in_process_s_median": statistics.median(in_process),
        "list_cold_s": cold_s,
        "list_after_cold_s": rewarmed_s,
    }


# -- report -------------------------------------------------------------------------------------

SECTIONS: dict[str, Callable[[dshpy.SessionHeader, list[dshpy.SessionEvent], Any], dict[str, Any]]] = {
    "per_append": bench_per_append,
    "open": bench_open,
    "sessions_list": bench_sessions_list,
}


def report_per_append(result: dict[str, Any], args: Any) -> None:
    print(f"1. per append, median of {args.appends} single appends (µs)")
    print(
        f"   {'events':>8}{'fold (all built-ins)':>22}{'(mean)':>8}{'append':>9}{'append + projections':>22}"
        f"{'+ deferred fold':>17}"
    )
    for row in result.values():
        print(
            f"   {row['events']:>8}{row['fold_us_median']:>22.1f}{row['fold_us_mean']:>8.1f}"
            f"{row['append_us_median']:>9.1f}{row['append_with_projections_us_median']:>22.1f}"
            f"{row['deferred_fold_us_per_event']:>17.1f}"
        )
    print(
        "   fold: one event through every built-in's apply, as while a change listener is registered; "
        "append + projections: a live runner, which folds only the checks per append; deferred fold: "
        "per event, what its first read then folds in one run"
    )
    mix = next(iter(result.values()))["mix"]
    print(f"   appended mix: {', '.join(f'{k} {v}' for k, v in sorted(mix.items(), key=lambda kv: -kv[1]))}")


def report_open(result: dict[str, Any], args: Any) -> None:
    print(f"2. attaching the built-ins to an opened {result['events']}-event session (ms, best of {args.rounds})")
    print(f"   cold fold of the whole log        {result['cold_fold_ms']:>9.1f}")
    print(f"   cache rows {TAIL} events behind       {result[f'cache_{TAIL}_behind_ms']:>9.1f}")
    print(f"   cache rows at the end             {result['cache_at_end_ms']:>9.1f}")


def report_sessions_list(result: dict[str, Any], args: Any) -> None:
    n = result["sessions"]
    print(
        f"3. `dshpy sessions list --json`, {n:,} sessions x {result['events_per_session']} events (SQLite), "
        f"whole process, median of {result['runs']} (s)"
    )
    warm, fastest = result["list_warm_s_median"], result["list_warm_s_min"]
    print(f"   warm projection cache                 {warm:>7.3f}  (min {fastest:.3f})")
    print(f"   `dshpy sessions --help` (startup)     {result['help_s_median']:>7.3f}")
    print(f"   list minus startup, run by run        {result['list_minus_help_s_median']:>7.3f}")
    print(f"   store.list_projections in process     {result['list_projections_in_process_s_median']:>7.3f}")
    print(f"   cold: no cache rows (folds, writes)   {result['list_cold_s']:>7.3f}")
    print(f"   the next list, warm again             {result['list_after_cold_s']:>7.3f}")
    print(f"   (store built in {result['build_s']:.1f} s)")


REPORTS: dict[str, Callable[[dict[str, Any], Any], None]] = {
    "per_append": report_per_append,
    "open": report_open,
    "sessions_list": report_sessions_list,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller sizes (a smoke run)")
    parser.add_argument("--json", action="store_true", help="also print one JSON line with every number")
    parser.add_argument("--only", nargs="+", choices=sorted(SECTIONS), help="run only these sections")
    parser.add_argument("--list-sessions", type=int, default=None, help="sessions in the list store (10000)")
    parser.add_argument("--list-runs", type=int, default=None, help="timed list processes (9)")
    args = parser.parse_args()
    args.list_sessions = args.list_sessions or (1_000 if args.quick else 10_000)
    args.list_runs = args.list_runs or (3 if args.quick else 9)
    args.sizes = (1_000, 10_000) if args.quick else (1_000, 10_000, 100_000)
    args.appends = 500 if args.quick else 3_000
    args.open_size = args.sizes[-1]
    args.rounds = 2 if args.quick else 3
    started = time.perf_counter()
    header, events = build_log(args.sizes[-1] + args.appends + 200)
    results: dict[str, Any] = {}
    for name in args.only or SECTIONS:
        results[name] = SECTIONS[name](header, events, args)
        REPORTS[name](results[name], args)
        print()
    elapsed = time.perf_counter() - started
    print(f"({elapsed:.1f} s)")
    if args.json:
        print(orjson.dumps({**results, "seconds": elapsed}).decode())


if __name__ == "__main__":
    main()
