"""Cached projection states: the row a store keeps, and the rules for trusting it.

A projection cache never holds truth, only a shortcut: ``CachedState(state_version,
seq, state)`` says "folding the log up to and including ``seq`` gave ``state``". A
reader may start from it and fold only the events after ``seq`` — but only when the
row still describes this log:

* ``state_version`` equals the definition's (otherwise the fold changed meaning);
* ``seq`` is within the log (a row *beyond* the log was written for a longer log: a
  different session under the same id, or a cache written ahead of a lost tail);
* ``state`` validates against ``state_schema``.

Anything else is *stale*: the state is re-folded from the log, which is always
correct, merely slower. Whether the row belongs to this session at all (its header
identity — id, ``createdAt``, ``cwd``, fork parent) is the store's check, made
before it hands rows over; rows must never be written ahead of the flushed log.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal

from dshpy.core.events import SessionEvent
from dshpy.core.json import JsonValue
from dshpy.errors import ProjectionError
from dshpy.projections.definition import ProjectionDefinition, S, window

__all__ = ["CachedState", "Restored", "SeedOutcome", "restore", "restore_floor", "usable"]

SeedOutcome = Literal["fresh", "cached", "stale-version", "beyond-log", "invalid"]
"""How a projection was started: ``fresh`` (no row: folded from ``init()``), ``cached``
(row used, only later events folded), or why a row was discarded and the state re-folded."""


@dataclass(frozen=True, slots=True)
class CachedState:
    """One cache row for one projection of one session.

    ``seq`` is the last seq folded into ``state`` (``-1``: nothing, the ``init()``
    state); ``state`` is the definition's :meth:`~ProjectionDefinition.dump` output.
    """

    state_version: int
    seq: int
    state: JsonValue

    def to_json(self) -> dict[str, Any]:
        """The row as one JSON object (for stores that keep rows in a document, e.g. a sidecar file)."""
        return {"stateVersion": self.state_version, "seq": self.seq, "state": self.state}

    @classmethod
    def from_json(cls, value: Any) -> CachedState:
        """Parse :meth:`to_json` output; raises :class:`~dshpy.errors.ProjectionError` on a malformed row."""
        if not isinstance(value, dict) or set(value) != {"stateVersion", "seq", "state"}:
            raise ProjectionError("a cached projection row needs exactly stateVersion, seq and state")
        version, seq = value["stateVersion"], value["seq"]
        if type(version) is not int or type(seq) is not int:
            raise ProjectionError("a cached projection row needs integer stateVersion and seq")
        return cls(version, seq, value["state"])


def usable(definition: ProjectionDefinition[Any], row: CachedState, log_length: int) -> SeedOutcome:
    """``"cached"`` if ``row`` may seed ``definition`` on a log of ``log_length`` events, else why not.

    Validity of ``row.state`` against the schema is checked when it is loaded
    (``"invalid"``); this only compares version and position.
    """
    if row.state_version != definition.state_version:
        return "stale-version"
    if not -1 <= row.seq < log_length:
        return "beyond-log"
    return "cached"


@dataclass(frozen=True, slots=True)
class Restored(Generic[S]):
    """A projection's state after the whole log, and how it got there."""

    state: S
    outcome: SeedOutcome
    from_seq: int
    """First seq that was folded (the log's length when nothing was)."""


def restore(
    definition: ProjectionDefinition[S],
    row: CachedState | None,
    events: Sequence[SessionEvent],
    *,
    base_seq: int = 0,
) -> Restored[S]:
    """Bring ``definition`` to the end of the log, from ``row`` when it is usable.

    ``events`` is the log from ``base_seq`` to its end (the whole log when
    ``base_seq`` is 0; a tail read from :func:`restore_floor` otherwise). Only the
    events after the row's ``seq`` are folded. If the row is missing or stale and
    the window does not start at seq 0, :class:`~dshpy.errors.ProjectionError` asks
    the caller to read the log from seq 0.
    """
    log_length = base_seq + len(events)
    outcome: SeedOutcome = "fresh" if row is None else usable(definition, row, log_length)
    state: S | None = None
    start = 0
    if row is not None and outcome == "cached":
        if row.seq + 1 < base_seq:
            raise ProjectionError(
                f'projection "{definition.key}": cached at seq {row.seq} but the events given start at seq '
                f"{base_seq}; read from seq {row.seq + 1}"
            )
        try:
            state = definition.load(row.state)
            start = row.seq + 1
        except ProjectionError:
            outcome = "invalid"
    if state is None:
        if base_seq != 0:
            raise ProjectionError(
                f'projection "{definition.key}": no usable cached state ({outcome}); re-read the log from seq 0'
            )
        state = definition.init()
    folded = definition.fold(window(events, start - base_seq), state) if start < log_length else state
    return Restored(folded, outcome, start)


def restore_floor(
    definitions: Iterable[ProjectionDefinition[Any]], rows: Mapping[str, CachedState], log_length: int
) -> int:
    """The first seq a reader must fetch so that :func:`restore` can bring every definition up to date.

    It is the lowest ``seq + 1`` over the usable rows, or 0 as soon as one definition
    has no usable row (its state has to be folded from the start). Whether a row's
    state validates is only known when it is loaded; :func:`restore` then asks for
    a re-read from 0.
    """
    floor = log_length
    for definition in definitions:
        row = rows.get(definition.key)
        if row is None or usable(definition, row, log_length) != "cached":
            return 0
        floor = min(floor, row.seq + 1)
    return floor
