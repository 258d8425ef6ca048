"""Byte-flip sweeps over small committed JSONL logs: how each flip reads back.

Run: .venv/bin/python benchmarks/jsonl_flips.py [--turns 2] [--structural-turns 6]

1. Every byte of a plain and a zstd log, flipped with a few XOR masks one at a time.
2. Every *structural* byte of a zstd log (magic, frame headers, block headers, content
   checksums), flipped with all 255 masks: the bytes that decide where frames end.

Each flip is read back through a fresh store and counted as ``exact``, ``corrupt``
(CorruptSessionError), ``newer`` (FormatVersionError: a header version flipped upward),
``altered`` (same count, other content: plain JSONL has no checksum) or ``LOST`` (fewer
events and no error), which the store promises never to produce.
"""

from __future__ import annotations

import argparse
import functools
import logging
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from dshpy.errors import CorruptSessionError, FormatVersionError
from dshpy.storage.jsonl import JsonlStore
from dshpy.storage.jsonl.zstd_frames import scan_frames
from dshpy.testing.builders import TurnScript

MASKS = (0xFF, 0x01, 0x08, 0x20, 0x80)


def committed(root: Path, compression: str, turns: int) -> tuple[Path, bytes, list[object]]:
    store = JsonlStore(root, compression=compression)
    session = store.create(session_id="s1", cwd="/w")
    for n in range(turns):
        TurnScript(session).turn(f"prompt {n}", steps=2)
        session.flush()
    session.close()
    path = next(root.rglob("session.v4.jsonl*"))
    return path, path.read_bytes(), [event.to_wire() for event in store.read("s1")]


def outcome(root: Path, compression: str, expected: list[object]) -> str:
    try:
        got = [event.to_wire() for event in JsonlStore(root, compression=compression).read("s1")]
    except CorruptSessionError:
        return "corrupt"
    except FormatVersionError:
        return "newer"
    if got == expected:
        return "exact"
    return "altered" if len(got) == len(expected) else "LOST"


def sweep(
    path: Path, original: bytes, positions: list[int], masks: tuple[int, ...], read: Callable[[], str]
) -> Counter[str]:
    counts: Counter[str] = Counter()
    with open(path, "r+b") as file:
        for position in positions:
            for mask in masks:
                file.seek(position)
                file.write(bytes([original[position] ^ mask]))
                file.flush()
                counts[read()] += 1
            file.seek(position)
            file.write(original[position : position + 1])
            file.flush()
    return counts


def structural_positions(data: bytes) -> list[int]:
    """Magic, frame header, every block header and the checksum of each frame."""
    positions: list[int] = []
    for start, end in scan_frames(data).frames:
        descriptor = data[start + 4]
        single = bool(descriptor & 0x20)
        flag = descriptor >> 6
        offset = start + 5 + (0 if single else 1) + (0, 1, 2, 4)[descriptor & 3]
        offset += (1 if single else 0) if flag == 0 else 1 << flag
        positions += range(start, offset)
        while True:
            header = int.from_bytes(data[offset : offset + 3], "little")
            positions += range(offset, offset + 3)
            offset += 3 + (1 if (header >> 1) & 3 == 1 else header >> 3)
            if header & 1:
                break
        positions += range(offset, end)
    return positions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=2)
    parser.add_argument("--structural-turns", type=int, default=6)
    args = parser.parse_args()
    logging.disable(logging.CRITICAL)
    with tempfile.TemporaryDirectory() as scratch:
        for compression in ("none", "zstd"):
            root = Path(scratch) / compression
            path, original, events = committed(root, compression, args.turns)
            started = time.perf_counter()
            counts = sweep(
                path, original, list(range(len(original))), MASKS, functools.partial(outcome, root, compression, events)
            )
            seconds = time.perf_counter() - started
            print(
                f"{compression:<5} every byte of {len(original):,} B x masks {[hex(m) for m in MASKS]}: "
                f"{sum(counts.values()):,} flips {dict(sorted(counts.items()))}  ({seconds:.1f} s)"
            )
        root = Path(scratch) / "structural"
        path, original, events = committed(root, "zstd", args.structural_turns)
        positions = structural_positions(original)
        started = time.perf_counter()
        counts = sweep(
            path, original, positions, tuple(range(1, 256)), functools.partial(outcome, root, "zstd", events)
        )
        seconds = time.perf_counter() - started
        print(
            f"zstd  {len(positions)} structural bytes of {len(original):,} B x all 255 masks: "
            f"{sum(counts.values()):,} flips {dict(sorted(counts.items()))}  ({seconds:.1f} s)"
        )


if __name__ == "__main__":
    main()
