"""What a storage backend writes: seven required primitives, and the optional capabilities it may declare.

A backend is a subclass of :class:`~dshpy.storage.base.BaseStore`, which implements the
whole caller's contract (:class:`~dshpy.storage.contract.SessionStore`) once: id checks,
validation, crash repair, fork planning, export/import, the projection cache's folding.
The backend supplies :class:`StorageBackend`'s primitives and, for each capability it
offers, names the capability's protocol among its bases::

    class MyStore(BaseStore, ZeroCopyForks, WriterLeases):
        ...

Exactly one of :class:`WriterLeases` and :class:`OwnWriters` is required, because every
store keeps one live writer per session; the rest are optional. A capability is
either declared whole or not at all. Its methods are abstract, so a
declared capability with a method missing cannot be instantiated, and defining a
capability's method without declaring it is refused when the class is built (the
method would silently never be called). :func:`capabilities_of` runs that check once
per class; ``BaseStore`` then takes the fast path a capability offers and the generic
path otherwise, so a backend with only the primitives is complete and correct.

Every primitive receives ids that were already validated and may assume the session
exists unless it says otherwise. Events carry absolute seqs.
"""

from __future__ import annotations

import inspect
from abc import abstractmethod
from collections.abc import Iterator, Sequence
from typing import Protocol

from dshpy.core.events import SessionEvent
from dshpy.log.header import SessionHeader
from dshpy.log.session import SessionWriter
from dshpy.storage.follow import StopSignal
from dshpy.storage.lease import Lease
from dshpy.storage.listing_page import PageRequest
from dshpy.storage.projection_cache import ProjectionRow
from dshpy.storage.records import SessionInfo, StoredRecord
from dshpy.storage.search_records import SearchIndexStatus, TextHits, TextQuery

__all__ = [
    "CAPABILITIES",
    "BulkListing",
    "ChangeFeed",
    "IndexedReads",
    "MetadataQueries",
    "OwnWriters",
    "PagedListing",
    "ProjectionCache",
    "SearchIndex",
    "SessionLengths",
    "StorageBackend",
    "WriterLeases",
    "ZeroCopyForks",
    "capabilities_of",
]


class StorageBackend(Protocol):
    """The primitives every backend provides; each is atomic on its own."""

    @abstractmethod
    def _insert(self, record: StoredRecord) -> None:
        """Create a session record atomically; raise SessionExistsError if the id is taken."""

    @abstractmethod
    def _header(self, session_id: str) -> SessionHeader:
        """The stored header; raise SessionNotFound."""

    @abstractmethod
    def _own_events(self, session_id: str, from_seq: int) -> Iterator[SessionEvent]:
        """The session's own stored events with seq >= ``from_seq``, in seq order."""

    @abstractmethod
    def _length(self, session_id: str) -> int:
        """The next seq of the full log (an inherited prefix included)."""

    @abstractmethod
    def _append(self, session_id: str, expected_seq: int, events: Sequence[SessionEvent]) -> None:
        """Store ``events`` iff the log's next seq is ``expected_seq``, atomically; raise ConflictError otherwise.

        Identical re-sends are recognised by the caller, which reads the log back on a conflict.
        """

    @abstractmethod
    def _remove(self, session_id: str) -> None:
        """Delete one record and its cache rows (forks that read its prefix were detached first)."""

    @abstractmethod
    def _ids(self) -> list[str]:
        """Every stored session id, in any order."""


class ZeroCopyForks(Protocol):
    """Forks read their parent's prefix in place instead of copying it.

    ``_insert`` then receives a :class:`StoredRecord` whose ``base`` names the parent and
    the inherited count, and holds only the child's own events. Without this capability
    a fork copies the prefix and a session has no base.
    """

    @abstractmethod
    def _base(self, session_id: str) -> tuple[str, int] | None:
        """``(parent id, inherited count)`` of a session that reads its prefix from its parent."""

    @abstractmethod
    def _children(self, session_id: str) -> list[str]:
        """Ids of the sessions whose base is ``session_id``."""

    @abstractmethod
    def _rebase(self, session_id: str, prefix: Sequence[SessionEvent]) -> None:
        """Copy the inherited ``prefix`` into a child, so it no longer reads from its parent."""


