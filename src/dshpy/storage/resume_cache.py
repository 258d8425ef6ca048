"""Resume points in the projection cache: opening a long session reads only its tail.

A live session's resume point (:mod:`dshpy.log.resume`) is written as one more row of
the store's projection cache (key :data:`RESUME_KEY`), beside the projection rows and
at the same moments (:class:`~dshpy.storage.projection_cache.CacheCheckpoints`: after a
flush the store acknowledged, at turn ends that are due, when the session closes). So
no backend needs a new table, and the row inherits the cache's rules: it is recorded
under the session's identity, never written ahead of the durable log, and a damaged or
missing row is only a missing shortcut.

:func:`usable_point` decides whether ``open``/``inspect`` may start from a row. It must
be recorded under the session's current identity (the store drops other identities'
rows before they get here), have this format's version, lie within the log, parse and
pass its own digest, and its ``seq`` must be the point's. The store then reads the log
from the point's last event on and compares that event's fingerprint: a row from
another session, another store or a rewritten log fails there. Any failure — there,
or while the tail after the point is validated — falls back to reading the whole log,
which gives exactly the same session or the error the log deserves.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from dshpy.log.resume import RESUME_FORMAT, ResumeError, ResumePoint, parse_resume_point
from dshpy.projections.checkpoint import CachedState

__all__ = ["RESUME_KEY", "resume_state", "usable_point"]

log = logging.getLogger("dshpy.storage.resume")

RESUME_KEY = "dshpy:resume"
"""The cache row key of a session's resume point (no projection key holds a colon)."""


def resume_state(point: ResumePoint) -> CachedState:
    """The cache row that stores ``point`` (``seq``: the last event it covers)."""
    return CachedState(RESUME_FORMAT, point.length - 1, point.to_state())


def usable_point(session_id: str, seeds: Mapping[str, CachedState], length: int) -> ResumePoint | None:
    """The resume point among ``seeds`` (rows of the session's identity) if it may start a log of ``length``.

    ``None`` when there is none or it is unusable (logged at debug level: a stale
    point is normal after a crash or another writer's appends are longer than one).
    """
    row = seeds.get(RESUME_KEY)
    if row is None:
        return None
    if row.state_version != RESUME_FORMAT or not 0 <= row.seq < length:
        log.debug("resume point of session %s not used: version %s at seq %s", session_id, row.state_version, row.seq)
        return None
    try:
        point = parse_resume_point(row.state)
    except ResumeError as error:
        log.info("resume point of session %s not used: %s", session_id, error)
        return None
    if point.length - 1 != row.seq:
        log.info("resume point of session %s not used: row seq %d, point seq %d", session_id, row.seq, point.length - 1)
        return None
    return point
