"""Following a session live: yield events as any writer commits them.

Followers always read **by seq**: they remember the next seq they owe the caller and
ask the store for everything from there. Wake-ups (a timer here, LISTEN/NOTIFY on
PostgreSQL) only decide *when* to read, never *what*, so a missed or duplicated
wake-up can delay an event but never lose or repeat one.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator

from dshpy.core.events import SessionEvent
from dshpy.core.json import MAX_SAFE_INTEGER

__all__ = ["StopSignal", "check_follow_args", "poll_follow", "stop_predicate", "wait_or_stop"]

StopSignal = threading.Event | Callable[[], bool] | None
"""What ends a follow: a :class:`threading.Event` (set it), or a callable that returns True."""

Reader = Callable[[str, int], Iterator[SessionEvent]]


def stop_predicate(stop: StopSignal) -> Callable[[], bool]:
    """A no-argument check for ``stop`` (never true for ``None``)."""
    if stop is None:
        return lambda: False
    if isinstance(stop, threading.Event):
        return stop.is_set
    if callable(stop):
        return stop
    raise TypeError(f"stop must be a threading.Event, a callable or None, got {type(stop).__name__}")


def wait_or_stop(stop: StopSignal, seconds: float) -> None:
    """Sleep ``seconds``, returning early when an Event ``stop`` is set (a callable is checked after)."""
    if seconds <= 0:
        return
    if isinstance(stop, threading.Event):
        stop.wait(seconds)
    else:
        time.sleep(seconds)


def check_from_seq(from_seq: object) -> None:
    """Refuse a start position that is not a seq (every read takes one)."""
    if type(from_seq) is not int or not 0 <= from_seq <= MAX_SAFE_INTEGER:
        raise ValueError(f"from_seq must be a non-negative safe integer, got {from_seq!r}")


def check_follow_args(from_seq: int, poll_interval: float) -> None:
    """Refuse arguments that would make a follow read the wrong range or spin."""
    check_from_seq(from_seq)
    if not isinstance(poll_interval, int | float) or not math.isfinite(poll_interval) or poll_interval <= 0:
        raise ValueError(f"poll_interval must be a positive number of seconds, got {poll_interval!r}")


def poll_follow(
    read: Reader, session_id: str, from_seq: int, poll_interval: float, stop: StopSignal
) -> Iterator[SessionEvent]:
    """Re-read from the next unseen seq every ``poll_interval`` seconds until ``stop``.

    ``stop`` is checked after every yielded event and between polls, so a follow ends
    at most one ``poll_interval`` after it is set (at once, for an Event).
    """
    should_stop = stop_predicate(stop)
    next_seq = from_seq
    while not should_stop():
        for event in read(session_id, next_seq):
            yield event
            next_seq = event.seq + 1
            if should_stop():
                return
        wait_or_stop(stop, poll_interval)
