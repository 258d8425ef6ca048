"""The persisted projection cache every store keeps beside its logs: rows, trust, and when they are written.

A row is ``(session_id, key, state_version, seq, state)`` plus the *identity* of the
session it was folded from (:func:`session_identity`: the header's ``id``,
``createdAt``, ``cwd``, ``parentSession`` and ``isSeeded``). It says "folding this
session's log through ``seq`` gave ``state``" and is only ever a shortcut: the log stays
the truth (DESIGN.md §1), and a reader that cannot trust a row folds the log instead.

A reader discards a row (and re-folds that projection from the log) when

* its identity is not the session's current header's — the id was deleted and reused,
  or the row belongs to another store's session of the same id;
* its ``state_version`` is not the definition's, or its ``seq`` lies beyond the log
  (:func:`dshpy.projections.usable`);
* its state does not validate against the definition's schema.

Writers keep the cache from ever leading the durable log: a live session's checkpoints
(:class:`CacheCheckpoints`) write rows only after a flush returned, only for a position
the store has already acknowledged (``seq`` < the durable length), and only at turn
ends (a flushed batch holding ``turn/end``) that are at least :data:`CHECKPOINT_EVENTS`
events or :data:`CHECKPOINT_SECONDS` after the last rows, and when the session closes.
The session's resume point (:mod:`dshpy.storage.resume_cache`) is written with them, as
one more row at the same seq.
A crash between the flush and the cache write loses nothing but a shortcut; the rows a
crashed writer leaves are at most that far behind, which a reader folds in a few ms. Cold readers
(:meth:`BaseStore.projections`, listing) fold from the rows and the stored tail, and
write the result back when they had to re-fold (fail-soft: a cache that cannot be
written is logged, never an error).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import orjson

from dshpy.core.events import SessionEvent
from dshpy.core.json import JsonValue, dumps, loads
from dshpy.errors import DshError, ProjectionError
from dshpy.log.header import SessionHeader
from dshpy.projections.checkpoint import CachedState, restore, restore_floor, usable
from dshpy.projections.definition import ProjectionDefinition
from dshpy.projections.runner import ProjectionRunner, Snapshot
from dshpy.storage.records import SessionInfo
from dshpy.storage.resume_cache import RESUME_KEY, resume_state

__all__ = [
    "CHECKPOINT_EVENTS",
    "CHECKPOINT_SECONDS",
    "WRITE_BACK_TAIL",
    "CacheCheckpoints",
    "ProjectionRow",
    "SaveRows",
    "SessionProjections",
    "cached_states",
    "current_values",
    "fold_cached",
    "group_projection_rows",
    "rows_of",
    "session_identity",
]

log = logging.getLogger("dshpy.storage.projections")

WRITE_BACK_TAIL = 256
"""A cold reader that folded at least this many events past the cached rows writes them back."""

CHECKPOINT_EVENTS = 1024
"""A live session writes its rows at a turn end once this many events were folded since its last rows.

