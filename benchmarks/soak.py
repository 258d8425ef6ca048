"""Soak: many SIGKILL trials and single-byte flips per durable backend, and what they found.

Run: .venv/bin/python benchmarks/soak.py [--kills 1000] [--flips 1000] [--seed N] [--only flips|kills]
(PostgreSQL kill trials and row flips run when ``$DSH_TEST_POSTGRES_DSN`` is set.)

The test suite keeps these small (200 kills per backend, a byte-flip sweep over one small
file); this script runs them at soak size and prints counts, never a pass/fail of its own
beyond "silent" outcomes, which are the ones the store promises never to produce.

Kills reuse the crash test (``tests/crash/test_kill9.py``) with ``DSHPY_CRASH_KILLS`` raised:
a forked writer appends turns, flushing at random points, and is killed with SIGKILL at a
random moment; every acknowledged event must survive and an open turn must come back
``interrupted``.

Flips damage a copy of a small committed store one byte at a time (a random position, a
random non-zero XOR mask) and read every session back. Each flip is one of:

* ``exact``: every session reads back unchanged (the byte was slack: padding, free pages);
* ``detected``: a :class:`dshpy.StoreError` names the damage, and the damaged files are
  left byte for byte as they were by the attempt to open them;
* ``raw``: some other exception escaped (a bug: errors must come from dshpy's tree);
* ``altered`` / ``lost``: events read back different, or fewer, with no error (the
  promise broken);
* ``written``: an open of the damaged store changed its files (a torn-tail recovery moved
  bytes aside is reported here too, with the session it dropped from).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import dshpy
from dshpy.testing.builders import TurnScript

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

FLIP_BACKENDS = {
    "sqlite": "sqlite:///{root}/flip.db",
    "jsonl": "jsonl:///{root}/flip-plain?compression=none",
    "jsonl+zstd": "jsonl:///{root}/flip-zstd?compression=zstd",
}


# -- kills --------------------------------------------------------------------------------------------


def run_kills(kills: int) -> None:
    """The crash test at soak size, one backend at a time, timed."""
    backends = ["sqlite", "jsonl", "jsonl+zstd"]
    if os.environ.get("DSH_TEST_POSTGRES_DSN"):
        backends.append("postgres")
    else:
        print("kills: postgres skipped (set DSH_TEST_POSTGRES_DSN to include it)")
    env = {**os.environ, "DSHPY_CRASH_KILLS": str(kills)}
    for backend in backends:
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/crash/test_kill9.py",
             "-k", f"[{backend}]"],
            cwd=ROOT, env=env, capture_output=True, text=True, check=False,
        )
        seconds = time.perf_counter() - started
        last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr.strip()[-200:]
        verdict = "ok" if done.returncode == 0 else "FAILED"
        print(f"kills  {backend:<11} {kills:>6} SIGKILLs  {verdict:<6} {seconds:7.1f} s   ({last})")
        if done.returncode != 0:
            print(done.stdout[-4000:])


# -- flips --------------------------------------------------------------------------------------------


def build_store(url: str, sessions: int, turns: int, seed: int) -> dict[str, list[dict[str, object]]]:
    """A small committed store; returns every session's events as wire dicts (the truth to compare with)."""
    rng = random.Random(seed)
    store = dshpy.open_store(url)
    truth: dict[str, list[dict[str, object]]] = {}
    for _ in range(sessions):
        session = store.create(cwd="/soak")
        script = TurnScript(session)
        for _ in range(turns):
            script.turn(steps=rng.randint(1, 2), tools_per_step=rng.randint(0, 2))
            session.flush()
        truth[session.id] = [event.to_wire() for event in session.events]
        session.close()
    store.close()
    return truth


def files_of(directory: Path) -> dict[str, bytes]:
    """Every regular file under ``directory`` with its bytes (the stores here are small)."""
    paths = sorted(path for path in directory.rglob("*") if path.is_file())
    return {str(path.relative_to(directory)): path.read_bytes() for path in paths}


