"""Compaction benchmarks: what the log pays when a compaction or a prune rewrites the surface.

Run: .venv/bin/python benchmarks/compaction.py [--quick] [--json] [--only NAME ...]

Sections (``--only`` picks some; each is a function in :data:`SECTIONS` returning a
JSON-able dict that :func:`main` prints and adds to the ``--json`` line):

1. ``derive`` — ``derive_messages()`` right after each surface rewrite a long session
   sees, at 1k, 10k and 100k events and at 35k messages, on a warm session whose
   previous history is still held (as the agent loop holds it). In order, on one
   session: a replaced system prompt (the protected head), a prune (a
   ``compaction/prune`` + a ``tool/result`` replacing one result in the middle of the
   history), a head-anchored compaction (the whole bracket: start, summary, the
   checkpoint replacing surface nodes 1.. up to the turn that starts at 84% of the
   surface, end; dsh's retain ratio is 0.16) and a nested compaction (the same again,
   now shadowing the first checkpoint). Derivation is incremental, so each must cost what the rewrite changed,
   flat in the log's length (goal: ≤ 5 ms at 35k messages). Shown beside them: the
   appends of each rewrite, whose admission checks every shadowed seq (that cost is
   the size of the span, by design). Only the public API is used, so
   ``PYTHONPATH=<older checkout>/src`` times an older derivation the same way; the
   first line names the ``dshpy`` the run imported. Below the table: what dropping
   the previous history then costs, which frees the messages a rewrite shadowed
   (paid by whoever lets go of that history last, whatever the derivation).

The log is realistic: TurnScript turns (3 steps, 2 tool calls per step) after a
first turn that writes a system prompt at surface node 0. Each round restores a
fresh session from the same events; the medians of the rounds are reported, with
the cyclic GC off while timing, as ``timeit`` does.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import orjson

import dshpy
from dshpy.testing.builders import TurnScript, system_data, user_message
from support import no_gc, whole_turns

MESSAGES_TARGET = 35_000
RETAIN = 0.16
SURFACE_TYPES = frozenset({"system/message", "developer/message", "user/message", "assistant/message", "tool/result"})


def build_log(events: int, messages: int) -> tuple[dshpy.SessionHeader, list[dshpy.SessionEvent]]:
    """A log of at least ``events`` events and ``messages`` surface nodes, ending between turns."""
    session = dshpy.Session.new(cwd="/bench")
    script = TurnScript(session)
    script.turn(steps=3, tools_per_step=2, system="You are a careful coding agent.")
    while len(session) < events or len(session.surface_nodes) < messages:
        script.turn(steps=3, tools_per_step=2)
    return session.header, list(session.events)


def prefix_with_messages(events: Sequence[dshpy.SessionEvent], messages: int) -> list[dshpy.SessionEvent]:
    """The shortest whole-turn prefix with at least ``messages`` surface nodes (TurnScript only appends)."""
    count = 0
    for index, event in enumerate(events):
        count += event.type in SURFACE_TYPES and event.surface_op is not None
        if count >= messages:
            end = next(i for i in range(index, len(events)) if events[i].type == "turn/end")
            return list(events[: end + 1])
    raise ValueError(f"the log has fewer than {messages} surface nodes")


# -- the rewrites -------------------------------------------------------------------------------


def replace_op(start: int, end: int) -> dict[str, Any]:
    return {"op": "replace", "startSeq": start, "endSeq": end}


Rewrite = Callable[[dshpy.Session], Callable[[], object]]
"""Picks its span from a session (not timed) and returns the appends that rewrite it (timed)."""


def prune_middle(session: dshpy.Session) -> Callable[[], object]:
    """Prune the tool result nearest the middle of the surface, as dsh's pruner writes it."""
    results = [seq for seq in session.surface_nodes if session.events[seq].type == "tool/result"]
    seq = results[len(results) // 2]
    span = {"shadowedRange": {"start": seq, "end": seq}, "shadowedSeqs": [seq], "shadowedTokenCount": 100}
    data = dshpy.thaw(session.events[seq].data)
    data["message"]["content"] = [{"type": "text", "text": "[... tool result middle pruned ...]"}]

    def append() -> None:
        session.append("compaction/prune", span)
        session.append("tool/result", data, surface_op=replace_op(seq, seq), source_event_seqs=[seq])

    return append


def compact_head(compaction_id: str, turn: int) -> Rewrite:
    """One head-anchored compaction bracket: nodes 1.. up to the turn starting at 1 - RETAIN of the surface."""

    def prepare(session: dshpy.Session) -> Callable[[], object]:
        nodes, events = session.surface_nodes, session.events
        cut = int(len(nodes) * (1 - RETAIN))
        while events[nodes[cut]].type != "user/message":  # a user message starts a turn: no tool pair is split
            cut += 1
        shadowed = list(nodes[1:cut])
        start, summary = session.next_seq, session.next_seq + 1
        bracket = {"compactionId": compaction_id, "turn": turn}
        summary_data = {
            **bracket,
            "summary": [{"type": "text", "text": "what happened so far"}],
            "shadowedRange": {"start": shadowed[0], "end": shadowed[-1]},
            "shadowedSeqs": shadowed,
            "shadowedTokenCount": 100 * len(shadowed),
            "provider": "deepseek",
            "model": "deepseek-chat",
        }
        del summary_data["turn"]
        checkpoint = user_message("<compacted-summary>so far</compacted-summary>", kind="compact-checkpoint")
        checkpoint["source"]["compactionId"] = compaction_id
        op, sources = replace_op(shadowed[0], shadowed[-1]), [start, summary, *shadowed]

        def append() -> None:
            session.append("compaction/start", bracket)
            session.append("compaction/summary", summary_data)
            session.append("user/message", checkpoint, surface_op=op, source_event_seqs=sources)
            session.append("compaction/end", bracket)

        return append

    return prepare


def replace_system_head(turn: int) -> Rewrite:
    def prepare(session: dshpy.Session) -> Callable[[], object]:
        head = session.surface_nodes[0]
        data = system_data(turn, 1, "You are a careful coding agent. Be brief.")
        op = replace_op(head, head)
        return lambda: session.append("system/message", data, surface_op=op, source_event_seqs=[head])

    return prepare


def rewrites(turn: int) -> dict[str, Rewrite]:
    """The surface rewrites of one round, in the order they are applied to the same session."""
    return {
        "system head": replace_system_head(turn),
        "prune": prune_middle,
        "head compaction": compact_head("compaction-1", turn),
        "nested compaction": compact_head("compaction-2", turn),
    }


# -- 1. derive after a rewrite ------------------------------------------------------------------


def derive_round(
    header: dshpy.SessionHeader, events: Sequence[dshpy.SessionEvent]
) -> dict[str, tuple[float, float, float]]:
    """(append s, derive s, release s) of each rewrite on a freshly restored, warm session."""
    session = dshpy.Session(header, events)
    history = session.derive_messages()  # held, as the agent loop holds the last history it sent
    turn = session.next_turn
    session.append("turn/start", {"turn": turn})
    session.append("step/start", {"turn": turn, "step": 1})
    out: dict[str, tuple[float, float, float]] = {}
    clock = time.perf_counter
    with no_gc():
        for name, prepare in rewrites(turn).items():
            append = prepare(session)
            t0 = clock()
            append()
            t1 = clock()
            derived = session.derive_messages()
            t2 = clock()
            history = derived  # drops the last view of the history before the rewrite
            t3 = clock()
            out[name] = (t1 - t0, t2 - t1, t3 - t2)
    assert len(history) == len(dshpy.Session(header, session.events).derive_messages())
    return out


def bench_derive(header: dshpy.SessionHeader, events: list[dshpy.SessionEvent], args: Any) -> dict[str, Any]:
    logs = {f"{size:,} events": whole_turns(events, size) for size in args.sizes}
    logs[f"{args.messages:,} messages"] = prefix_with_messages(events, args.messages)
    out: dict[str, Any] = {}
    for label, log in logs.items():
        rounds = [derive_round(header, log) for _ in range(args.rounds)]
        row: dict[str, Any] = {
            "events": len(log),
            "messages": len(dshpy.Session(header, log).derive_messages()),
        }
        for name in rounds[0]:
            row[f"{name} append ms"] = statistics.median(r[name][0] for r in rounds) * 1e3
            row[f"{name} derive ms"] = statistics.median(r[name][1] for r in rounds) * 1e3
            row[f"{name} release ms"] = statistics.median(r[name][2] for r in rounds) * 1e3
        out[label] = row
    return out


def report_derive(result: dict[str, Any], args: Any) -> None:
    names = list(rewrites(0))
    print(f"1. derive_messages() after each rewrite, median of {args.rounds} rounds (ms); appends in parentheses")
    print(f"   {'log':<16}{'messages':>9}" + "".join(f"{name:>22}" for name in names))
    for label, row in result.items():
        cells = "".join(f"{row[f'{n} derive ms']:>12.3f} ({row[f'{n} append ms']:>7.2f})" for n in names)
        print(f"   {label:<16}{row['messages']:>9}{cells}")
    print("   then dropping the last view of the history from before the rewrite (ms; frees the shadowed messages)")
    for label, row in result.items():
        cells = "".join(f"{row[f'{n} release ms']:>22.3f}" for n in names)
        print(f"   {label:<16}{'':>9}{cells}")


SECTIONS: dict[str, Callable[[dshpy.SessionHeader, list[dshpy.SessionEvent], Any], dict[str, Any]]] = {
    "derive": bench_derive,
}
REPORTS: dict[str, Callable[[dict[str, Any], Any], None]] = {
    "derive": report_derive,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller sizes (a smoke run)")
    parser.add_argument("--json", action="store_true", help="also print one JSON line with every number")
    parser.add_argument("--only", nargs="+", choices=sorted(SECTIONS), help="run only these sections")
    args = parser.parse_args()
    args.sizes = (1_000, 10_000) if args.quick else (1_000, 10_000, 100_000)
    args.messages = 3_500 if args.quick else MESSAGES_TARGET
    args.rounds = 3 if args.quick else 5
    started = time.perf_counter()
    print(f"dshpy from {dshpy.__file__}\n")
    header, events = build_log(args.sizes[-1], args.messages)
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
