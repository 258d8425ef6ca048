"""``memory:`` — a process-local store for tests and embedding.

It keeps the same promises as the durable backends (conditional appends, zero-copy
forks, refusal to delete a shared prefix) so code tested against it behaves the same
on SQLite or PostgreSQL. One lock makes each conditional append atomic across threads,
and a session has one live writer at a time, as everywhere: a second live handle of a
session gets :class:`~dshpy.errors.SessionBusyError`.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence

from dshpy.core.events import SessionEvent
from dshpy.errors import ConflictError, SessionExistsError, SessionNotFound
from dshpy.log.header import SessionHeader
from dshpy.storage.backend import ProjectionCache, WriterLeases, ZeroCopyForks
from dshpy.storage.base import BaseStore
from dshpy.storage.lease import Lease, LocalLeases
from dshpy.storage.projection_cache import ProjectionRow
from dshpy.storage.records import StoredRecord

__all__ = ["MemoryStore"]


class MemoryStore(BaseStore, ZeroCopyForks, ProjectionCache, WriterLeases):
    """Sessions held in a dict; forks share their parent's events without copying."""

    def __init__(self) -> None:
        self.url = "memory:"
        self._records: dict[str, StoredRecord] = {}
        self._projection_rows: dict[str, dict[str, ProjectionRow]] = {}
        self._lock = threading.Lock()
        self._leases = LocalLeases()

    def _record(self, session_id: str) -> StoredRecord:
        try:
            return self._records[session_id]
        except KeyError:
            raise SessionNotFound(f'session "{session_id}" not found') from None

    def _insert(self, record: StoredRecord) -> None:
        with self._lock:
            if record.header.id in self._records:
                raise SessionExistsError(f'session "{record.header.id}" already exists')
            self._records[record.header.id] = StoredRecord(record.header, record.base, list(record.events))

    def _lease(self, session_id: str) -> Lease:
        return self._leases.acquire(session_id)

    def _header(self, session_id: str) -> SessionHeader:
        return self._record(session_id).header

    def _base(self, session_id: str) -> tuple[str, int] | None:
        return self._record(session_id).base

    def _own_start(self, record: StoredRecord) -> int:
        return record.base[1] if record.base is not None else 0

    def _own_events(self, session_id: str, from_seq: int) -> Iterator[SessionEvent]:
        record = self._record(session_id)
        start = self._own_start(record)
        events = record.events
        length = len(events)  # a stable snapshot: later appends do not leak into this read
        yield from events[max(0, from_seq - start) : length]

    def _length(self, session_id: str) -> int:
        record = self._record(session_id)
        return self._own_start(record) + len(record.events)

    def _append(self, session_id: str, expected_seq: int, events: Sequence[SessionEvent]) -> None:
        with self._lock:
            record = self._record(session_id)
            length = self._own_start(record) + len(record.events)
            if length != expected_seq:
                raise ConflictError(
                    f'session "{session_id}" ends at seq {length}, not {expected_seq}: another writer appended first',
                    expected_seq=expected_seq,
                    actual_seq=length,
                )
            record.events.extend(events)

    def _remove(self, session_id: str) -> None:
        with self._lock:
            self._record(session_id)
            del self._records[session_id]
            self._projection_rows.pop(session_id, None)

    def _load_projection_rows(self, session_id: str) -> list[ProjectionRow]:
        return list(self._projection_rows.get(session_id, {}).values())

    def _save_projection_rows(self, session_id: str, rows: Sequence[ProjectionRow]) -> None:
        with self._lock:
            if session_id not in self._records:
                return  # deleted meanwhile: no rows for a session that is gone
            stored = self._projection_rows.setdefault(session_id, {})
            for row in rows:
                stored[row.key] = row

    def _list_projection_rows(self, keys: Sequence[str]) -> dict[str, dict[str, ProjectionRow]]:
        wanted = frozenset(keys)
        with self._lock:
            found = {sid: {k: r for k, r in rows.items() if k in wanted} for sid, rows in self._projection_rows.items()}
        return {sid: rows for sid, rows in found.items() if rows}

    def _ids(self) -> list[str]:
        return list(self._records)

    def _children(self, session_id: str) -> list[str]:
        return sorted(sid for sid, rec in self._records.items() if rec.base is not None and rec.base[0] == session_id)

    def _rebase(self, session_id: str, prefix: Sequence[SessionEvent]) -> None:
        with self._lock:
            record = self._record(session_id)
            record.events[:0] = prefix
            record.base = None