Why not at every turn end: a checkpoint dumps the changed states and rewrites the
rows (on JSONL a sidecar file and a rename, which also makes the next fsync of the
log commit directory metadata), which cost more than the events of a short turn."""

CHECKPOINT_SECONDS = 5.0
"""... or once this long has passed since its last rows (an interactive session checkpoints every turn)."""


class ProjectionRow(NamedTuple):
    """One stored cache row: a :class:`~dshpy.projections.CachedState` and the identity it was folded under.

    ``state`` is JSON as the backend parsed it (plain containers: a row is validated
    through its definition's schema before a state is built from it).
    """

    key: str
    state_version: int
    seq: int
    state: JsonValue
    identity: str


SaveRows = Callable[[str, Sequence[ProjectionRow]], None]
"""A store's upsert of one session's cache rows (``save_rows(session_id, rows)``, the backend's
``_save_projection_rows``): what a live session's checkpoints write through."""


def group_projection_rows(raw: Iterable[Sequence[Any]]) -> dict[str, dict[str, ProjectionRow]]:
    """``(session_id, key, state_version, seq, state JSON text, identity)`` tuples from a SQL backend, by session
    and key; rows whose state does not parse are left out (a damaged row is no row: the log is folded instead).

    One tight loop: listing a big store parses tens of thousands of these."""
    found: dict[str, dict[str, ProjectionRow]] = {}
    parse = loads
    for session_id, key, version, seq, state, identity in raw:
        try:
            parsed = parse(state)
        except orjson.JSONDecodeError:
            continue
        group = found.get(session_id)
        if group is None:
            group = found[session_id] = {}
        group[key] = ProjectionRow(key, version, seq, parsed, identity)
    return found


def session_identity(header: SessionHeader) -> str:
    """The identity a cache row is recorded with: compact JSON of the header fields that make a log *this* log.

    Two sessions that ever shared an id (deleted and created again, imported over a
    deleted one) differ in at least ``createdAt`` almost surely; ``cwd``,
    ``parentSession`` and ``isSeeded`` catch the rest.
    """
    return dumps([header.id, header.created_at, header.cwd, header.parent_session, header.is_seeded]).decode()


def cached_states(header: SessionHeader, rows: Iterable[ProjectionRow]) -> dict[str, CachedState]:
    """The rows recorded under ``header``'s identity, as cache seeds keyed by projection (others are dropped)."""
    identity = session_identity(header)
    return {row.key: CachedState(row.state_version, row.seq, row.state) for row in rows if row.identity == identity}


def rows_of(header: SessionHeader, states: Mapping[str, CachedState]) -> list[ProjectionRow]:
    """Rows to store for ``states`` of the session with ``header``."""
    identity = session_identity(header)
    return [ProjectionRow(key, c.state_version, c.seq, c.state, identity) for key, c in states.items()]


def current_values(
    rows: Mapping[str, ProjectionRow], versions: Sequence[tuple[str, int]], identity: str, last_seq: int
) -> dict[str, JsonValue] | None:
    """The stored states of ``versions``' keys if every row is at ``last_seq`` under ``identity`` and the
    definition's ``state_version``; ``None`` as soon as one is not (then fold, see :func:`fold_cached`)."""
    values: dict[str, JsonValue] = {}
    for key, version in versions:
        row = rows.get(key)
        if row is None or row.seq != last_seq or row.state_version != version or row.identity != identity:
            return None
        values[key] = row.state
    return values


@dataclass(frozen=True, slots=True)
class SessionProjections:
    """One session of a listing, with projection values as of ``as_of_seq`` (or why they could not be read)."""

    info: SessionInfo
    as_of_seq: int
    values: dict[str, JsonValue]
    error: str | None = None


@dataclass(slots=True)
class Folded:
    """What :func:`fold_cached` computed: the snapshot, and the rows worth writing back (empty: none)."""

    snapshot: Snapshot
    write_back: dict[str, CachedState]


def fold_cached(
    definitions: Sequence[ProjectionDefinition[Any]],
    rows: Mapping[str, CachedState],
    length: int,
    read: Any,
    *,
    trust_current: bool = False,
) -> Folded:
    """Bring ``definitions`` to the end of a stored log of ``length`` events from ``rows`` and the stored tail.

    ``read(from_seq)`` iterates the stored events from ``from_seq``. Only the tail
    after the lowest usable row is read; a row that turns out not to validate makes
    the whole log be read once. With ``trust_current``, a row already at the end of
    the log is served as stored, without loading it through its schema (listing many
    sessions: the state was dumped by this very ``state_version``).
    """
    floor = restore_floor(definitions, rows, length)
    tail: list[SessionEvent] = list(read(floor)) if floor < length else []
    end = floor + len(tail)
    values: dict[str, JsonValue] = {}
    states: dict[str, CachedState] = {}
    refold = False
    for definition in definitions:
        row = rows.get(definition.key)
        if trust_current and row is not None and row.seq == end - 1 and usable(definition, row, end) == "cached":
            values[definition.key] = row.state
            continue
        try:
            restored = restore(definition, row, tail, base_seq=floor)
        except ProjectionError:  # the row did not validate and the tail does not start at 0
            if floor == 0:
                raise
            return fold_cached(definitions, {}, end, read)
        dumped = definition.dump(restored.state)
        values[definition.key] = dumped
        if restored.outcome != "cached" or end - restored.from_seq >= WRITE_BACK_TAIL:
            refold = True
        states[definition.key] = CachedState(definition.state_version, end - 1, dumped)
    return Folded({"as_of_seq": end - 1, "values": values}, states if refold else {})


class CacheCheckpoints:
    """When a live session's projection rows are written to its store's cache (never ahead of the durable log).

    Told of every batch the store acknowledged (:meth:`stored`), it checkpoints the
    session's runner after a batch holding a ``turn/end`` once the rows are
    :data:`CHECKPOINT_EVENTS` events or :data:`CHECKPOINT_SECONDS` behind; :meth:`save`
    checkpoints at once (when the session closes, after its last flush, and after a
    crash repair) — but only a position below what the store has acknowledged, so an
    unflushed tail never reaches the cache. Cache write failures are logged and
    swallowed: the log was written, the shortcut was not.

    The runner is passed in rather than held: it is attached only once the session
    exists, while the clock of these checkpoints starts when the log was read.
    """

    __slots__ = ("_durable", "_header", "_save_rows", "_saved", "_saved_at", "_saved_seq")

    def __init__(self, header: SessionHeader, durable: int, save_rows: SaveRows) -> None:
        self._header = header
        self._save_rows = save_rows
        self._durable = durable
        """How many events the store holds for this session, as far as these checkpoints know."""
        self._saved: tuple[int, tuple[str, ...]] | None = None
        self._saved_seq = durable - 1
        """The position of the newest rows written here (or found: the log's end when it was read)."""
        self._saved_at = time.monotonic()

    @property
    def durable_length(self) -> int:
        return self._durable

    def stored(self, expected_seq: int, events: Sequence[SessionEvent], runner: ProjectionRunner) -> None:
        """The store acknowledged ``events`` at ``expected_seq``: checkpoint ``runner`` if a turn end makes it due."""
        self._durable = max(self._durable, expected_seq + len(events))
        if (
            self._durable - 1 - self._saved_seq < CHECKPOINT_EVENTS
            and time.monotonic() - self._saved_at < CHECKPOINT_SECONDS
        ):
            return
        for event in events:
            if event.type == "turn/end":
                self.save(runner)
                break

    def save(self, runner: ProjectionRunner) -> bool:
        """Checkpoint ``runner`` into the cache now, if that is safe; returns whether rows were written."""
        try:
            rows = runner.checkpoint()
            session = runner.session
            point = None if session is None else session.resume_point()
        except Exception:  # a projection that cannot fold or dump an event must not fail the flush that made it durable
            log.exception("projection cache of session %s not written: a projection failed", self._header.id)
            return False
        if not rows:
            return False
        seq = next(iter(rows.values())).seq
        if point is not None and point.length - 1 == seq:
            rows[RESUME_KEY] = resume_state(point)
        mark = (seq, tuple(rows))
        if seq >= self._durable or mark == self._saved:
            return False  # ahead of the durable log (a flush failed or is pending), or already written
        try:
            self._save_rows(self._header.id, rows_of(self._header, rows))
        except (DshError, OSError) as error:
            log.warning("projection cache of session %s not written: %s", self._header.id, error)
            return False
        self._saved = mark
        self._saved_seq = seq
        self._saved_at = time.monotonic()
        return True
