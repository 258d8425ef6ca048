"""Two real processes append to one session: each seq is won exactly once, losers get ConflictError."""

from __future__ import annotations

import multiprocessing

import pytest

import dshpy
from dshpy.core.events import event_from_parts

BATCHES = 40


def _append_turns(url: str, session_id: str, writer: int, results, barrier) -> None:
    store = dshpy.open_store(url)
    barrier.wait(timeout=60)
    won: list[int] = []
    conflicts = 0
    while len(won) < BATCHES:
        stored = list(store.read(session_id))
        n = len(stored)
        turn = sum(1 for e in stored if e.type == "turn/start") + 1
        batch = [
            event_from_parts("turn/start", n, writer, {"turn": turn}),
            event_from_parts("turn/end", n + 1, writer, {"turn": turn, "reason": {"kind": "completed"}}),
        ]
        try:
            store.append(session_id, batch, expected_seq=n)
        except dshpy.ConflictError:
            conflicts += 1
            continue
        except dshpy.InvariantError:  # read a log another writer was extending; retry from its new end
            conflicts += 1
            continue
        won.append(n)
    store.close()
    results.put((writer, won, conflicts))


@pytest.fixture(params=["sqlite", "jsonl", "jsonl+zstd", "postgres"])
def url(request, tmp_path):
    if request.param == "postgres":
        return request.getfixturevalue("postgres_url")  # skips, saying why, without DSH_TEST_POSTGRES_DSN
    return {
        "sqlite": f"sqlite:///{tmp_path}/two.db",
        "jsonl": f"jsonl:///{tmp_path}/two-plain?compression=none",
        "jsonl+zstd": f"jsonl:///{tmp_path}/two-zstd?compression=zstd",
    }[request.param]


def test_two_processes_never_interleave(url):
    store = dshpy.open_store(url)
    session = store.create()
    session.close()
    store.close()  # nothing open across fork (a PostgreSQL pool has threads and sockets)
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    barrier = context.Barrier(2)
    workers = [context.Process(target=_append_turns, args=(url, session.id, i, results, barrier)) for i in (1, 2)]
    for worker in workers:
        worker.start()
    outcomes = [results.get(timeout=120) for _ in workers]
    for worker in workers:
        worker.join(timeout=30)
        assert worker.exitcode == 0
    store = dshpy.open_store(url)
    stored = list(store.read(session.id))
    assert len(stored) == 2 * 2 * BATCHES
    wins = sorted(seq for _, won, _ in outcomes for seq in won)
    assert wins == list(range(0, 4 * BATCHES, 2))  # every batch start won exactly once
    for writer, won, _ in outcomes:
        for seq in won:  # the events at a writer's winning seqs are that writer's
            assert stored[seq].time == writer and stored[seq + 1].time == writer
    dshpy.validate(stored)
    assert sum(conflicts for _, _, conflicts in outcomes) > 0  # they really raced
    store.close()
