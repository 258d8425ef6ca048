"""Every read path applies the rules ``open()`` applies (issue #11 item 5).

A stored event of a type this build does not know, and that is not marked ignorable,
makes ``open()``/``inspect()`` refuse the log; ``read``, ``read_types``, ``follow`` and
``export`` must refuse it too instead of streaming it as if it were understood.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import dshpy
from dshpy import UnknownEventTypeError
from dshpy.core.events import event_from_parts
from dshpy.testing.builders import user_message
from dshpy.testing.postgres import SKIP_REASON, drop_schema, scratch_schema, store_url, test_dsn

BACKENDS = ["memory", "sqlite", "jsonl", "jsonl-zstd", "postgres"]


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path) -> Iterator[dshpy.BaseStore]:
    kind = request.param
    schema = None
    if kind == "memory":
        url = "memory:"
    elif kind == "sqlite":
        url = f"sqlite:///{tmp_path}/s.db"
    elif kind == "jsonl":
        url = f"jsonl:///{tmp_path}/root?compression=none"
    elif kind == "jsonl-zstd":
        url = f"jsonl:///{tmp_path}/root"
    else:
        dsn = test_dsn()
        if dsn is None:
            pytest.skip(SKIP_REASON)
        schema = scratch_schema()
        url = store_url(dsn, schema)
    opened = dshpy.open_store(url)
    yield opened
    opened.close()
    if schema is not None:
        drop_schema(test_dsn() or "", schema)


def _session_with_future_event(store: dshpy.BaseStore, *, ignorable: bool) -> str:
    """A session whose stored log ends with a ``future/thing`` event, as a newer harness would have written it."""
    session = store.create()
    session.append("user/message", user_message("hi"), surface_op="append")
    session.flush()
    length = len(session.events)
    session.close()
    future = event_from_parts("future/thing", length, 0, {"x": 1}, ignorable=ignorable)
    store._append(session.id, length, [future])  # the backend primitive: what another writer stored
    return session.id


def test_unknown_required_type_is_refused_by_every_read_path(store: dshpy.BaseStore) -> None:
    sid = _session_with_future_event(store, ignorable=False)
    with pytest.raises(UnknownEventTypeError, match="future/thing"):
        store.inspect(sid)
    with pytest.raises(UnknownEventTypeError, match="future/thing"):
        list(store.read(sid))
    with pytest.raises(UnknownEventTypeError, match="future/thing"):
        list(store.read(sid, from_seq=1))
    with pytest.raises(UnknownEventTypeError, match="future/thing"):
        list(store.read_types(sid, ["future/thing"]))
    with pytest.raises(UnknownEventTypeError, match="future/thing"):
        store.export(sid)
    checks = iter([*[False] * 10, *[True] * 50])  # one pass over the stored events (it is checked per event), then stop
    with pytest.raises(UnknownEventTypeError, match="future/thing"):
        list(store.follow(sid, stop=lambda: next(checks)))
    # the events before it still read: the refusal is at the event, not a blanket failure
    before = list(store.read_types(sid, ["user/message"]))
    assert [event.type for event in before] == ["user/message"]


def test_unknown_ignorable_type_reads_everywhere(store: dshpy.BaseStore) -> None:
    sid = _session_with_future_event(store, ignorable=True)
    assert list(store.read(sid))[-1].type == "future/thing"
    assert store.inspect(sid).events[-1].type == "future/thing"
    assert store.export(sid)["events"][-1]["type"] == "future/thing"


@pytest.mark.parametrize("bad", [-1, 2**53, 2**63, True, 1.0])
def test_read_positions_beyond_a_safe_integer_are_refused(store: dshpy.BaseStore, bad: object) -> None:
    session = store.create()
    session.close()
    with pytest.raises(ValueError, match="from_seq"):
        list(store.read(session.id, from_seq=bad))  # type: ignore[arg-type]