def digest(directory: Path, names: list[str]) -> str:
    hasher = hashlib.sha256()
    for name in names:
        path = directory / name
        hasher.update(name.encode())
        hasher.update(path.read_bytes() if path.exists() else b"<gone>")
    return hasher.hexdigest()


def damage_targets(backend: str, files: dict[str, bytes]) -> list[str]:
    """The files a flip may hit: the database file, or every session log (not locks or caches)."""
    if backend == "sqlite":
        return [name for name in files if name.endswith("flip.db")]
    return [name for name in files if ".jsonl" in name and "torn" not in name]


def locate(sizes: list[tuple[str, int]], position: int) -> tuple[str, int]:
    """The file and offset of ``position`` in the files laid end to end."""
    for name, size in sizes:
        if position < size:
            return name, position
        position -= size
    raise ValueError(f"position {position} is past the last file")


def classify(url: str, truth: dict[str, list[dict[str, object]]]) -> str:
    store = None
    try:
        store = dshpy.open_store(url)
        for session_id, expected in truth.items():
            got = [event.to_wire() for event in store.read(session_id)]
            if got != expected:
                if len(got) < len(expected) and got == expected[: len(got)]:
                    return "lost"
                return "altered"
            opened = store.open(session_id)  # the crash-repair path must agree with the read path
            again = [event.to_wire() for event in opened.events]
            opened.close()
            if again != expected:
                return "lost" if len(again) < len(expected) else "altered"
        listed = {info.id: info.event_count for info in store.list()}
        if any(listed.get(session_id) != len(expected) for session_id, expected in truth.items()):
            return "altered"
        return "exact"
    except dshpy.StoreError:
        return "detected"
    except Exception as error:
        return f"raw:{type(error).__name__}"
    finally:
        if store is not None:
            with contextlib.suppress(Exception):  # a damaged store may refuse even to close cleanly
                store.close()


def run_flips(backend: str, flips: int, seed: int, work: Path) -> Counter[str]:
    pristine_dir = work / f"{backend}-pristine"
    pristine_dir.mkdir()
    url_of = FLIP_BACKENDS[backend]
    truth = build_store(url_of.format(root=pristine_dir), sessions=3, turns=4, seed=seed)
    pristine = files_of(pristine_dir)
    targets = damage_targets(backend, pristine)
    sizes = [(name, len(pristine[name])) for name in targets]
    total = sum(size for _, size in sizes)
    rng = random.Random(seed)
    outcomes: Counter[str] = Counter()
    trial_dir = work / f"{backend}-trial"
    started = time.perf_counter()
    for _ in range(flips):
        if trial_dir.exists():
            shutil.rmtree(trial_dir)
        trial_dir.mkdir()
        for name, data in pristine.items():
            path = trial_dir / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        target, offset = locate(sizes, rng.randrange(total))
        path = trial_dir / target
        data = bytearray(path.read_bytes())
        data[offset] ^= rng.randrange(1, 256)
        path.write_bytes(bytes(data))
        before = digest(trial_dir, targets)
        outcome = classify(url_of.format(root=trial_dir), truth)
        if outcome == "detected" and digest(trial_dir, targets) != before:
            outcome = "written"
        outcomes[outcome] += 1
    seconds = time.perf_counter() - started
    report(backend, flips, f"over {total:,} B", outcomes, seconds)
    return outcomes


