"""Format versions and the chain of one-step migrations that upgrades old logs on read.

The stored format is one integer. A reader upgrades an older log in memory by
running the adjacent edges n→n+1 up to :data:`FORMAT_VERSION`; the stored bytes are
never rewritten by a read. A newer version is refused with "upgrade", never guessed
at. The chain is checked when it is built: every edge must be adjacent, none may be
missing or duplicated, and it must end at the current version.

dsh's own v0→v4 edges are not shipped yet; :data:`DEFAULT_CHAIN` reads v4 only and
reports older logs as having no upgrade path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from dshpy.errors import FormatVersionError
from dshpy.log.header import FORMAT_VERSION

__all__ = ["DEFAULT_CHAIN", "FORMAT_VERSION", "Migration", "MigrationChain", "format_version_of"]

HeaderRecord = dict[str, Any]
EventRecord = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Migration:
    """One edge ``from_version`` → ``from_version + 1`` over raw header and event records.

    ``migrate_events`` receives the whole stream (edges may renumber, fold or insert
    events) and the already-migrated header; it must not mutate its inputs.
    """

    name: str
    from_version: int
    to_version: int
    migrate_header: Callable[[HeaderRecord], HeaderRecord]
    migrate_events: Callable[[Iterable[EventRecord], HeaderRecord], Iterable[EventRecord]]


def format_version_of(header: Any, session_id: str = "") -> int:
    """The ``version`` of a raw header record, checked to be a non-negative integer."""
    version = header.get("version") if isinstance(header, dict) else None
    if type(version) is not int or version < 0:
        label = f'session "{session_id}"' if session_id else "session"
        raise FormatVersionError(f"{label} has no valid format version in its header (got {version!r})")
    return version


class MigrationChain:
    """The adjacent edges from ``oldest`` up to ``current``, validated on construction."""

    def __init__(self, current: int, migrations: Sequence[Migration] = ()) -> None:
        edges: dict[int, Migration] = {}
        for edge in migrations:
            if edge.to_version != edge.from_version + 1:
                raise ValueError(
                    f"session migration {edge.name} must declare adjacent v{edge.from_version}->"
                    f"v{edge.from_version + 1}, not v{edge.from_version}->v{edge.to_version}"
                )
            if edge.from_version in edges:
                raise ValueError(f"session migration v{edge.from_version}->v{edge.to_version} is declared twice")
            if edge.to_version > current:
                raise ValueError(f"session migration {edge.name} goes past the current format v{current}")
            edges[edge.from_version] = edge
        oldest = min(edges, default=current)
        for version in range(oldest, current):
            if version not in edges:
                raise ValueError(f"session migration v{version}->v{version + 1} is missing")
        self.current = current
        self.oldest = oldest
        self._edges = edges

    def plan(self, stored: int, session_id: str = "") -> list[Migration]:
        """The edges that take ``stored`` to the current version (``[]`` when current)."""
        label = f'session "{session_id}"' if session_id else "session"
        if stored > self.current:
            raise FormatVersionError(
                f"{label} uses log format v{stored}, but this dshpy reads only v{self.current}: the log was "
                "written by a newer harness — upgrade dshpy to open it"
            )
        if stored < self.oldest:
            raise FormatVersionError(
                f"{label} uses log format v{stored}, older than the oldest supported v{self.oldest}, and this "
                "build ships no upgrade path for it"
            )
        return [self._edges[version] for version in range(stored, self.current)]

    def upgrade(
        self, header: HeaderRecord, events: Iterable[EventRecord], session_id: str = ""
    ) -> tuple[HeaderRecord, Iterator[EventRecord]]:
        """Run the needed edges over raw records, in memory; returns current-version records."""
        stored = format_version_of(header, session_id)
        stream: Iterable[EventRecord] = events
        for edge in self.plan(stored, session_id):
            header = edge.migrate_header(header)
            if format_version_of(header) != edge.to_version:
                raise FormatVersionError(f"session migration {edge.name} produced a v{header.get('version')} header")
            stream = edge.migrate_events(stream, header)
        return header, iter(stream)


DEFAULT_CHAIN = MigrationChain(FORMAT_VERSION)
"""Reads format v4 (dsh's current); older logs report that no upgrade path ships yet."""
