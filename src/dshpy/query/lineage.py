"""Session lineage: a session's ancestors through its header's ``parentSession``, and its forks, recursively.

Built from one listing of the store, so the answer is one consistent picture. A parent
that is not in the store (deleted, or in another store) ends the ancestry there: the
trace says so instead of failing (dsh's ``unresolvedParentId``). Parents that form a
cycle cannot come from forking and are ``SESSION_QUERY_INVALID_LINEAGE``.
"""

from __future__ import annotations

from collections.abc import Sequence

from dshpy.query.errors import INVALID_LINEAGE, SESSION_NOT_FOUND, QueryError, QueryNotFoundError
from dshpy.query.results import LineageNode, LineageTrace
from dshpy.storage.records import SessionInfo

__all__ = ["descendant_ids", "trace_lineage"]


def _children(infos: Sequence[SessionInfo]) -> dict[str, list[SessionInfo]]:
    children: dict[str, list[SessionInfo]] = {}
    for info in infos:
        parent = info.header.parent_session
        if parent is not None:
            children.setdefault(parent, []).append(info)
    for forks in children.values():
        forks.sort(key=lambda info: (info.created_at, info.id))
    return children


def descendant_ids(infos: Sequence[SessionInfo], session_id: str) -> frozenset[str]:
    """``session_id`` and every session forked from it, recursively (what a ``lineage`` filter keeps)."""
    children = _children(infos)
    found = {session_id}
    stack = [session_id]
    while stack:
        for child in children.get(stack.pop(), ()):
            if child.id not in found:
                found.add(child.id)
                stack.append(child.id)
    return frozenset(found)


def trace_lineage(infos: Sequence[SessionInfo], session_id: str) -> LineageTrace:
    """The lineage of ``session_id`` among ``infos`` (one listing of the store)."""
    by_id = {info.id: info for info in infos}
    target = by_id.get(session_id)
    if target is None:
        raise QueryNotFoundError(SESSION_NOT_FOUND, f'session "{session_id}" not found')
    ancestors: list[SessionInfo] = []
    seen = {session_id}
    unresolved: str | None = None
    parent = target.header.parent_session
    while parent is not None:
        if parent in seen:
            raise QueryError(INVALID_LINEAGE, f'session lineage of "{session_id}" contains a cycle at "{parent}"')
        seen.add(parent)
        found = by_id.get(parent)
        if found is None:
            unresolved = parent
            break
        ancestors.append(found)
        parent = found.header.parent_session
    descendants = _forks_of(_children(infos), session_id)
    root = None if unresolved is not None else (ancestors[-1] if ancestors else target)
    return LineageTrace(target, tuple(ancestors), descendants, root, unresolved)


def _forks_of(children: dict[str, list[SessionInfo]], session_id: str) -> tuple[LineageNode, ...]:
    """The fork tree below ``session_id``, built without recursion (fork chains can be long)."""
    order: list[SessionInfo] = []
    seen = {session_id}
    stack = list(reversed(children.get(session_id, ())))
    while stack:
        info = stack.pop()
        if info.id in seen:
            raise QueryError(INVALID_LINEAGE, f'session lineage of "{session_id}" contains a cycle at "{info.id}"')
        seen.add(info.id)
        order.append(info)
        stack.extend(reversed(children.get(info.id, ())))
    built: dict[str, LineageNode] = {}
    for info in reversed(order):  # children before parents
        built[info.id] = LineageNode(info, tuple(built[child.id] for child in children.get(info.id, ())))
    return tuple(built[child.id] for child in children.get(session_id, ()))