def run_postgres_flips(dsn: str, flips: int, seed: int) -> Counter[str]:
    """Flips on PostgreSQL: one byte of a stored row's text (an event body or a header) changed through SQL.

    The server's own pages are its business (``initdb --data-checksums``); what dshpy can
    answer for is a row altered behind its back (a manual UPDATE, a buggy tool, a partial
    restore). The byte stays printable ASCII so the server accepts the UPDATE. After each
    trial the row is restored and anything the trial appended is removed.
    """
    import psycopg
    from psycopg import sql

    from dshpy.testing.postgres import drop_schema, scratch_schema, store_url

    schema = scratch_schema("dshpy_soak")
    url = store_url(dsn, schema)
    truth = build_store(url, sessions=3, turns=4, seed=seed)
    lengths = {session_id: len(events) for session_id, events in truth.items()}
    rng = random.Random(seed)
    outcomes: Counter[str] = Counter()
    events_table = sql.Identifier(schema, "events")
    sessions_table = sql.Identifier(schema, "sessions")
    cache_table = sql.Identifier(schema, "projection_cache")
    started = time.perf_counter()
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            rows = [("events", sid, seq, text) for sid, seq, text in conn.execute(
                sql.SQL("SELECT session_id, seq, body FROM {}").format(events_table)
            )]
            rows += [("sessions", sid, -1, text) for sid, text in conn.execute(
                sql.SQL("SELECT id, header FROM {}").format(sessions_table)
            )]
            total = sum(len(text) for *_, text in rows)
            for _ in range(flips):
                table, session_id, seq, text = rows[rng.randrange(len(rows))]
                position = rng.randrange(len(text))
                while not 0x20 <= ord(text[position]) < 0x7F:
                    position = rng.randrange(len(text))
                flipped = chr(ord(text[position]) ^ rng.randrange(1, 0x20))
                while not 0x20 <= ord(flipped) < 0x7F:
                    flipped = chr(ord(text[position]) ^ rng.randrange(1, 0x80))
                damaged = text[:position] + flipped + text[position + 1 :]
                if table == "events":
                    update = sql.SQL("UPDATE {} SET body = %s WHERE session_id = %s AND seq = %s").format(events_table)
                    conn.execute(update, (damaged, session_id, seq))
                else:
                    update = sql.SQL("UPDATE {} SET header = %s WHERE id = %s").format(sessions_table)
                    conn.execute(update, (damaged, session_id))
                conn.execute(sql.SQL("DELETE FROM {}").format(cache_table))
                outcome = classify(url, truth)
                counts = sql.SQL("SELECT session_id, count(*) FROM {} GROUP BY session_id").format(events_table)
                stored = dict(conn.execute(counts).fetchall())
                if outcome == "detected" and stored != lengths:
                    outcome = "written"
                outcomes[outcome] += 1
                with conn.transaction():
                    for sid, length in lengths.items():
                        trim = sql.SQL("DELETE FROM {} WHERE session_id = %s AND seq >= %s").format(events_table)
                        conn.execute(trim, (sid, length))
                    if table == "events":
                        conn.execute(update, (text, session_id, seq))
                    else:
                        conn.execute(update, (text, session_id))
    finally:
        drop_schema(dsn, schema)
    seconds = time.perf_counter() - started
    report("postgres", flips, f"over {total:,} B of row text", outcomes, seconds)
    return outcomes


def report(backend: str, flips: int, what: str, outcomes: Counter[str], seconds: float) -> None:
    broken = ("altered", "lost", "written")
    silent = sum(count for key, count in outcomes.items() if key in broken or key.startswith("raw"))
    summary = "  ".join(f"{key} {count}" for key, count in sorted(outcomes.items()))
    print(f"flips  {backend:<11} {flips:>6} flips {what}  {summary}   silent/raw {silent}  ({seconds:.1f} s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=1000, help="SIGKILL trials per durable backend")
    parser.add_argument("--flips", type=int, default=1000, help="single-byte flips per file backend")
    parser.add_argument("--seed", type=int, default=20261201)
    parser.add_argument("--only", choices=["flips", "kills"])
    args = parser.parse_args()
    if args.only != "kills":
        with tempfile.TemporaryDirectory(prefix="dshpy-soak-") as work:
            for backend in FLIP_BACKENDS:
                run_flips(backend, args.flips, args.seed, Path(work))
        dsn = os.environ.get("DSH_TEST_POSTGRES_DSN")
        if dsn:
            run_postgres_flips(dsn, args.flips, args.seed)
        else:
            print("flips: postgres skipped (set DSH_TEST_POSTGRES_DSN to include it)")
    if args.only != "flips":
        run_kills(args.kills)


if __name__ == "__main__":
    main()
