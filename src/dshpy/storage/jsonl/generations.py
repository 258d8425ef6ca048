"""Reading an old generation (v0–v3) of a JSONL session: its upgrade, in memory, as dsh does it.

dsh keeps every generation it ever wrote beside the newer ones
(``session.jsonl``, ``session.v1.jsonl`` …) and reads the highest. When that is
older than v4, a reader upgrades it in memory with dsh's chain
(:mod:`dshpy.log.formats`) and writes nothing (dsh-v4 §1.3); only a writer publishes
the upgrade (:mod:`~dshpy.storage.jsonl.upgrade`). The upgraded events are checked
like any stored v4 log; an edge's refusal, or an upgraded log that v4 refuses,
leaves the old file as it is and says so, in dsh's words.

A parent's v3→v4 edge needs its historical subagent children
(:mod:`dshpy.log.formats.children`): :func:`child_evidence` reads one child the way
dsh's ``prepareCatalogFacts`` does, keeping a child it cannot read as "unknown".
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dshpy.core.events import SessionEvent, decode_event
from dshpy.errors import DshError, FormatVersionError
from dshpy.log.formats import ChildSource, MigrationRefusedError, child_source, dsh_chain, unavailable_child
from dshpy.log.header import FORMAT_VERSION, SessionHeader
from dshpy.log.invariants import validate

__all__ = ["Upgraded", "child_evidence", "migrate_header", "migrate_log"]

log = logging.getLogger("dshpy.storage.jsonl")  # the backend's one logger: its name is what users configure


@dataclass(frozen=True, slots=True)
class Upgraded:
    """An old generation as v4: the header and events, and the records an upgrade writes (dsh's key order)."""

    header: SessionHeader
    events: list[SessionEvent]
    records: tuple[dict[str, Any], ...]


def _unchanged(error: BaseException, version: int, path: Path) -> MigrationRefusedError:
    return MigrationRefusedError(f"{error}; source v{version} artifact remains unchanged (raw log: {path})")


def migrate_header(raw: dict[str, Any], session_id: str, path: Path) -> dict[str, Any]:
    """The v4 header record of an old generation's header (refusals name the untouched source)."""
    try:
        return dsh_chain().migrate_header(raw, session_id)
    except MigrationRefusedError as error:
        raise _unchanged(error, raw["version"], path) from None


def migrate_log(
    header: dict[str, Any], rows: Sequence[dict[str, Any]], children: Sequence[ChildSource], path: Path
) -> Upgraded:
    """Upgrade an old generation's decoded rows with dsh's chain and check the result as v4.

    Raises :class:`~dshpy.log.formats.MigrationRefusedError` when an edge refuses the
    log, or when the upgraded log breaks a v4 rule (dsh: "refuses the transformed artifact").
    """
    version = header["version"]
    session_id = header["id"]
    try:
        record, stream = dsh_chain(children).upgrade(header, rows, session_id, decoded=True)
        records = list(stream)
    except MigrationRefusedError as error:
        raise _unchanged(error, version, path) from None
    try:
        current = SessionHeader.from_record(record)
        events = [decode_event(raw) for raw in records]
        validate(events)
    except DshError as error:
        transformed = MigrationRefusedError(
            f"Session migration from v{version} to v{FORMAT_VERSION} refuses the transformed artifact: {error}"
        )
        raise _unchanged(transformed, version, path) from None
    return Upgraded(current, events, (record, *records))


def child_evidence(
    child_id: str, header: SessionHeader, events: Sequence[SessionEvent] | None, error: Any
) -> ChildSource:
    """What one subagent child tells its parent's upgrade; a child that could not be read is kept as "unknown"."""
    if events is None:
        log.warning(
            'session "%s" catalog retained a child with unknown descriptor (%s): %s',
            header.parent_session,
            child_id,
            error,
        )
        return unavailable_child(child_id, header.created_at)
    markers = [e.seq for e in events if e.type == "session/end-seed" and _inherited(e)]
    inherited = markers[-1] if header.is_seeded and markers else 0
    descriptors = [{"type": e.type, "seq": e.seq, "data": e.data} for e in events if e.type == "subagent/descriptor"]
    try:
        return child_source(header.to_record(), descriptors, inherited)
    except (MigrationRefusedError, FormatVersionError, DshError) as refused:
        log.warning(
            'session "%s" catalog retained a child with unknown descriptor (%s): %s',
            header.parent_session,
            child_id,
            refused,
        )
        return unavailable_child(child_id, header.created_at)


def _inherited(event: SessionEvent) -> bool:
    data = event.data
    return isinstance(data, dict) and data.get("inherited") is True
