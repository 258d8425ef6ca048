"""``StoredLog``: the log whose older events stay in the store behaves as the list of all events."""

from __future__ import annotations

import pytest

from dshpy import CorruptSessionError, Session, SessionEvent
from dshpy.log.stored_log import CHUNK_EVENTS, StoredLog
from dshpy.testing.builders import TurnScript


@pytest.fixture(scope="module")
def events() -> list[SessionEvent]:
    session = Session.new(session_id="stored-log")
    script = TurnScript(session)
    while len(session) < 3 * CHUNK_EVENTS:
        script.turn(steps=2)
    return list(session.events)


def _log(events: list[SessionEvent], stored: int, *, streamed: bool, reads: list[tuple[int, int]]) -> StoredLog:
    def fetch(start: int, stop: int) -> list[SessionEvent]:
        reads.append((start, stop))
        return events[start:stop]

    log = StoredLog("stored-log", stored, fetch, (lambda start: iter(events[start:])) if streamed else None)
    for event in events[stored:]:
        log.append(event)
    return log


@pytest.mark.parametrize("streamed", [False, True])
def test_every_read_gives_the_events_of_the_full_list(events, streamed) -> None:
    reads: list[tuple[int, int]] = []
    stored = len(events) - 7
    log = _log(events, stored, streamed=streamed, reads=reads)
    assert len(log) == len(events) and log.stored == stored
    assert reads == []  # nothing is read until something is asked for
    for index in (0, 1, CHUNK_EVENTS - 1, CHUNK_EVENTS, stored - 1, stored, len(events) - 1, -1, -len(events)):
        assert log[index] is events[index]
    for cut in (slice(0, 3), slice(CHUNK_EVENTS - 2, CHUNK_EVENTS + 2), slice(stored - 3, stored + 3), slice(5, None),
                slice(None, None, 97), slice(-4, None), slice(10, 2)):  # fmt: skip
        assert log[cut] == events[cut]
    assert list(log) == events
    assert list(reversed(log)) == events[::-1]
    with pytest.raises(IndexError):
        log[len(events)]
    assert log.held <= 4 * CHUNK_EVENTS  # only a few chunks stay in memory


def test_a_store_that_no_longer_holds_the_events_is_corruption(events) -> None:
    short = StoredLog("stored-log", 2 * CHUNK_EVENTS, lambda start, stop: events[start : stop - 1])
    with pytest.raises(CorruptSessionError, match=r"no longer holds events 0\.\.511"):
        short[3]
    shifted = StoredLog("stored-log", 2 * CHUNK_EVENTS, lambda start, stop: events[start + 1 : stop + 1],
                        lambda start: iter(events[start + 1 :]))  # fmt: skip
    with pytest.raises(CorruptSessionError, match="no longer holds events"):
        shifted[CHUNK_EVENTS]
    with pytest.raises(CorruptSessionError, match="no longer holds events 0"):
        list(shifted)
    ended = StoredLog("stored-log", 2 * CHUNK_EVENTS, lambda start, stop: [], lambda start: iter(events[:10]))
    with pytest.raises(CorruptSessionError, match="read 0 events"):
        list(ended)
