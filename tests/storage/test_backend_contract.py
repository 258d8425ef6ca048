"""The backend contract as a third-party author meets it: primitives, declared capabilities, refusals.

A backend built from the seven primitives and a lease alone must pass the whole
contract suite: every capability is an optimisation with a generic path behind it.
Declarations that do not match the methods are refused when the class is built.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

import dshpy
from dshpy.core.events import SessionEvent
from dshpy.errors import ConflictError, SessionExistsError, SessionNotFound
from dshpy.log.header import SessionHeader
from dshpy.storage.backend import (
    CAPABILITIES,
    MetadataQueries,
    OwnWriters,
    ProjectionCache,
    WriterLeases,
    ZeroCopyForks,
)
from dshpy.storage.base import BaseStore
from dshpy.storage.lease import Lease, LocalLeases
from dshpy.storage.records import StoredRecord
from dshpy.testing.builders import TurnScript
from dshpy.testing.contract import StoreContract


class ListStore(BaseStore, WriterLeases):
    """The least a backend writes: a header and a list of events per session, and a lease."""

    def __init__(self) -> None:
        self.url = "list:"
        self._headers: dict[str, SessionHeader] = {}
        self._events: dict[str, list[SessionEvent]] = {}
        self._lock = threading.Lock()
        self._leases = LocalLeases()

    def _insert(self, record: StoredRecord) -> None:
        assert record.base is None, "a backend without ZeroCopyForks is never asked to share a prefix"
        with self._lock:
            if record.header.id in self._headers:
                raise SessionExistsError(f'session "{record.header.id}" already exists')
            self._headers[record.header.id] = record.header
            self._events[record.header.id] = list(record.events)

    def _header(self, session_id: str) -> SessionHeader:
        try:
            return self._headers[session_id]
        except KeyError:
            raise SessionNotFound(f'session "{session_id}" not found') from None

    def _own_events(self, session_id: str, from_seq: int) -> Iterator[SessionEvent]:
        self._header(session_id)
        yield from self._events[session_id][from_seq:]

    def _length(self, session_id: str) -> int:
        self._header(session_id)
        return len(self._events[session_id])

    def _append(self, session_id: str, expected_seq: int, events: Sequence[SessionEvent]) -> None:
        with self._lock:
            stored = self._events[session_id]
            if len(stored) != expected_seq:
                raise ConflictError(
                    f"ends at {len(stored)}, not {expected_seq}", expected_seq=expected_seq, actual_seq=len(stored)
                )
            stored.extend(events)

    def _remove(self, session_id: str) -> None:
        with self._lock:
            del self._headers[session_id], self._events[session_id]

    def _ids(self) -> list[str]:
        return list(self._headers)

    def _lease(self, session_id: str) -> Lease:
        return self._leases.acquire(session_id)


class TestPrimitivesOnlyBackend(StoreContract):
    @pytest.fixture
    def store(self) -> ListStore:
        return ListStore()


def test_a_primitives_only_backend_declares_no_optional_capability() -> None:
    store = ListStore()
    assert store.capabilities == {"writer_leases"}
    assert store.zero_copy_fork is False
    assert isinstance(store, dshpy.SessionStore)


def test_generic_paths_answer_projections_listing_and_forks() -> None:
    store = ListStore()
    with store.create(session_id="parent") as session:
        TurnScript(session).turn(steps=2)
        TurnScript(session).turn(steps=1)
    parent_log = [event.to_wire() for event in store.read("parent")]
    store.fork_stored("parent", child_id="child")
    assert store.stat("parent").forks == ("child",)
    assert {info.id for info in store.list()} == {"parent", "child"}
    assert store.lengths() == {"parent": len(parent_log), "child": store.stat("child").event_count}
    stats = store.projections("parent", ["stats"])["values"]["stats"]
    assert stats["turns"] == 2
    listed = {row.info.id: row for row in store.list_projections(["stats"])}
    assert listed["parent"].values["stats"] == stats
    store.delete("parent")  # the prefix was copied into the child, so nothing needs detaching
    assert [event.to_wire() for event in store.read("child")][: len(parent_log)] == parent_log


SQLITE_CAPABILITIES = {
    "zero_copy_forks",
    "bulk_listing",
    "metadata_queries",
    "projection_cache",
    "indexed_reads",
    "session_lengths",
    "paged_listing",
}


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("memory:", {"zero_copy_forks", "projection_cache", "writer_leases"}),
        ("sqlite:///{tmp}/s.db", {*SQLITE_CAPABILITIES, "search_index", "writer_leases"}),
        ("jsonl:///{tmp}/j", {"bulk_listing", "projection_cache", "search_index", "own_writers"}),
    ],
    ids=["memory", "sqlite", "jsonl"],
)
def test_built_in_backends_declare_what_they_offer(url: str, expected: set[str], tmp_path: Path) -> None:
    with dshpy.open_store(url.format(tmp=tmp_path)) as store:
        assert store.capabilities == expected
        assert store.zero_copy_fork is ("zero_copy_forks" in expected)


def test_postgres_declares_a_change_feed_too(postgres_url: str) -> None:
    with dshpy.open_store(postgres_url) as store:
        assert store.capabilities == {*SQLITE_CAPABILITIES, "change_feed", "search_index", "writer_leases"}
        assert store.capabilities <= set(CAPABILITIES)


def test_a_capability_method_without_its_declaration_is_refused_when_the_class_is_built() -> None:
    with pytest.raises(TypeError, match=r"defines _rebase of the ZeroCopyForks capability without declaring it"):

        class Sneaky(ListStore):
            def _rebase(self, session_id: str, prefix: Sequence[SessionEvent]) -> None: ...


def test_a_declared_capability_with_a_method_missing_cannot_be_built() -> None:
    class HalfForks(ListStore, ZeroCopyForks):
        def _base(self, session_id: str) -> tuple[str, int] | None:
            return None

        def _children(self, session_id: str) -> list[str]:
            return []

    with pytest.raises(TypeError, match="_rebase"):
        HalfForks()  # type: ignore[abstract]


def test_metadata_queries_need_a_projection_cache() -> None:
    with pytest.raises(TypeError, match="declares MetadataQueries, which needs ProjectionCache too"):

        class NoCache(ListStore, MetadataQueries):
            pass


def test_exactly_one_way_of_excluding_writers_is_required() -> None:
    with pytest.raises(TypeError, match="declares neither WriterLeases nor OwnWriters"):

        class Unguarded(BaseStore):
            pass

    with pytest.raises(TypeError, match="declares both WriterLeases and OwnWriters"):

        class Twice(ListStore, OwnWriters):
            pass


def test_a_cache_declared_is_used() -> None:
    class CachedListStore(ListStore, ProjectionCache):
        def __init__(self) -> None:
            super().__init__()
            self.saved: dict[str, list[object]] = {}

        def _load_projection_rows(self, session_id: str) -> list:  # type: ignore[type-arg]
            return list(self.saved.get(session_id, []))

        def _save_projection_rows(self, session_id: str, rows: Sequence) -> None:  # type: ignore[type-arg]
            self.saved[session_id] = list(rows)

        def _list_projection_rows(self, keys: Sequence[str]) -> dict:  # type: ignore[type-arg]
            return {}

    store = CachedListStore()
    assert store.saved == {}
    with store.create(session_id="s") as session:
        TurnScript(session).turn()
    last = store.stat("s").event_count - 1
    rows = {row.key: row for row in store.saved["s"]}  # type: ignore[attr-defined]
    assert rows["stats"].seq == last  # the turn end checkpointed through the declared cache
    assert store.projections("s", ["stats"])["as_of_seq"] == last
