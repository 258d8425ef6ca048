"""What telemetry costs: appends and agent turns with it off, on with a no-op exporter, and on exporting OTLP.

Run: .venv/bin/python benchmarks/telemetry.py [--quick] [--json] [--compare-src DIR]

Five modes, measured in the same run and interleaved round by round (the best round
of each is kept, since the machine is shared and absolute numbers drift):

* **off** — telemetry never enabled in the measured code: what everyone pays;
* **on, no-op exporter** — SDK providers with a batch span processor and a metric
  reader whose exporters drop everything: the cost of recording (spans, metric
  points) without the cost of shipping, in the default shape (a flush span names the
  events it wrote);
* **on, per-event detail** — the same with ``session_events="per-event"``: every event
  also a ``session.event`` span event (skipped for a tree without the switch, whose
  only shape this was);
* **on, sampled out** — the no-op exporters behind ``ParentBased(TraceIdRatioBased(0))``:
  what a turn the sampler leaves out still pays (its metrics);
* **on, OTLP** — batch OTLP/HTTP export of spans and metrics (metrics every second,
  sixty times the SDK's default; spans by the batch processor's defaults: every 5 s or
  512 spans) to :class:`~dshpy.testing.otlp_receiver.OtlpReceiver` in a child process,
  as a collector would be: what production pays in this process (encoding and sending
  happen on the exporters' threads, which share the interpreter with the turn).

Two workloads:

* **per event** — realistic multi-step tool turns appended to a live session (with
  validation and the projections' guards) and flushed every 10 events, on ``memory:``
  and on SQLite (a durable flush each time). No agent runs, so what telemetry adds is
  the events counter, a ``session.event`` where a span is current, and a flush span;
* **per turn** — one-step agent turns against FakeModelServer (HTTP on loopback), on
  ``memory:`` and SQLite: the turn, step, chat and flush spans, every event's span
  event, the GenAI metrics. Once against a model that answers at once (what the
  agent loop itself costs, the worst case for any overhead), once against one whose
  first token comes ``--ttft`` ms after the request (50 by default; real models take
  hundreds).

**Off against never consulted.** Off, dshpy still passes the points where telemetry
would hook in: an agent's ``observe_agent`` call, the observe-only hook checks
(``model-request``, ``tool-start``, ``tool-end``, ``turn-end``), a backend's flush
report (``reporting()`` / ``record_durable`` per flush), the ``ResponseInfo`` of each
model request and its check per chunk. A difference of well under 1% between two
end-to-end runs is below what this machine can resolve (interleaved rounds of the same
code differ by more), so the benchmark bounds it directly: it counts how often each
point is passed per turn and per event (a counting run), times each point alone with
``timeit`` (telemetry off), and reports the sum against the measured **off** time.
That sum is exactly what a build without those points would save.
``--compare-src DIR`` also times the **off** mode of another source tree (e.g. a
commit before telemetry) in a child process, end to end — indicative only, for that
reason. Ratios are printed against **off** of this tree.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import timeit
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import dshpy
from dshpy.agent import Agent
from dshpy.llm import ChatClient, ModelConfig
from dshpy.testing.fake_model import FakeModelServer, Reply
from support import no_gc, realistic_events

MODES = ("off", "noop", "per-event", "sampled-out", "otlp")
LABELS = {
    "off": "off",
    "noop": "on, no-op exporter",
    "per-event": "on, per-event detail",
    "sampled-out": "on, sampled out",
    "otlp": "on, OTLP/HTTP to loopback",
}


def has_detail_switch() -> bool:
    """Whether this tree's ``enable`` takes ``session_events`` (before it, every event was a span event)."""
    import dshpy.telemetry

    return "session_events" in inspect.signature(dshpy.telemetry.enable).parameters


# -- the modes ------------------------------------------------------------------------------


