"""Cost of the built-in tools per call: ``bash`` unconfined and in bubblewrap, and ``read``.

Run: .venv/bin/python benchmarks/builtin_tools.py [--calls N]

Each call goes through :meth:`Tool.invoke` (argument validation, the permission
gate, the body) inside an open turn of an in-memory session, as the agent calls it.
``bash`` runs ``echo hi`` (checked to return ``hi\\n``): unconfined under
``danger-full-access``, and under ``workspace-write`` in bubblewrap when ``bwrap``
is on PATH (skipped otherwise). ``read`` returns the first 2,000 lines of a
10,000-line file. Numbers are milliseconds per call, the mean of ``--calls``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import tempfile
import time

import dshpy
from dshpy.agent import Permissions, Tool, ToolContext, builtin_tools


async def _per_call(tool: Tool, arguments: dict[str, object], context: ToolContext, calls: int) -> float:
    raw = json.dumps(arguments)
    first = await tool.invoke(raw, context)
    assert not first.is_error, first.content
    started = time.perf_counter()
    for _ in range(calls):
        await tool.invoke(raw, context)
    return (time.perf_counter() - started) / calls * 1000


async def main(calls: int) -> None:
    root = tempfile.mkdtemp(prefix="dshpy-tools-bench-")
    try:
        session = dshpy.open_store("memory:").create(cwd=root)
        session.append("turn/start", {"turn": 1})
        session.append("step/start", {"turn": 1, "step": 1})
        context = ToolContext(None, session, "call", 1, 1)
        echo = {"description": "Say hi", "command": "echo hi"}
        modes = [("unconfined (danger-full-access)", "danger-full-access")]
        if shutil.which("bwrap"):
            modes.append(("bubblewrap (workspace-write)", "workspace-write"))
        else:
            print("bwrap is not on PATH: the sandboxed case is skipped")
        for label, preset in modes:
            bash = builtin_tools("bash", permissions=Permissions(preset))[0]
            print(f"bash echo hi, {label}: {await _per_call(bash, echo, context, calls):.1f} ms/call")
        with open(os.path.join(root, "big.txt"), "w") as handle:
            handle.write("".join(f"line {i}\n" for i in range(10_000)))
        read = builtin_tools("read", permissions=Permissions())[0]
        ms = await _per_call(read, {"file_path": "big.txt"}, context, calls)
        print(f"read, first 2,000 of 10,000 lines: {ms:.1f} ms/call")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=30)
    asyncio.run(main(parser.parse_args().calls))
