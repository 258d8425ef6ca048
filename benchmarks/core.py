"""Core log benchmarks: append throughput, derive_messages() cost per append, event codec.

Run: .venv/bin/python benchmarks/core.py [--quick] [--json]

1. appends/s into a detached in-memory session, realistic multi-step tool turns
   (``TurnScript``: 3 steps, 2 tool calls per step) up to 100k events: end to end
   (building the data + appending), append only (plain dicts built beforehand), and
   the prebuilt-event paths (``append_events``, restoring ``Session(header, events)``);
2. the cost of one append + ``derive_messages()`` pair at 1k, 10k and 100k events: it
   must stay flat, because derivation is incremental; beside it, a surface replace
   of the last node and the derivation after it (the history is edited in place, but
   the replace looks positions up in the surface and the held history is copied once:
   O(surface) at C speed; ``benchmarks/compaction.py`` times compactions and prunes);
3. encode/decode events/s through ``dshpy.encode_event`` / ``dshpy.decode_event``
   against plain ``orjson.dumps`` / ``orjson.loads`` of the same ``to_wire()`` dicts.

The machine is shared and absolute numbers drift, so every comparison is made within
one run, the variants compared take turns round by round, bulk timings are the best of
several rounds and per-append timings the median of many. As ``timeit`` does, the
cyclic GC is off while timing: its pauses scale with the benchmark's own heap.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import orjson

import dshpy
from dshpy.testing.builders import TurnScript, user_message
from support import no_gc, whole_turns

ROUNDS = 5
BIG_ROUNDS = 2
REPLACES = 20
BLOCK = 50


def timed(action: Callable[[], Any]) -> float:
    with no_gc():
        start = time.perf_counter()
        action()
        return time.perf_counter() - start


def best_times(variants: dict[str, Callable[[], object]], rounds: int) -> dict[str, float]:
    """Best time of each variant over ``rounds``; the variants take turns within each round."""
    runs: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, action in variants.items():
            runs[name].append(timed(action))
    return {name: min(seconds) for name, seconds in runs.items()}


def fill(session: dshpy.Session, count: int) -> None:
    script = TurnScript(session)
    while len(session) < count:
        script.turn(steps=3, tools_per_step=2)


# -- 1. appends ---------------------------------------------------------------------------------


def bench_appends(count: int) -> tuple[dict[str, Any], list[dshpy.SessionEvent], dshpy.SessionHeader]:
    source = dshpy.Session.new(cwd="/bench")
    fill(source, count)
    events = list(source.events)
    n = len(events)
    calls = [(e.type, dshpy.thaw(e.data), e.surface_op, e.source_event_seqs) for e in events]

    def end_to_end() -> None:
        fill(dshpy.Session.new(cwd="/bench"), count)

    def append_plain() -> None:
        session = dshpy.Session.new(cwd="/bench")
        append = session.append
        for kind, data, op, sources in calls:
            append(kind, data, surface_op=op, source_event_seqs=sources)

    def append_prebuilt() -> None:
        session = dshpy.Session.new(cwd="/bench")
        for offset in range(0, n, 1000):
            session.append_events(events[offset : offset + 1000])

    def restore() -> None:
        dshpy.Session(source.header, events)

    best = best_times(
        {
            "turnscript_end_to_end": end_to_end,
            "append_plain_data": append_plain,
            "append_events_batches_of_1000": append_prebuilt,
            "restore": restore,
        },
        BIG_ROUNDS,
    )
    mix: dict[str, int] = {}
    for event in events:
        mix[event.type] = mix.get(event.type, 0) + 1
    result: dict[str, Any] = {name: n / seconds for name, seconds in best.items()}
    return {"events": n, **result, "mix": mix}, events, source.header


# -- 2. derive_messages() per append ------------------------------------------------------------


def bench_derive(
    events: Sequence[dshpy.SessionEvent], header: dshpy.SessionHeader, sizes: Sequence[int], pairs: int
) -> dict[str, Any]:
    """Per size: ``pairs`` timed append + derive_messages() pairs on a warm session, then a few replaces.

    Each pair is timed on its own; the median is reported, with the mean. The sizes take
    turns in blocks of ``BLOCK`` pairs, so that load from other processes falls on all of
    them alike. Each session grows by ``pairs`` events during the run.
    """
    ids = itertools.count()
    clock = time.perf_counter
    sessions = {size: dshpy.Session(header, whole_turns(events, size)) for size in sizes}  # all between turns
    start = {size: (len(s), len(s.derive_messages())) for size, s in sessions.items()}  # warm: cache covers the log
    append_s: dict[int, list[float]] = {size: [] for size in sizes}
    derive_s: dict[int, list[float]] = {size: [] for size in sizes}
    replace_s: dict[int, list[float]] = {size: [] for size in sizes}
    with no_gc():
        for _ in range(pairs // BLOCK):
            for size, session in sessions.items():
                for _ in range(BLOCK):
                    data = user_message("more", message_id=f"b-{next(ids)}")
                    t0 = clock()
                    session.append("user/message", data, surface_op="append")
                    t1 = clock()
                    session.derive_messages()
                    t2 = clock()
                    append_s[size].append(t1 - t0)
                    derive_s[size].append(t2 - t1)
        for _ in range(REPLACES):
            for size, session in sessions.items():
                last = session.surface_nodes[-1]
                data = user_message("summary", message_id=f"r-{next(ids)}")
                op = {"op": "replace", "startSeq": last, "endSeq": last}
                t0 = clock()
                session.append("user/message", data, surface_op=op, source_event_seqs=[last])
                session.derive_messages()
                replace_s[size].append(clock() - t0)
    out: dict[str, Any] = {}
    for size in sizes:
        pair_s = [a + d for a, d in zip(append_s[size], derive_s[size], strict=True)]
        out[str(size)] = {
            "events": start[size][0],
            "messages": start[size][1],
            "pair_us_median": statistics.median(pair_s) * 1e6,
            "pair_us_mean": statistics.fmean(pair_s) * 1e6,
            "append_us_median": statistics.median(append_s[size]) * 1e6,
            "derive_us_median": statistics.median(derive_s[size]) * 1e6,
            "replace_derive_us_median": statistics.median(replace_s[size]) * 1e6,
        }
    return out


# -- 3. codec -----------------------------------------------------------------------------------


def bench_codec(count: int) -> dict[str, Any]:
    """Codec rates over ``count`` fresh TurnScript events; the variants take turns each round."""
    session = dshpy.Session.new(cwd="/bench")
    fill(session, count)
    events = list(session.events)
    n = len(events)
    wires = [e.to_wire(seq_ranges=True) for e in events]
    lines = [dshpy.encode_event(e) for e in events]
    assert lines == [orjson.dumps(w) for w in wires]
    encode, decode, loads, dumps = dshpy.encode_event, dshpy.decode_event, orjson.loads, orjson.dumps
    variants: dict[str, Callable[[], object]] = {
        "encode_dshpy": lambda: [encode(e) for e in events],
        "encode_orjson": lambda: [dumps(w) for w in wires],
        "decode_dshpy": lambda: [decode(loads(b)) for b in lines],
        "decode_dshpy_parsed": lambda: [decode(loads(b), parsed=True) for b in lines],
        "decode_orjson": lambda: [loads(b) for b in lines],
    }
    times = best_times(variants, ROUNDS)
    return {
        "events": n,
        "bytes_per_event": sum(map(len, lines)) / n,
        "events_per_s": {name: n / seconds for name, seconds in times.items()},
        "encode_cost_x": times["encode_dshpy"] / times["encode_orjson"],
        "decode_cost_x": times["decode_dshpy"] / times["decode_orjson"],
        "decode_parsed_cost_x": times["decode_dshpy_parsed"] / times["decode_orjson"],
    }


# -- report -------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller sizes (a smoke run)")
    parser.add_argument("--json", action="store_true", help="also print one JSON line with every number")
    args = parser.parse_args()
    total = 10_000 if args.quick else 100_000
    sizes = (1_000, 10_000) if args.quick else (1_000, 10_000, 100_000)
    pairs = 200 if args.quick else 1_000
    started = time.perf_counter()

    codec = bench_codec(5_000 if args.quick else 20_000)  # first, while the heap is small (GC scans it all)
    gc.collect()
    appends, events, header = bench_appends(total)
    print(f"1. appends into a detached memory session ({appends['events']} events of 3-step, 2-tool turns)")
    print(f"   mix: {', '.join(f'{k} {v}' for k, v in sorted(appends['mix'].items(), key=lambda kv: -kv[1]))}")
    print(f"   {'path':<38}{'events/s':>12}   (best of {BIG_ROUNDS})")
    for label, key in (
        ("TurnScript end to end (build + append)", "turnscript_end_to_end"),
        ("append(), plain dicts built beforehand", "append_plain_data"),
        ("append_events(), batches of 1000", "append_events_batches_of_1000"),
        ("Session(header, events) restore", "restore"),
    ):
        print(f"   {label:<38}{appends[key]:>12,.0f}")

    derive = bench_derive(events, header, sizes, pairs)
    print(f"\n2. one append + derive_messages() pair at each size, median of {pairs} pairs (µs)")
    print(f"   {'events':>8}{'messages':>10}{'pair':>8}{'(mean)':>8}{'append':>8}{'derive':>8}{'replace+derive':>16}")
    for row in derive.values():
        print(
            f"   {row['events']:>8}{row['messages']:>10}{row['pair_us_median']:>8.1f}{row['pair_us_mean']:>8.1f}"
            f"{row['append_us_median']:>8.1f}{row['derive_us_median']:>8.1f}{row['replace_derive_us_median']:>16.1f}"
        )
    print("   (replace+derive: position lookups and one copy of the held history, O(surface) at C speed)")

    rates = codec["events_per_s"]
    print(
        f"\n3. codec over {codec['events']} events ({codec['bytes_per_event']:.0f} B/event), events/s, best of {ROUNDS}"
    )
    print(f"   {'':<8}{'dshpy':>12}{'orjson':>12}{'cost ×':>8}   (dshpy time / orjson time)")
    print(
        f"   {'encode':<8}{rates['encode_dshpy']:>12,.0f}{rates['encode_orjson']:>12,.0f}{codec['encode_cost_x']:>8.2f}"
    )
    print(
        f"   {'decode':<8}{rates['decode_dshpy']:>12,.0f}{rates['decode_orjson']:>12,.0f}{codec['decode_cost_x']:>8.2f}"
    )
    print(
        f"   {'parsed':<8}{rates['decode_dshpy_parsed']:>12,.0f}{rates['decode_orjson']:>12,.0f}"
        f"{codec['decode_parsed_cost_x']:>8.2f}   (decode_event(..., parsed=True))"
    )
    elapsed = time.perf_counter() - started
    print(f"\n({elapsed:.1f} s)")
    if args.json:
        print(orjson.dumps({"appends": appends, "derive": derive, "codec": codec, "seconds": elapsed}).decode())


if __name__ == "__main__":
    main()
