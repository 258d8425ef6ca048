"""Soak: the issue #11 scenario at full size — several writer processes taking turns on one session.

Run: .venv/bin/python benchmarks/writer_lease_soak.py --store URL [--writers N] [--turns N] [--json]

Each writer is a real process (``python -m dshpy.testing.lease_workers turns``) that,
``--turns`` times, opens the session (retrying while another process holds its
lease), writes one whole turn flushing as a streaming agent does, and closes it.
Without single-writer leases a writer's ``open()`` "repaired" the live turn of another
(``turn/end interrupted``) and that writer then lost its answer to a conflict; with
them every turn must end ``completed`` and every answer must be stored. Printed: turns
by end reason, answers lost, busy opens (how often a writer found the session held),
the elapsed time and turns/s. Not a test: run it by hand (it takes tens of seconds).

Examples::

    benchmarks/writer_lease_soak.py --store sqlite:////tmp/soak.db --writers 2 --turns 150
    benchmarks/writer_lease_soak.py --store 'postgresql://postgres@127.0.0.1:5432/test?schema=soak' --writers 8
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import dshpy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", required=True, help="store URL (a fresh session is created in it)")
    parser.add_argument("--writers", type=int, default=2)
    parser.add_argument("--turns", type=int, default=150, help="turns per writer")
    parser.add_argument("--json", action="store_true", help="print one JSON line instead of text")
    args = parser.parse_args()

    store = dshpy.open_store(args.store)
    session = store.create(cwd="/soak")
    session.close()
    store.close()

    src = str(Path(dshpy.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    started = time.perf_counter()
    writers = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "dshpy.testing.lease_workers",
                "turns",
                args.store,
                session.id,
                str(w),
                str(args.turns),
            ],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for w in range(1, args.writers + 1)
    ]
    reports = []
    for writer in writers:
        out, _ = writer.communicate()
        if writer.returncode != 0:
            raise SystemExit(f"writer {writer.pid} failed with exit code {writer.returncode}")
        reports.append(json.loads(out.strip().splitlines()[-1]))
    elapsed = time.perf_counter() - started

    store = dshpy.open_store(args.store)
    events = list(store.read(session.id))
    store.close()
    ends = collections.Counter(e.data["reason"]["kind"] for e in events if e.type == "turn/end")
    texts = {
        block["text"]
        for e in events
        if e.type == "assistant/message"
        for block in e.data["message"]["content"]
        if block["type"] == "text"
    }
    lost = sum(len(r["lost"]) for r in reports)
    missing = sum(1 for r in reports for answer in r["stored"] if answer not in texts)
    result = {
        "store": args.store.split("?")[0].split("://")[0],
        "writers": args.writers,
        "turnsPerWriter": args.turns,
        "turnEnds": dict(ends),
        "interrupted": ends.get("interrupted", 0),
        "answersLost": lost,
        "acknowledgedButMissing": missing,
        "busyOpens": sum(r["busy"] for r in reports),
        "events": len(events),
        "seconds": round(elapsed, 2),
        "turnsPerSecond": round(sum(ends.values()) / elapsed, 1),
    }
    if args.json:
        print(json.dumps(result))
        return
    for key, value in result.items():
        print(f"{key:>24}: {value}")


if __name__ == "__main__":
    main()
