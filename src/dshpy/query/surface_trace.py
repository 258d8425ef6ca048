"""Where each logged event stands on the model's surface, and which replacement took which event off it.

A read-side fold over a stored log's surface events (dsh's ``foldSurface`` with its
replacement records), kept apart from the live :class:`~dshpy.log.surface.Surface`
because it answers other questions: not "what does the model see next" but "was seq
12 ever seen, and what stands in its place now". It trusts the log's validation and
checks only what it needs: a replacement naming an event that is not on the surface
is ``SESSION_QUERY_INVALID_SURFACE``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from dshpy.core.events import SessionEvent, SurfaceReplace
from dshpy.core.vocabulary import SURFACE_EVENT_TYPES
from dshpy.query.errors import INVALID_SURFACE, QueryError
from dshpy.query.results import Surface

__all__ = ["SURFACE_TYPES", "SurfaceTrace", "trace_surface"]

SURFACE_TYPES: tuple[str, ...] = tuple(sorted(SURFACE_EVENT_TYPES))
"""The types a fold needs to read: no other event carries a surface op or cites others."""


@dataclass(slots=True)
class SurfaceTrace:
    """The folded surface of one log."""

    current: list[int] = field(default_factory=list)
    """Seqs on the surface now, in model order."""
    replaced_by: dict[int, int] = field(default_factory=dict)
    """Seq → the seq of the replacement that took it off the surface."""
    replaced: dict[int, tuple[int, ...]] = field(default_factory=dict)
    """Replacement seq → the seqs it took off the surface."""
    derived: dict[int, list[int]] = field(default_factory=dict)
    """Seq → later events whose ``sourceEventSeqs`` cite it."""
    on_surface: frozenset[int] = frozenset()
    """:attr:`current` as a set."""

    def surface_of(self, seq: int) -> Surface:
        if seq in self.on_surface:
            return "current"
        return "shadowed" if seq in self.replaced_by else "log-only"

    def chain(self, seq: int) -> tuple[int, ...]:
        """The replacements that followed ``seq`` off the surface, to the one standing now."""
        found: list[int] = []
        at = self.replaced_by.get(seq)
        while at is not None:
            found.append(at)
            at = self.replaced_by.get(at)
        return tuple(found)


def trace_surface(
    session_id: str, events: Iterable[SessionEvent], *, into: SurfaceTrace | None = None
) -> SurfaceTrace:
    """Fold the surface events of a log (any others given are passed over).

    ``into`` continues an earlier fold with the events that followed it (a live view
    folds only what was appended since), and is returned updated.
    """
    trace = into if into is not None else SurfaceTrace()
    nodes = trace.current
    for event in events:
        for source in event.source_event_seqs or ():
            trace.derived.setdefault(source, []).append(event.seq)
        op = event.surface_op
        if op is None or event.type not in SURFACE_EVENT_TYPES:
            continue
        if not isinstance(op, SurfaceReplace):
            nodes.append(event.seq)
            continue
        try:
            start, end = nodes.index(op.start_seq), nodes.index(op.end_seq)
        except ValueError:
            raise QueryError(
                INVALID_SURFACE,
                f'invalid session surface in "{session_id}": seq {event.seq} replaces seqs {op.start_seq}..'
                f"{op.end_seq}, which are not on the surface",
            ) from None
        if start > end:
            raise QueryError(
                INVALID_SURFACE,
                f'invalid session surface in "{session_id}": seq {event.seq} replaces a span that runs backwards',
            )
        shadowed = tuple(nodes[start : end + 1])
        trace.replaced[event.seq] = shadowed
        for seq in shadowed:
            trace.replaced_by[seq] = event.seq
        nodes[start : end + 1] = [event.seq]
    trace.on_surface = frozenset(nodes)
    return trace
