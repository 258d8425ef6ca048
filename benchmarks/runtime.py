"""``dshpy-runtime`` against dsh's own runtime, through dsh's official SDK, in one run against one fake model.

Run: .venv/bin/python benchmarks/runtime.py [--rounds N] [--dsh-bin PATH]

Three timings per runtime, each the median of ``--rounds`` fresh processes:

* **startup** — process start to ``initialize`` answered (the SDK's ``start()``: spawn + initialize);
* **prompt** — a prompt round trip: ``session.run()`` of one prompt answered with text;
* **tool turn** — ``session.run()`` of a prompt the model answers with ``bash`` ``echo hi`` (checked to return
  ``hi\\n``) and then text: two model requests and one shell command.

Both runtimes talk to the same :class:`FakeModelServer` on the Messages API (no model latency, so the numbers are
the runtimes' own cost) with ``DSH_PERMISSION_MODE=danger-full-access`` so bash runs unconfined in both. dsh's
executable is ``--dsh-bin``, ``$DSH_RUNTIME_BIN``, or the 0.2.1rc2 wheel unpacked under ``/tmp/dshbin`` (``pip
install --target /tmp/dshbin --no-deps deepseek-harness-runtime-bin==0.2.1rc2``); without it dsh is skipped.
The goal (issue #17) is dshpy ≤ 0.5× dsh for the prompt round trip and the tool turn.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

from dshpy.testing.fake_model import FakeModelServer, Reply

DSH_DEFAULT = "/tmp/dshbin/deepseek_harness_runtime/runtime/deepseek-harness-sdk-runtime-linux-x64"
PHASES = ("startup", "prompt", "tool turn")


def _dshpy_runtime() -> str | None:
    return shutil.which("dshpy-runtime") or shutil.which("dshpy-runtime", path=os.path.dirname(sys.executable))


def _tool_output(request: dict[str, Any]) -> str:
    for message in request["messages"]:
        for block in message["content"] if isinstance(message["content"], list) else []:
            if block.get("type") == "tool_result":
                return "".join(part.get("text", "") for part in block["content"])
    raise AssertionError("the follow-up request carries no tool_result")


def _round(runtime: str, work: Path, model: FakeModelServer) -> dict[str, float]:
    """One fresh process: time its startup, a prompt, and a bash tool turn."""
    import deepseek_harness

    work.mkdir(parents=True)
    bash = json.dumps({"description": "Say hi", "command": "echo hi"})
    model.add(Reply.text("Four."), Reply.tool_calls(("bash", bash, "toolu_bench")), Reply.text("It said hi."))
    harness = deepseek_harness.DeepSeekHarness(
        dsh_bin=runtime,
        dsh_home=str(work / "home"),
        base_url=model.base_url,
        api_key="fake-key",
        cwd=str(work),
        env={"DSHPY_STORE": "", "DSH_PERMISSION_MODE": "danger-full-access", "DSH_TELEMETRY_DISABLED": "1"},
    )
    times: dict[str, float] = {}
    try:
        started = time.perf_counter()
        harness.start()
        times["startup"] = time.perf_counter() - started
        session = harness.start_session()
        started = time.perf_counter()
        answer = session.run("What is 2 + 2?")
        times["prompt"] = time.perf_counter() - started
        assert answer.final_response == "Four.", answer.final_response
        started = time.perf_counter()
        answer = session.run("Say hi with bash.")
        times["tool turn"] = time.perf_counter() - started
        assert answer.final_response == "It said hi.", answer.final_response
    finally:
        harness.close()
    output = _tool_output(model.requests[-1])
    assert output == "hi\n", f"bash returned {output!r}"
    return times


def _measure(runtime: str, rounds: int, root: Path, model: FakeModelServer) -> dict[str, float]:
    _round(runtime, root / "warm-up", model)  # page cache, bytecode caches
    samples = [_round(runtime, root / f"round-{n}", model) for n in range(rounds)]
    return {phase: statistics.median(s[phase] for s in samples) * 1000 for phase in PHASES}


def main() -> None:
    parser = argparse.ArgumentParser(description="dshpy-runtime vs dsh's runtime through the official SDK")
    parser.add_argument("--rounds", type=int, default=5, help="fresh processes per runtime (median taken)")
    parser.add_argument("--dsh-bin", default=os.environ.get("DSH_RUNTIME_BIN", DSH_DEFAULT))
    args = parser.parse_args()
    warnings.simplefilter("ignore", ResourceWarning)  # the SDK never closes its child's pipes
    ours = _dshpy_runtime()
    if ours is None:
        sys.exit("dshpy-runtime is not installed (pip install -e .)")
    runtimes = {"dshpy-runtime": ours}
    if os.access(args.dsh_bin, os.X_OK):
        runtimes["dsh 0.2.1rc2"] = args.dsh_bin
    else:
        print(f"dsh's runtime is not at {args.dsh_bin}: only dshpy-runtime is timed")
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="dshpy-runtime-bench-") as tmp, FakeModelServer([]) as model:
        for name, runtime in runtimes.items():
            results[name] = _measure(runtime, args.rounds, Path(tmp) / name.split()[0], model)
    print(f"median of {args.rounds} fresh processes, ms")
    print(f"{'':14}" + "".join(f"{name:>16}" for name in results) + ("      dshpy/dsh" if len(results) == 2 else ""))
    for phase in PHASES:
        row = "".join(f"{results[name][phase]:16.1f}" for name in results)
        if len(results) == 2:
            row += f"{results['dshpy-runtime'][phase] / results['dsh 0.2.1rc2'][phase]:14.2f}×"
        print(f"{phase:14}{row}")


if __name__ == "__main__":
    main()
