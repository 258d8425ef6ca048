"""Writer processes for testing single-writer leases with real processes (``python -m dshpy.testing.lease_workers``).

Two roles, both driven through the public store API:

``hold URL SESSION``
    Open the session, start a turn and flush it (a turn in progress, as a streaming
    ``dshpy run`` leaves it), print ``ready``, then wait on stdin: the line ``finish``
    ends the turn and closes the session cleanly (printing ``closed``); being killed
    leaves the turn open, as a crash does.

``turns URL SESSION WRITER COUNT``
    The issue's scenario: COUNT times, open the session (retrying while another writer
    holds it), write one whole turn flushing as a streaming agent does (the answer is
    ``writer W turn K``), and close. Prints one JSON line: the answers that were
    stored, the ones lost to a conflict, and how many opens found the session busy.
"""

from __future__ import annotations

import contextlib
import random
import sys
import time
from typing import Any

import orjson

import dshpy
from dshpy.log.session import Session
from dshpy.testing.builders import assistant_data, user_message

__all__ = ["answer_text", "main"]

_BUSY_PAUSE_S = (0.001, 0.01)
"""How long a writer that found the session busy waits before trying again (uniformly drawn)."""


def answer_text(writer: int, turn: int) -> str:
    """The answer writer ``writer`` stores in its ``turn``-th turn (what a test looks for)."""
    return f"writer {writer} turn {turn}"


def _start_turn(session: Session, prompt: str) -> int:
    number = session.next_turn
    session.append("turn/start", {"turn": number})
    session.append("step/start", {"turn": number, "step": 1})
    session.append("user/message", user_message(prompt), surface_op="append")
    session.flush()  # the agent loop flushes before every model request
    return number


def _finish_turn(session: Session, number: int, answer: str) -> None:
    session.append("assistant/message", assistant_data(number, 1, answer), surface_op="append")
    session.append("step/end", {"turn": number, "step": 1})
    session.append("turn/end", {"turn": number, "reason": {"kind": "completed"}})
    session.flush()


def _hold(url: str, session_id: str) -> int:
    store = dshpy.open_store(url)
    session = store.open(session_id)
    number = _start_turn(session, "a question being answered")
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "finish":
        return 1
    _finish_turn(session, number, "the answer")
    session.close()
    store.close()
    print("closed", flush=True)
    return 0


def _open_when_free(store: Any, session_id: str, rng: random.Random) -> tuple[Session, int]:
    busy = 0
    while True:
        try:
            return store.open(session_id), busy
        except dshpy.SessionBusyError:
            busy += 1
            time.sleep(rng.uniform(*_BUSY_PAUSE_S))
        except dshpy.ConflictError:  # without a lease, open's repair can race a live writer's flush
            time.sleep(rng.uniform(*_BUSY_PAUSE_S))


def _turns(url: str, session_id: str, writer: int, count: int) -> int:
    rng = random.Random(writer)
    store = dshpy.open_store(url)
    stored: list[str] = []
    lost: list[str] = []
    busy = 0
    for index in range(count):
        answer = answer_text(writer, index)
        session, waited = _open_when_free(store, session_id, rng)
        busy += waited
        try:
            number = _start_turn(session, f"question {index} from writer {writer}")
            time.sleep(rng.uniform(0.0, 0.005))  # the model is thinking
            _finish_turn(session, number, answer)
            stored.append(answer)
        except dshpy.ConflictError:  # someone else wrote into (or closed) our turn: the answer is lost
            lost.append(answer)
        with contextlib.suppress(dshpy.ConflictError):  # a lost tail cannot be stored any more (counted above)
            session.close()
    store.close()
    print(orjson.dumps({"writer": writer, "stored": stored, "lost": lost, "busy": busy}).decode(), flush=True)
    return 0


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[0] == "hold":
        return _hold(argv[1], argv[2])
    if len(argv) == 5 and argv[0] == "turns":
        return _turns(argv[1], argv[2], int(argv[3]), int(argv[4]))
    print("usage: lease_workers hold URL SESSION | turns URL SESSION WRITER COUNT", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