class BulkListing(Protocol):
    """Every session's metadata in one pass, without reading each log through ``stat``."""

    @abstractmethod
    def _list_infos(self) -> list[SessionInfo]:
        """One :class:`SessionInfo` per listable session, any order; unreadable sessions may be left out."""


class SessionLengths(Protocol):
    """Every session's length in one cheap read: what a reader of the whole store compares to see what changed.

    A database keeps each session's next seq in its row, so this reads no header and no
    event; without it :meth:`~dshpy.storage.base.BaseStore.lengths` derives the lengths from a full listing.
    """

    @abstractmethod
    def _lengths(self) -> dict[str, int]:
        """``{session id: event count}`` (an inherited prefix included) of every stored session."""


class MetadataQueries(BulkListing, Protocol):
    """One session's metadata, and a listing together with cache rows, answered without reading events.

    Database backends keep a session's length and last event time in its row. The
    listing and its rows come from one snapshot, so a listing never pairs a session
    with another moment's cache. Declared together with :class:`ProjectionCache`.
    """

    @abstractmethod
    def _session_info(self, session_id: str) -> SessionInfo | None:
        """One session's metadata, or ``None`` when no such session is stored."""

    @abstractmethod
    def _infos_and_projection_rows(
        self, keys: Sequence[str]
    ) -> tuple[list[SessionInfo], dict[str, dict[str, ProjectionRow]]]:
        """:meth:`BulkListing._list_infos` and :meth:`ProjectionCache._list_projection_rows` in one snapshot."""


class PagedListing(Protocol):
    """A page of the listing cut in storage: only the page's sessions are read and built.

    Without it a page is cut from the full listing (:meth:`PageRequest.cut`), which
    parses every stored header.
    """

    @abstractmethod
    def _list_page(self, request: PageRequest) -> list[SessionInfo]:
        """What ``request.cut(self.list())`` returns, in that order; a damaged session of the page raises
        :class:`~dshpy.errors.CorruptSessionError` (the caller then lists the long way, which names it)."""


class ProjectionCache(Protocol):
    """Durable projection checkpoints, so opening or listing a long session folds only the tail.

    Without it every projection is folded from the log each time it is asked for.
    """

    @abstractmethod
    def _load_projection_rows(self, session_id: str) -> list[ProjectionRow]:
        """The session's stored cache rows, any identity; rows that cannot be read are left out."""

    @abstractmethod
    def _save_projection_rows(self, session_id: str, rows: Sequence[ProjectionRow]) -> None:
        """Upsert rows by ``(session_id, key)``; rows of other keys stay, the last write wins.

        Callers only pass rows behind the durable log, each valid for its identity, so a
        cold reader racing the live writer can at worst leave an older row.
        """

    @abstractmethod
    def _list_projection_rows(self, keys: Sequence[str]) -> dict[str, dict[str, ProjectionRow]]:
        """Rows of ``keys`` for every session: session id → key → row."""


class IndexedReads(Protocol):
    """Seeks by event type and turn marks, so titles, counts and fork windows never decode a whole log."""

    @abstractmethod
    def _own_typed_events(
        self, session_id: str, types: tuple[str, ...], from_seq: int, until: int | None
    ) -> Iterator[SessionEvent]:
        """The session's own events of ``types`` with ``from_seq <= seq < until`` (no bound for ``None``)."""

    @abstractmethod
    def _turn_window(self, session_id: str, boundary: int) -> list[SessionEvent]:
        """Events from the last ``turn/start`` or ``turn/end`` at or before ``boundary`` through ``boundary``."""


class ChangeFeed(Protocol):
    """Followers are woken when a writer commits, instead of polling."""

    @abstractmethod
    def _follow(self, session_id: str, from_seq: int, poll_interval: float, stop: StopSignal) -> Iterator[SessionEvent]:
        """Events with seq >= ``from_seq`` as they commit; ``poll_interval`` bounds how late ``stop`` is seen."""


