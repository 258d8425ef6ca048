"""Nearest vectors: semantic search's numpy ranking against sqlite-vec's ``vec0`` KNN, at 10k and 100k chunks.

Run: .venv/bin/python benchmarks/vectors.py [--sizes 10000 100000] [--queries 60]

Semantic search ranks with an exact cosine over an in-memory float32 matrix
(:class:`dshpy.query.semantic.SemanticIndex`: ``matrix @ query``, then the top 100).
sqlite-vec would keep the vectors in the SQLite file instead. It is not a dependency:
this Python's ``sqlite3`` may lack ``enable_load_extension`` (the one we build on
does), so it is loaded through apsw when both are installed
(``pip install apsw sqlite-vec``); otherwise only numpy is measured. Vectors are
random unit vectors of the local model's 64 dimensions; both sides return the same
top 100, which is checked, so only the time differs.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

DIMENSIONS = 64
TOP = 100


def percentiles(rank: Callable[[Any], Any], queries: Any) -> str:
    samples = []
    for query in queries:
        started = time.perf_counter()
        rank(query)
        samples.append(time.perf_counter() - started)
    samples.sort()
    p95 = samples[min(len(samples) - 1, int(0.95 * len(samples)))]
    return f"p50 {1000 * statistics.median(samples):.2f} / p95 {1000 * p95:.2f} ms"


def sqlite_vec_table(matrix: Any) -> Any | None:
    """An in-memory ``vec0`` table of ``matrix``'s rows (rowid = row + 1), or None without apsw and sqlite-vec."""
    try:
        import apsw
        import sqlite_vec
    except ImportError:
        return None
    db = apsw.Connection(":memory:")
    db.enable_load_extension(True)
    db.load_extension(sqlite_vec.loadable_path())
    db.execute(f"CREATE VIRTUAL TABLE v USING vec0(embedding float[{DIMENSIONS}] distance_metric=cosine)")
    with db:
        db.executemany(
            "INSERT INTO v (rowid, embedding) VALUES (?, ?)", ((i + 1, row.tobytes()) for i, row in enumerate(matrix))
        )
    return db


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=60)
    args = parser.parse_args()
    rng = np.random.default_rng(7)
    for size in args.sizes:
        matrix = rng.standard_normal((size, DIMENSIONS), dtype=np.float32)
        matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
        queries = rng.standard_normal((args.queries, DIMENSIONS), dtype=np.float32)
        queries /= np.linalg.norm(queries, axis=1, keepdims=True)

        def numpy_top(query: Any, matrix: Any = matrix) -> list[int]:
            scores = matrix @ query
            best = np.argpartition(-scores, TOP - 1)[:TOP]
            return [int(i) + 1 for i in best[np.argsort(-scores[best])]]

        line = f"{size} chunks: numpy {percentiles(numpy_top, queries)}"
        started = time.perf_counter()
        db = sqlite_vec_table(matrix)
        if db is None:
            print(line + " | sqlite-vec not measured (pip install apsw sqlite-vec)")
            continue
        loaded = time.perf_counter() - started

        def vec_top(query: Any, db: Any = db) -> list[int]:
            sql = "SELECT rowid FROM v WHERE embedding MATCH ? AND k = ? ORDER BY distance"
            return [row[0] for row in db.execute(sql, (query.tobytes(), TOP))]

        overlap = statistics.mean(len(set(numpy_top(q)) & set(vec_top(q))) / TOP for q in queries[:10])
        timing = percentiles(vec_top, queries)
        print(f"{line} | sqlite-vec {timing} (loaded in {loaded:.1f} s; same top {TOP}: {overlap:.2f})")


if __name__ == "__main__":
    main()
