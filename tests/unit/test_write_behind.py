"""Write batching: appends wait for flush(), or for the write-behind window when one is set."""

import time

import pytest

import dshpy
from dshpy.testing.builders import TurnScript


def stored(store, session):
    return len(list(store.read(session.id)))


def wait_until(predicate, timeout=3.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.005)
    return predicate()


def test_appends_stay_in_memory_until_flush():
    store = dshpy.open_store("memory:")
    session = store.create()
    TurnScript(session).turn()
    time.sleep(0.05)
    assert stored(store, session) == 0
    session.flush()
    assert stored(store, session) == len(session.events)


def test_write_behind_flushes_by_itself():
    store = dshpy.open_store("memory:")
    session = store.create(write_behind_ms=30)
    TurnScript(session).turn()
    assert stored(store, session) == 0
    assert wait_until(lambda: stored(store, session) == len(session.events))
    assert session.pending_count == 0


def test_write_behind_window_is_not_pushed_back_by_later_appends():
    store = dshpy.open_store("memory:")
    session = store.create(write_behind_ms=40)
    start = time.monotonic()
    first_durable = None
    while time.monotonic() - start < 0.6:
        session.append("user/message", {"id": dshpy.new_message_id(), "role": "user", "content": [],
                                        "source": {"kind": "user"}}, surface_op="append")
        if first_durable is None and stored(store, session) > 0:
            first_durable = time.monotonic() - start
        time.sleep(0.01)
    assert first_durable is not None and first_durable < 0.4  # a debounce would never have flushed


def test_write_behind_on_open_and_explicit_flush_cancels_timer():
    store = dshpy.open_store("memory:")
    session = store.create()
    session.close()
    live = store.open(session.id, write_behind_ms=10_000)
    TurnScript(live).turn()
    assert live.flush() == len(live.events)
    live.close()


@pytest.mark.parametrize("bad", [-1, 1.5, "10"])
def test_bad_write_behind_values(bad):
    session = dshpy.open_store("memory:").create()
    with pytest.raises(ValueError, match="write_behind_ms"):
        session.set_write_behind(bad)
