"""One page of the session listing, cut where the sessions are stored: the request and its generic answer.

Listing every session parses every stored header (about a second for 10k sessions on a
small machine), while a page shows fifty. A :class:`PageRequest` names what a page
needs from the headers alone — which sessions (ids, cwd, creation time, parent), in
which order (creation or last activity, ties by id ascending) and after which session
(a keyset position) — so a database backend answers it with one statement that
builds the infos of the page's sessions only (:class:`~dshpy.storage.backend.PagedListing`).

:meth:`PageRequest.cut` is the same request over a full listing: what every other
backend answers, and what the contract suite compares the fast path with.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, Protocol

from dshpy.storage.records import SessionInfo

__all__ = ["PAGE_SORTS", "HeaderFilters", "PageRequest", "PageSort", "passes_header_filters"]

PageSort = Literal["created", "updated"]
PAGE_SORTS: tuple[PageSort, ...] = ("created", "updated")


class HeaderFilters(Protocol):
    """The filters a session's header alone answers: a page request's, and the query service's first ones."""

    @property
    def ids(self) -> tuple[str, ...] | None: ...
    @property
    def exclude_ids(self) -> tuple[str, ...] | None: ...
    @property
    def cwd(self) -> tuple[str | None, ...] | None: ...
    @property
    def created_from(self) -> int | None: ...
    @property
    def created_to(self) -> int | None: ...
    @property
    def parent(self) -> tuple[str | None, ...] | None: ...


def passes_header_filters(filters: HeaderFilters, info: SessionInfo) -> bool:
    """Whether ``info`` passes every header filter that is set (``None`` does not filter)."""
    header = info.header
    return (
        (filters.ids is None or info.id in filters.ids)
        and (filters.exclude_ids is None or info.id not in filters.exclude_ids)
        and (filters.cwd is None or header.cwd in filters.cwd)
        and (filters.created_from is None or header.created_at >= filters.created_from)
        and (filters.created_to is None or header.created_at <= filters.created_to)
        and (filters.parent is None or header.parent_session in filters.parent)
    )


@dataclass(frozen=True, slots=True)
class PageRequest:
    """Sessions passing every given header filter, in ``sort`` order, after ``after``, at most ``limit``.

    A filter left ``None`` does not filter; the values of one filter are alternatives
    and an empty tuple matches nothing. ``None`` among ``cwd`` or ``parent`` matches
    sessions without one. ``after`` is ``(sort key, id)`` of the last session of the
    previous page. Ties of the sort key go by id, ascending, in both directions.
    """

    ids: tuple[str, ...] | None = None
    exclude_ids: tuple[str, ...] | None = None
    cwd: tuple[str | None, ...] | None = None
    created_from: int | None = None
    created_to: int | None = None
    parent: tuple[str | None, ...] | None = None
    sort: PageSort = "created"
    descending: bool = True
    after: tuple[int, str] | None = None
    limit: int = 50

    def __post_init__(self) -> None:
        if self.sort not in PAGE_SORTS:
            raise ValueError(f"sort must be one of {', '.join(PAGE_SORTS)}, not {self.sort!r}")
        if isinstance(self.limit, bool) or not isinstance(self.limit, int) or self.limit < 0:
            raise ValueError(f"limit must be a non-negative integer, not {self.limit!r}")

    def key(self, info: SessionInfo) -> int:
        """``info``'s sort key: its creation time, or the time of its last event."""
        return info.created_at if self.sort == "created" else info.updated_at

    def matches(self, info: SessionInfo) -> bool:
        """Whether ``info`` passes the header filters (the cursor aside)."""
        return passes_header_filters(self, info)

    def past(self, info: SessionInfo) -> bool:
        """Whether ``info`` comes after the cursor's session in this order (always, without a cursor)."""
        if self.after is None:
            return True
        key, last_id = self.after
        mine = self.key(info)
        if mine == key:
            return info.id > last_id
        return mine < key if self.descending else mine > key

    def cut(self, infos: Iterable[SessionInfo]) -> list[SessionInfo]:
        """The page out of a full listing: filtered, ordered, after the cursor, at most ``limit``."""
        kept = [info for info in infos if self.matches(info) and self.past(info)]
        sign = -1 if self.descending else 1
        kept.sort(key=lambda info: (sign * self.key(info), info.id))
        return kept[: self.limit]