@contextmanager
def telemetry(mode: str, endpoint: str | None) -> Iterator[None]:
    """Telemetry in ``mode`` for the block (``off``: the package is not even imported)."""
    if mode == "off":
        yield
        return
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult, PeriodicExportingMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
    from opentelemetry.sdk.trace.sampling import ParentBased, Sampler, TraceIdRatioBased

    import dshpy.telemetry

    if mode != "otlp":

        class DropSpans(SpanExporter):
            def export(self, spans: Sequence[Any]) -> SpanExportResult:
                return SpanExportResult.SUCCESS

        class DropMetrics(MetricExporter):
            def export(self, metrics_data: Any, timeout_millis: float = 10_000, **kwargs: Any) -> MetricExportResult:
                return MetricExportResult.SUCCESS

            def force_flush(self, timeout_millis: float = 10_000) -> bool:
                return True

            def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
                pass

        spans: Any = DropSpans()
        metrics: Any = DropMetrics()
    else:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        spans = OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces")
        metrics = OTLPMetricExporter(endpoint=f"{endpoint}/v1/metrics")
    sampler: Sampler | None = ParentBased(TraceIdRatioBased(0.0)) if mode == "sampled-out" else None
    tracer_provider = TracerProvider(sampler=sampler)
    tracer_provider.add_span_processor(BatchSpanProcessor(spans))
    reader = PeriodicExportingMetricReader(metrics, export_interval_millis=1000)
    meter_provider = MeterProvider(metric_readers=[reader])
    options: dict[str, Any] = {"session_events": "per-event"} if mode == "per-event" else {}
    dshpy.telemetry.enable(tracer_provider=tracer_provider, meter_provider=meter_provider, **options)
    try:
        yield
    finally:
        dshpy.telemetry.disable()
        tracer_provider.shutdown()
        meter_provider.shutdown()


RECEIVER = """
import json, sys
from dshpy.testing.otlp_receiver import OtlpReceiver
with OtlpReceiver() as receiver:
    print(receiver.endpoint, flush=True)
    sys.stdin.readline()
    print(json.dumps({path: len(receiver.bodies(path)) for path in ("/v1/traces", "/v1/metrics")}), flush=True)
"""


