"""Following a PostgreSQL session live: LISTEN/NOTIFY wake-ups, reads by seq.

Every committed append runs ``pg_notify('dshpy:<schema>', '<session id> <next seq>')``
inside its transaction, so the notification is delivered exactly when the rows become
visible. A follower LISTENs on a dedicated connection (not a pooled one: LISTEN
belongs to a session, and a pooled connection would carry it to other users).

Notifications only say *when* to read. What to read is always "everything from the
next seq I have not yielded", through the ordinary pooled reads, so:

- LISTEN is issued before the first read, so a commit in between is not missed;
- after the listening connection breaks, the follower reconnects, LISTENs again and
  re-reads from its next seq (notifications sent while it was away are lost, the
  events are not);
- it re-reads every ``resync_s`` seconds even without a notification, so a lost
  notification only delays events;
- while the server is unreachable it keeps retrying, and picks up where it was.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
from psycopg import sql

from dshpy.core.events import SessionEvent
from dshpy.errors import StoreUnavailableError
from dshpy.storage.follow import StopSignal, stop_predicate, wait_or_stop

__all__ = ["notify_follow", "payload_next_seq"]

log = logging.getLogger(__name__)

_RETRY_S = 1.0
"""Pause before retrying a read or a LISTEN connection after the server was unreachable."""


def payload_next_seq(payload: str, session_id: str) -> int | None:
    """The next seq a notification announces for ``session_id``, or None if it is about another session."""
    name, _, seq = payload.partition(" ")
    if name != session_id or not seq.isdigit():
        return None
    return int(seq)


def _close(conn: psycopg.Connection[Any] | None) -> None:
    if conn is not None:
        with contextlib.suppress(Exception):
            conn.close()


def _listen(connect: Callable[[], psycopg.Connection[Any]], channel: str) -> psycopg.Connection[Any] | None:
    """A new connection LISTENing on ``channel``, or None while the server cannot be reached."""
    conn: psycopg.Connection[Any] | None = None
    try:
        conn = connect()
        conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
    except (psycopg.Error, StoreUnavailableError) as error:
        log.warning("cannot LISTEN on %s (will retry): %s", channel, error)
        _close(conn)
        return None
    return conn


def _woken(listener: psycopg.Connection[Any], session_id: str, next_seq: int, timeout: float) -> bool:
    """Wait up to ``timeout`` for a notification that the session grew past ``next_seq``."""
    for note in listener.notifies(timeout=timeout):
        announced = payload_next_seq(note.payload, session_id)
        if announced is not None and announced > next_seq:
            return True
    return False


def notify_follow(
    *,
    read: Callable[[str, int], Iterator[SessionEvent]],
    listen: Callable[[], psycopg.Connection[Any]],
    channel: str,
    session_id: str,
    from_seq: int,
    poll_interval: float,
    resync_s: float,
    stop: StopSignal,
) -> Iterator[SessionEvent]:
    """Yield the session's events from ``from_seq`` on, as they are committed, until ``stop``.

    ``read`` is the store's read-by-seq, ``listen`` opens a fresh connection for LISTEN.
    ``stop`` is checked after every yielded event and at least every ``poll_interval``.
    """
    should_stop = stop_predicate(stop)
    next_seq = from_seq
    listener: psycopg.Connection[Any] | None = None
    listen_after = 0.0
    due = True
    last_read = 0.0
    try:
        while not should_stop():
            now = time.monotonic()
            if listener is None and now >= listen_after:
                listener = _listen(listen, channel)
                if listener is None:
                    listen_after = now + _RETRY_S
                else:
                    due = True  # anything committed before the LISTEN took effect is read now
            if due or now - last_read >= resync_s:
                try:
                    for event in read(session_id, next_seq):
                        yield event
                        next_seq = event.seq + 1
                        if should_stop():
                            return
                except StoreUnavailableError as error:
                    log.warning("following %s: read failed (will retry): %s", session_id, error)
                    wait_or_stop(stop, min(_RETRY_S, resync_s))
                    continue
                due = False
                last_read = time.monotonic()
                continue
            timeout = max(0.0, min(poll_interval, resync_s - (now - last_read)))
            if listener is None:
                wait_or_stop(stop, timeout)
                continue
            try:
                due = _woken(listener, session_id, next_seq, timeout)
            except psycopg.Error as error:
                log.warning("following %s: LISTEN connection lost (reconnecting): %s", session_id, error)
                _close(listener)
                listener = None
    finally:
        _close(listener)
