"""What a caller may ask of any store: the one protocol the CLI, the server, the agent and the contract suite use.

Every backend answers these calls with the same meaning, which
:mod:`dshpy.testing.contract` checks on each of them. Code that only stores and reads
sessions types against :class:`SessionStore`, never against a backend or the shared
implementation (:class:`~dshpy.storage.base.BaseStore`), so a third-party backend
plugs in without its callers changing. What a backend author writes is in
:mod:`dshpy.storage.backend`.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Protocol, runtime_checkable

from dshpy.core.events import SessionEvent
from dshpy.log.session import Session
from dshpy.projections.registry import ProjectionRegistry
from dshpy.projections.runner import Snapshot
from dshpy.storage.follow import StopSignal
from dshpy.storage.listing_page import PageRequest
from dshpy.storage.projection_cache import SessionProjections
from dshpy.storage.records import SessionInfo
from dshpy.storage.search_records import SearchIndexStatus, TextHits, TextQuery

__all__ = ["SessionStore"]


@runtime_checkable
class SessionStore(Protocol):
    """The persistence interface (DESIGN.md §6).

    Writes are conditional on ``expected_seq`` and a session has one live writer at a
    time (``create``/``open``/``fork`` hold its lease until the session is closed);
    reads never wait for writers. Every call validates the session id before a backend
    sees it.
    """

    url: str
    """The store's URL with any password masked (``sqlite:///…``, ``jsonl:///…``, ``postgresql://…``)."""
    zero_copy_fork: bool
    """Whether forks read the parent's prefix instead of copying it (then deleting a parent must detach)."""

    @property
    def capabilities(self) -> frozenset[str]:
        """Names of the optional backend capabilities this store offers (see :mod:`dshpy.storage.backend`)."""
        ...

    def create(
        self,
        *,
        session_id: str | None = None,
        cwd: str | None = None,
        agent_preset: str | None = None,
        origin: str | None = None,
        delegation_depth: int = 0,
        write_behind_ms: int | None = None,
    ) -> Session:
        """Create an empty session and return it live (its header is stored at once)."""
        ...

    def on(self, name: str, handler: Callable[[Any], Any]) -> Callable[[], None]:
        """Call ``handler(payload)`` at ``session/created``, ``session/flush`` or ``session/disposed``."""
        ...

    def open(self, session_id: str, *, write_behind_ms: int | None = None) -> Session:
        """Open a session live; an interrupted turn is closed durably first (crash repair)."""
        ...

    def inspect(self, session_id: str) -> Session:
        """A read-only view: an interrupted turn shows closed, nothing is written, no lease is taken."""
        ...

    def read(self, session_id: str, from_seq: int = 0) -> Iterator[SessionEvent]:
        """Stream stored events with seq >= ``from_seq``, an inherited fork prefix included."""
        ...

    def read_types(self, session_id: str, types: Iterable[str], from_seq: int = 0) -> Iterator[SessionEvent]:
        """Stream only the events of ``types`` (gaps between seqs expected)."""
        ...

    def follow(
        self, session_id: str, from_seq: int = 0, *, poll_interval: float = 0.2, stop: StopSignal = None
    ) -> Iterator[SessionEvent]:
        """Stored events, then new ones as any writer commits them, until ``stop``."""
        ...

    def append(self, session_id: str, events: Sequence[SessionEvent], *, expected_seq: int) -> None:
        """Validate and append outside a live handle; an identical re-send of stored events succeeds."""
        ...

    max_delegation_depth: int
    """The deepest sub-agent session (``delegationDepth``) the store creates or forks."""

    def fork(
        self,
        source: Session | str,
        boundary: int | None = None,
        child_id: str | None = None,
        *,
        close_open_turn: bool = False,
        origin: str | None = None,
        write_behind_ms: int | None = None,
    ) -> Session:
        """Fork a session (an id, or a live session: flushed first) at the inclusive ``boundary``; open the child."""
        ...

    def fork_stored(
        self,
        source: Session | str,
        boundary: int | None = None,
        child_id: str | None = None,
        *,
        close_open_turn: bool = False,
        origin: str | None = None,
    ) -> SessionInfo:
        """Create the fork in storage without loading it."""
        ...

    def list(self) -> builtins.list[SessionInfo]:
        """Every session, newest activity first."""
        ...

    def lengths(self) -> dict[str, int]:
        """Every session's event count by id, cheaper than :meth:`list`: which sessions grew since a last look."""
        ...

    def list_page(self, request: PageRequest) -> builtins.list[SessionInfo]:
        """One page of the listing, filtered on headers and ordered as ``request`` says."""
        ...

    def stat(self, session_id: str) -> SessionInfo:
        """One session's metadata."""
        ...

    def exists(self, session_id: str) -> bool:
        """Whether a session with this (valid) id is stored."""
        ...

    def export(self, session_id: str) -> dict[str, Any]:
        """A self-contained JSON document of the session with the SHA-256 of its events."""
        ...

    def import_session(self, document: dict[str, Any], *, session_id: str | None = None) -> SessionInfo:
        """Verify an exported document and store it; nothing is stored if it fails."""
        ...

    def delete(self, session_id: str, *, detach_forks: bool = False) -> None:
        """Delete a session (refused while zero-copy forks read it, unless ``detach_forks``)."""
        ...

    def projections(
        self,
        session_id: str,
        keys: Iterable[str] | None = None,
        *,
        registry: ProjectionRegistry | None = None,
        info: SessionInfo | None = None,
    ) -> Snapshot:
        """Projection values over the stored log, from the cache plus a fold of the tail (``info``: as just listed)."""
        ...

    def list_projections(
        self,
        keys: Iterable[str] | None = None,
        *,
        registry: ProjectionRegistry | None = None,
        limit: int | None = None,
    ) -> builtins.list[SessionProjections]:
        """Every session with the values of projections ``keys``, as :meth:`list` orders them."""
        ...

    def search_text(self, query: TextQuery) -> TextHits:
        """A page of ranked full-text hits (the query layer, :mod:`dshpy.query`, is the caller's way in)."""
        ...

    def rebuild_search_index(self) -> SearchIndexStatus:
        """Index every stored event again from the logs."""
        ...

    def search_index_status(self) -> SearchIndexStatus:
        """What the search index holds."""
        ...

    def close(self) -> None:
        """Release the store's resources (connections, file handles)."""
        ...

    def __enter__(self) -> SessionStore: ...

    def __exit__(self, *_exc: object) -> None: ...