class SearchIndex(Protocol):
    """Full-text search answered by an index the backend keeps, instead of a scan of every log.

    The index holds each event's text as :func:`~dshpy.log.event_text.event_text`
    extracts it and matches words as :mod:`dshpy.log.search_text` cuts them, so hits
    are the scan's. An index kept in the log's own transactions (SQLite, PostgreSQL) is
    never behind or ahead of the log; a derived one (the JSONL sidecar) catches up
    before it answers. Zero-copy forks find their inherited prefix through their
    parent's rows, never through copies.
    """

    @abstractmethod
    def _search_text(self, query: TextQuery) -> TextHits:
        """The page of ``query``'s hits, ranked (see :class:`~dshpy.storage.search_records.TextHits`)."""

    @abstractmethod
    def _rebuild_search_index(self) -> SearchIndexStatus:
        """Drop the index and index every stored event again; the generation moves on."""

    @abstractmethod
    def _search_index_status(self) -> SearchIndexStatus:
        """What the index holds now."""


class WriterLeases(Protocol):
    """One live writer per session, enforced across handles and processes by a lease the store holds."""

    @abstractmethod
    def _lease(self, session_id: str) -> Lease:
        """Take the session's lease without waiting; raise SessionBusyError naming the holder.

        It must not need the session to exist, so ``create`` can take it before the record is visible.
        """


class OwnWriters(Protocol):
    """The backend builds its live writers itself, because its exclusion lives in the writer (a locked file).

    Exclusive with :class:`WriterLeases`. Each writer takes its session's exclusion
    before the session is read, raises SessionBusyError while another live handle holds
    it, appends conditionally, and releases everything in ``close()``.
    """

    @abstractmethod
    def _writer(self, session_id: str) -> SessionWriter:
        """The writer of an existing session, exclusion taken."""

    @abstractmethod
    def _insert_writer(self, record: StoredRecord) -> SessionWriter:
        """Create the record and return its writer, exclusion taken before the record is visible."""


CAPABILITIES: dict[str, type] = {
    "zero_copy_forks": ZeroCopyForks,
    "bulk_listing": BulkListing,
    "metadata_queries": MetadataQueries,
    "paged_listing": PagedListing,
    "projection_cache": ProjectionCache,
    "indexed_reads": IndexedReads,
    "change_feed": ChangeFeed,
    "search_index": SearchIndex,
    "session_lengths": SessionLengths,
    "writer_leases": WriterLeases,
    "own_writers": OwnWriters,
}
"""Every capability by the name a store reports in ``capabilities``."""

_NEEDS: dict[str, tuple[str, ...]] = {"metadata_queries": ("projection_cache",)}
_EXCLUSION = ("writer_leases", "own_writers")


def _members(protocol: type) -> frozenset[str]:
    """The methods a capability adds (its own, not those of the protocol machinery)."""
    return frozenset(
        name for name, value in vars(protocol).items() if inspect.isfunction(value) and not name.startswith("__")
    )


def capabilities_of(cls: type) -> frozenset[str]:
    """The capabilities ``cls`` declares, after refusing a class whose declarations do not match its methods.

    Raises TypeError when the class defines a capability's method without declaring the
    capability, declares one without what it needs, or does not declare exactly one way
    of excluding a session's other writers.
    """
    declared = frozenset(name for name, protocol in CAPABILITIES.items() if protocol in cls.__mro__)
    for name, protocol in CAPABILITIES.items():
        if name in declared:
            continue
        stray = sorted(m for m in _members(protocol) if any(m in vars(k) for k in cls.__mro__ if k not in _PROTOCOLS))
        if stray:
            raise TypeError(
                f"{cls.__name__} defines {', '.join(stray)} of the {protocol.__name__} capability without "
                f"declaring it: add {protocol.__name__} to its bases (dshpy.storage.backend) or remove the method"
            )
    for name, needs in _NEEDS.items():
        missing = [n for n in needs if n not in declared]
        if name in declared and missing:
            wanted = ", ".join(CAPABILITIES[n].__name__ for n in missing)
            raise TypeError(f"{cls.__name__} declares {CAPABILITIES[name].__name__}, which needs {wanted} too")
    exclusion = [name for name in _EXCLUSION if name in declared]
    if len(exclusion) != 1:
        said = "both" if exclusion else "neither"
        raise TypeError(
            f"{cls.__name__} declares {said} WriterLeases {'and' if exclusion else 'nor'} OwnWriters: a store "
            "keeps one live writer per session, so a backend declares exactly one way to exclude the others"
        )
    return declared


_PROTOCOLS = frozenset(CAPABILITIES.values())