@contextmanager
def receiver_process() -> Iterator[tuple[str, Callable[[], dict[str, int]]]]:
    """An OTLP receiver in a child process (a collector is not in the exporting process); yields its endpoint and
    a function returning how many requests it received on each path."""
    child = subprocess.Popen([sys.executable, "-c", RECEIVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert child.stdin is not None and child.stdout is not None
    try:
        endpoint = child.stdout.readline().strip()

        def received() -> dict[str, int]:
            assert child.stdin is not None and child.stdout is not None
            child.stdin.write("done\n")
            child.stdin.flush()
            counts: dict[str, int] = json.loads(child.stdout.readline())
            return counts

        yield endpoint, received
    finally:
        child.stdin.close()
        child.wait(timeout=30)


# -- the workloads --------------------------------------------------------------------------


Timing = tuple[float, float, float]
"""Seconds of wall-clock time, of this process's CPU time (all its threads: the fake model's, the exporters'), and
of the measuring thread's CPU time (the hot path alone: the appends, the agent's event loop)."""


def clocks() -> Timing:
    return time.perf_counter(), time.process_time(), time.thread_time()


def per(started: Timing, count: int) -> Timing:
    ended = clocks()
    return tuple((end - start) / count for end, start in zip(ended, started, strict=True))  # type: ignore[return-value]


def appends(url: str, events: list[dshpy.SessionEvent]) -> Timing:
    """Seconds per event: append (validated) + flush every 10 events + close."""
    store = dshpy.open_store(url)
    session = store.create(cwd="/bench")
    with no_gc():
        started = clocks()
        for index, event in enumerate(events, 1):
            session.append(
                event.type, event.data, surface_op=event.surface_op, source_event_seqs=event.source_event_seqs
            )
            if index % 10 == 0:
                session.flush()
        session.close()
        elapsed = per(started, len(events))
    store.close()
    return elapsed


async def turns(base_url: str, url: str, count: int) -> Timing:
    """Seconds per one-step agent turn (three warm-up turns first)."""
    store = dshpy.open_store(url)
    session = store.create(cwd="/bench")
    try:
        async with ChatClient(ModelConfig.from_env(base_url=base_url, api_key="bench", env={})) as client:
            agent = Agent(session, client, system_prompt="You are a benchmark.")
            for _ in range(3):
                await agent.run("hi")
            started = clocks()
            for _ in range(count):
                result = await agent.run("hi")
                assert result.kind == "completed", result.reason
            return per(started, count)
    finally:
        session.close()
        store.close()


REPLY = Reply.text("The answer is 42.", pieces=4)


def paired(per_round: dict[str, dict[str, list[float]]]) -> dict[str, dict[str, float]]:
    """Per workload and mode: the median over rounds of (thread CPU time / the same round's off) - 1.

    Each round measures every mode back to back, so a ratio within a round cancels what
    drifts slowly (the load of a shared machine), and the median drops the rounds a
    neighbour disturbed: steadier than comparing each mode's best round.
    """
    result: dict[str, dict[str, float]] = {}
    for workload, by_mode in per_round.items():
        off = by_mode["off"]
        result[workload] = {
            mode: statistics.median(value / base - 1 for value, base in zip(values, off, strict=True))
            for mode, values in by_mode.items()
            if mode != "off"
        }
    return result


def measure(
    modes: Sequence[str], rounds: int, events: int, turn_count: int, endpoint: str | None, ttft_ms: float
) -> dict[str, Any]:
    """Best seconds per event / per turn, wall-clock and CPU (each kept apart), by workload and mode."""
    sample = realistic_events(events)
    best: dict[str, dict[str, float]] = {}
    best_cpu: dict[str, dict[str, float]] = {}
    best_thread: dict[str, dict[str, float]] = {}
    slow_turns = max(5, turn_count // 5)
    slow = f"turn, sqlite, {ttft_ms:g} ms TTFT"

    per_round: dict[str, dict[str, list[float]]] = {}

    def keep(workload: str, mode: str, timing: Timing) -> None:
        for table, seconds in ((best, timing[0]), (best_cpu, timing[1]), (best_thread, timing[2])):
            found = table.setdefault(workload, {})
            found[mode] = min(found.get(mode, seconds), seconds)
        per_round.setdefault(workload, {}).setdefault(mode, []).append(timing[2])

    delayed = getattr(REPLY, "delayed", None)  # absent from trees older than this benchmark (--compare-src)
    with (
        FakeModelServer(default=REPLY) as model,
        FakeModelServer(default=delayed(ttft_ms / 1000) if delayed else REPLY) as slow_model,
        tempfile.TemporaryDirectory() as tmp,
    ):
        for round_number in range(rounds):
            for mode in modes:
                with telemetry(mode, endpoint):
                    keep("event, memory", mode, appends("memory:", sample))
                    db = Path(tmp) / f"events-{mode}-{round_number}.db"
                    keep("event, sqlite", mode, appends(f"sqlite:///{db}", sample))
                    keep("turn, memory", mode, asyncio.run(turns(model.base_url, "memory:", turn_count)))
                    db = Path(tmp) / f"turns-{mode}-{round_number}.db"
                    keep("turn, sqlite", mode, asyncio.run(turns(model.base_url, f"sqlite:///{db}", turn_count)))
                    if delayed is not None:
                        db = Path(tmp) / f"slow-{mode}-{round_number}.db"
                        keep(slow, mode, asyncio.run(turns(slow_model.base_url, f"sqlite:///{db}", slow_turns)))
    return {
        "events": len(sample),
        "turns": turn_count,
        "slow_turns": slow_turns,
        "rounds": rounds,
        "seconds": best,
        "cpu_seconds": best_cpu,
        "thread_cpu_seconds": best_thread,
        "paired_thread_overhead": paired(per_round),
    }


# -- off against never consulted ---------------------------------------------------------------

OBSERVED_HOOKS = frozenset({"model-request", "tool-start", "tool-end", "turn-end"})
"""The hooks only telemetry listens to (dshpy.agent.hooks): checked on every pass, handled by nobody when it is off."""


@contextmanager
def counting() -> Iterator[dict[str, int]]:
    """Count the passes through each point where off-mode code consults telemetry (wrapped for this block only)."""
    import dshpy.storage.sqlite as sqlite_store
    from dshpy.agent import loop
    from dshpy.agent.hooks import Hooks
    from dshpy.llm.mapping import ChunkMapper

    counts = dict.fromkeys(("observe_agent", "hook checks", "flush reports", "model requests", "chunks"), 0)
    saved: list[tuple[Any, str, Any]] = []

    def patch(owner: Any, name: str, key: str, only: Callable[..., bool] | None = None) -> None:
        original = getattr(owner, name)
        saved.append((owner, name, original))

        def counted(*args: Any, **kwargs: Any) -> Any:
            if only is None or only(*args):
                counts[key] += 1
            return original(*args, **kwargs)

        setattr(owner, name, counted)

    patch(loop, "observe_agent", "observe_agent")
    patch(Hooks, "has", "hook checks", lambda _hooks, name: name in OBSERVED_HOOKS)
    patch(sqlite_store, "reporting", "flush reports")  # record_durable is passed exactly as often
    patch(loop, "ResponseInfo", "model requests")
    patch(ChunkMapper, "feed", "chunks")
    try:
        yield counts
    finally:
        for owner, name, original in reversed(saved):
            setattr(owner, name, original)


def point_costs() -> dict[str, float]:
    """Seconds one pass through each point costs with telemetry off (best of several timeit runs)."""
    from dshpy.agent.hooks import Hooks
    from dshpy.llm.client import ResponseInfo
    from dshpy.storage.flush_report import record_durable, reporting
    from dshpy.telemetry import observe_agent

    hooks = Hooks()
    info = ResponseInfo(model="m")
    chunk = ResponseInfo(model="m")  # anything with a .model, as the chunk the client checks

    def flush_report() -> None:
        if reporting() is not None:
            raise AssertionError("telemetry is on")
        record_durable(time.perf_counter_ns())

    def chunk_check() -> None:
        if info is not None and info.model is None and chunk.model:
            raise AssertionError("unreachable")

    points: dict[str, Callable[[], Any]] = {
        "observe_agent": lambda: observe_agent(hooks),
        "hook checks": lambda: hooks.has("model-request"),
        "flush reports": flush_report,
        "model requests": ResponseInfo,
        "chunks": chunk_check,
    }
    number = 20_000
    return {key: min(timeit.repeat(call, number=number, repeat=7)) / number for key, call in points.items()}


def off_path(events: int, turn_count: int) -> dict[str, Any]:
    """Passes per turn / per event through each point (sqlite workloads), and what they cost off, in seconds."""
    sample = realistic_events(events)
    with tempfile.TemporaryDirectory() as tmp, FakeModelServer(default=REPLY) as model:
        with counting() as per_turn:
            asyncio.run(turns(model.base_url, f"sqlite:///{tmp}/turns.db", turn_count))
        with counting() as per_event:
            appends(f"sqlite:///{tmp}/events.db", sample)
    costs = point_costs()
    total_turns = turn_count + 3  # with the warm-up turns
    turn_passes = {key: value / total_turns for key, value in per_turn.items()}
    event_passes = {key: value / len(sample) for key, value in per_event.items()}
    return {
        "cost_per_pass": costs,
        "passes_per_turn": turn_passes,
        "passes_per_event": event_passes,
        "seconds_per_turn": sum(turn_passes[key] * costs[key] for key in costs),
        "seconds_per_event": sum(event_passes[key] * costs[key] for key in costs),
    }


def other_tree(src: str, args: argparse.Namespace) -> dict[str, float]:
    """The off mode of another source tree, in a child process."""
    command = [sys.executable, __file__, "--only-off", "--json", "--rounds", str(args.rounds)]
    command += ["--events", str(args.events), "--turns", str(args.turns), "--ttft", str(args.ttft)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, str(Path(__file__).parent)])}
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    seconds = json.loads(done.stdout)["seconds"]
    return {workload: by_mode["off"] for workload, by_mode in seconds.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer events, turns and rounds")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--events", type=int, default=2000, help="events appended per measurement")
    parser.add_argument("--turns", type=int, default=100, help="agent turns per measurement")
    parser.add_argument("--ttft", type=float, default=50.0, help="the slow model's time to first token, in ms")
    parser.add_argument("--compare-src", metavar="DIR", help="also time the off mode of this source tree")
    parser.add_argument("--only-off", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.events, args.turns = 2, 600, 30
    if args.only_off:
        print(json.dumps(measure(("off",), args.rounds, args.events, args.turns, None, args.ttft)))
        return 0
    load_before = os.getloadavg()
    modes = MODES if has_detail_switch() else tuple(mode for mode in MODES if mode != "per-event")
    with receiver_process() as (endpoint, received):
        result = measure(modes, args.rounds, args.events, args.turns, endpoint, args.ttft)
        exported = received()
    result["otlp_requests_received"] = exported
    result["load_average"] = {"before": load_before, "after": os.getloadavg(), "cpus": os.cpu_count()}
    seconds: dict[str, dict[str, float]] = result["seconds"]
    cpu_seconds: dict[str, dict[str, float]] = result["cpu_seconds"]
    thread_seconds: dict[str, dict[str, float]] = result["thread_cpu_seconds"]
    medians: dict[str, dict[str, float]] = result["paired_thread_overhead"]
    if args.compare_src:
        for workload, value in other_tree(args.compare_src, args).items():
            seconds[workload]["other tree, off"] = value
    result["overhead_vs_off"] = {
        workload: {mode: round(value / by_mode["off"] - 1, 4) for mode, value in by_mode.items() if mode != "off"}
        for workload, by_mode in seconds.items()
    }
    off = result["off_path"] = off_path(args.events, args.turns)
    off["share_of_off_turn"] = off["seconds_per_turn"] / seconds["turn, sqlite"]["off"]
    off["share_of_off_event"] = off["seconds_per_event"] / seconds["event, sqlite"]["off"]
    if args.json:
        print(json.dumps(result))
        return 0
    print(
        f"telemetry overhead: {result['events']} events per append run, {result['turns']} one-step turns per turn run"
        f" ({result['slow_turns']} against the slow model),"
        f" best of {result['rounds']} interleaved rounds; load average {load_before[0]:.1f} before,"
        f" {result['load_average']['after'][0]:.1f} after, on {os.cpu_count()} CPUs"
    )
    print(
        "  per event/turn: wall-clock, this process's CPU time (all threads: the fake model's, the exporters'),"
        " the measuring thread's CPU time (the hot path), each best of the rounds with its overhead against off;"
        " paired: the median over rounds of the thread CPU time against the same round's off"
    )
    for workload, by_mode in seconds.items():
        unit, scale = ("µs/event", 1e6) if workload.startswith("event") else ("ms/turn", 1e3)
        print(f"  {workload}")
        for mode, value in by_mode.items():
            ratio = value / by_mode["off"]
            label = LABELS.get(mode, mode)
            line = f"    {label:<28} {value * scale:9.2f} {unit} {(ratio - 1) * 100:+7.1f}%"
            for name, table in (("cpu", cpu_seconds), ("thread", thread_seconds)):
                found = table.get(workload, {})
                if mode in found:
                    cpu_ratio = found[mode] / found["off"]
                    line += f"   {name} {found[mode] * scale:8.2f} {(cpu_ratio - 1) * 100:+7.1f}%"
            if mode in medians.get(workload, {}):
                line += f"   paired {medians[workload][mode] * 100:+7.1f}%"
            print(line)
    print(f"  OTLP requests the loopback receiver got: {exported}")
    print("  off against never consulted (sqlite workloads): passes per turn / per event x cost per pass")
    for key, cost in off["cost_per_pass"].items():
        print(
            f"    {key:<16} {off['passes_per_turn'][key]:6.2f}/turn {off['passes_per_event'][key]:6.3f}/event"
            f"  x {cost * 1e9:6.0f} ns"
        )
    print(
        f"    sum: {off['seconds_per_turn'] * 1e6:.2f} µs/turn = {off['share_of_off_turn'] * 100:.4f}% of an off turn;"
        f" {off['seconds_per_event'] * 1e9:.1f} ns/event = {off['share_of_off_event'] * 100:.4f}% of an off event"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
