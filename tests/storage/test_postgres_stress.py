"""Many writers, one PostgreSQL store: 8 processes append to 2 shared sessions with retries on conflict.

Each batch is a whole turn carrying a ``plugin:dshpy/stress`` record that names its
writer and number. A writer retries a batch that lost (ConflictError, or a log that
grew under it) at the new end, and now and then re-sends a batch it already got
acknowledged, which must be a no-op. Afterwards every session is contiguous, passes
``dshpy.validate``, and holds every acknowledged batch exactly once, where it was
acknowledged, and nothing else.
"""

from __future__ import annotations

import multiprocessing
import random

import dshpy
from dshpy.core.events import event_from_parts

WRITERS = 8
SESSIONS = 2
BATCHES_PER_SESSION = 12
MAX_ATTEMPTS = 500
"""Bounded retries: a writer that cannot win this often is a bug, not bad luck."""


def _batch(stored, writer, number):
    n = len(stored)
    turn = sum(1 for e in stored if e.type == "turn/start") + 1
    return [
        event_from_parts("turn/start", n, writer, {"turn": turn}),
        event_from_parts("plugin:dshpy/stress", n + 1, writer, {"writer": writer, "batch": number}, ignorable=True),
        event_from_parts("turn/end", n + 2, writer, {"turn": turn, "reason": {"kind": "completed"}}),
    ]


def _writer(url, session_ids, writer, barrier, results):
    rng = random.Random(writer)
    store = dshpy.open_store(url)
    barrier.wait(timeout=60)
    acked: list[tuple[str, int, int]] = []
    sent: list[tuple[str, int, list]] = []
    conflicts = resends = 0
    plan = [sid for sid in session_ids for _ in range(BATCHES_PER_SESSION)]
    rng.shuffle(plan)
    for number, session_id in enumerate(plan):
        for _attempt in range(MAX_ATTEMPTS):
            stored = list(store.read(session_id))
            batch = _batch(stored, writer, number)
            try:
                store.append(session_id, batch, expected_seq=len(stored))
            except (dshpy.ConflictError, dshpy.InvariantError):
                conflicts += 1
                continue
            acked.append((session_id, number, len(stored)))
            sent.append((session_id, len(stored), batch))
            break
        else:
            raise AssertionError(f"writer {writer} lost {MAX_ATTEMPTS} times in a row")
        if rng.random() < 0.2:  # a client that lost the reply re-sends an acknowledged batch: a no-op
            old_sid, old_seq, old_batch = rng.choice(sent)
            store.append(old_sid, old_batch, expected_seq=old_seq)
            resends += 1
    store.close()
    results.put((writer, acked, conflicts, resends))


def test_eight_processes_two_sessions(postgres_url):
    store = dshpy.open_store(postgres_url)
    session_ids = [store.create(session_id=f"shared-{i}").id for i in range(SESSIONS)]
    store.close()  # nothing open across fork
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(WRITERS)
    results = context.Queue()
    workers = [
        context.Process(target=_writer, args=(postgres_url, session_ids, writer, barrier, results))
        for writer in range(1, WRITERS + 1)
    ]
    for worker in workers:
        worker.start()
    outcomes = [results.get(timeout=120) for _ in workers]
    for worker in workers:
        worker.join(timeout=30)
        assert worker.exitcode == 0
    store = dshpy.open_store(postgres_url)
    acked = {(sid, writer, number): seq for writer, batches, _, _ in outcomes for sid, number, seq in batches}
    assert len(acked) == WRITERS * SESSIONS * BATCHES_PER_SESSION
    for session_id in session_ids:
        stored = list(store.read(session_id))
        assert [e.seq for e in stored] == list(range(len(stored)))
        dshpy.validate(stored)
        found = [(e.data["writer"], e.data["batch"], e.seq - 1) for e in stored if e.type == "plugin:dshpy/stress"]
        assert len(found) == len(set(found)) == WRITERS * BATCHES_PER_SESSION  # each batch exactly once
        assert len(stored) == 3 * len(found)
        for writer, number, seq in found:
            assert acked[(session_id, writer, number)] == seq  # where its writer was told it landed
            assert stored[seq].time == stored[seq + 2].time == writer  # and not interleaved with another
    assert sum(conflicts for _, _, conflicts, _ in outcomes) > 0  # they really raced
    assert sum(resends for _, _, _, resends in outcomes) > 0
    store.close()
