"""The migration chain: adjacent edges n→n+1, checked when built, run lazily over a record stream.

A reader upgrades an older log in memory by running the edges from its stored
version up to the current one; the stored bytes are never rewritten by a read. A
newer version is refused with "upgrade", never guessed at. The chain is checked when
it is built: every edge must be adjacent, none may be missing or duplicated, and it
must end at the current version.

Headers and events travel as raw records (JSON objects whose key order is the order
they will be written in, as in dsh, whose upgraded file is ``JSON.stringify`` of
what its edges built). An edge that finds something it cannot convert refuses the
whole log: a :class:`MigrationRefusedError` an edge raises passes unchanged, and any
other failure inside an edge (malformed data, a :class:`FormatError`) becomes one
worded as dsh words it, ``<edge> refuses this format vN Session: <detail>``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from dshpy.errors import DshError, FormatVersionError

__all__ = [
    "EventRecord",
    "FormatError",
    "HeaderRecord",
    "Migration",
    "MigrationChain",
    "MigrationRefusedError",
    "format_version_of",
]

HeaderRecord = dict[str, Any]
EventRecord = dict[str, Any]


class FormatError(DshError, ValueError):
    """A stored record does not have the shape its format version requires.

    Raised by the codecs and edges of :mod:`dshpy.log.formats`; a store reports it as
    corruption when it comes from decoding, and the chain reports it as a refusal of
    the edge it happened in.
    """


class MigrationRefusedError(FormatVersionError):
    """An upgrade edge cannot convert a stored log without changing what it means.

    The stored log is intact and stays as it is; this build just cannot bring it to
    the current format (dsh's ``SessionFormatUnsupportedMigrationError``).
    """


_WRAPPED = (FormatError, TypeError, KeyError, AttributeError, IndexError, ValueError)
"""What an edge may raise on malformed input: each becomes a refusal naming the edge."""


@dataclass(frozen=True, slots=True)
class Migration:
    """One edge ``from_version`` → ``from_version + 1`` over raw header and event records.

    ``migrate_events(events, header)`` receives the whole stream (edges may renumber,
    fold or insert events) and the already-migrated header. An edge that also needs
    the source header (dsh's v1→v2 reads its fork cut there) gives
    ``migrate_stream(events, source_header, target_header)`` instead. Neither may
    mutate its inputs.
    """

    name: str
    from_version: int
    to_version: int
    migrate_header: Callable[[HeaderRecord], HeaderRecord]
    migrate_events: Callable[[Iterable[EventRecord], HeaderRecord], Iterable[EventRecord]] | None = None
    migrate_stream: Callable[[Iterable[EventRecord], HeaderRecord, HeaderRecord], Iterable[EventRecord]] | None = None

    def stream(
        self, events: Iterable[EventRecord], source: HeaderRecord, target: HeaderRecord
    ) -> Iterator[EventRecord]:
        """The edge's output stream, failures worded as this edge's refusal."""
        if self.migrate_stream is not None:
            produced = self.migrate_stream(events, source, target)
        elif self.migrate_events is not None:
            produced = self.migrate_events(events, target)
        else:
            raise ValueError(f"session migration {self.name} converts no events")
        try:
            yield from produced
        except MigrationRefusedError:
            raise
        except _WRAPPED as error:
            raise self.refusal(error) from error

    def header(self, source: HeaderRecord) -> HeaderRecord:
        """The migrated header, failures worded as this edge's refusal of the header."""
        try:
            return self.migrate_header(source)
        except MigrationRefusedError:
            raise
        except _WRAPPED as error:
            raise self.refusal(error, "Session header") from error

    def refusal(self, error: BaseException, subject: str = "Session") -> MigrationRefusedError:
        detail = error.args[0] if isinstance(error, KeyError) and error.args else error
        return MigrationRefusedError(f"{self.name} refuses this format v{self.from_version} {subject}: {detail}")


def format_version_of(header: Any, session_id: str = "") -> int:
    """The ``version`` of a raw header record, checked to be a non-negative integer."""
    version = header.get("version") if isinstance(header, dict) else None
    if type(version) is not int or version < 0:
        label = f'session "{session_id}"' if session_id else "session"
        raise FormatVersionError(f"{label} has no valid format version in its header (got {version!r})")
    return version


class MigrationChain:
    """The adjacent edges from ``oldest`` up to ``current``, validated on construction."""

    def __init__(
        self,
        current: int,
        migrations: Sequence[Migration] = (),
        *,
        decode: Callable[[Iterable[EventRecord], int], Iterable[EventRecord]] | None = None,
    ) -> None:
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
        self._decode = decode
        """Turns stored rows of a version into the records its edge reads (e.g. range-encoded citations expanded)."""

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

    def with_edge(self, edge: Migration) -> MigrationChain:
        """This chain with ``edge`` in place of the one from the same version."""
        return MigrationChain(
            self.current, [*(e for e in self._edges.values() if e.from_version != edge.from_version), edge]
        )

    def migrate_header(self, header: HeaderRecord, session_id: str = "") -> HeaderRecord:
        """Only the header, brought to the current version (cheap: no event is read)."""
        for edge in self.plan(format_version_of(header, session_id), session_id):
            header = self._step(edge, header)
        return header

    def upgrade(
        self, header: HeaderRecord, events: Iterable[EventRecord], session_id: str = "", *, decoded: bool = False
    ) -> tuple[HeaderRecord, Iterator[EventRecord]]:
        """Run the needed edges over raw records, in memory; returns current-version records.

        The events are converted lazily, as the returned iterator is consumed; a refusal
        surfaces there. Stored rows are decoded first unless the caller already did
        (``decoded``: a store decodes each row as it reads it, to name a damaged line).
        """
        stored = format_version_of(header, session_id)
        stream: Iterable[EventRecord] = events
        if self._decode is not None and not decoded and stored < self.current:
            stream = self._decode(stream, stored)
        for edge in self.plan(stored, session_id):
            target = self._step(edge, header)
            stream = edge.stream(stream, header, target)
            header = target
        return header, iter(stream)

    @staticmethod
    def _step(edge: Migration, header: HeaderRecord) -> HeaderRecord:
        target = edge.header(header)
        if format_version_of(target) != edge.to_version:
            raise FormatVersionError(f"session migration {edge.name} produced a v{target.get('version')} header")
        return target
