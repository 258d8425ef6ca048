"""The projection cache of a JSONL session: one sidecar file in its directory, replaced whole.

``dshpy.projcache.json`` holds ``{"format", "version", "identity", "rows": {key:
{stateVersion, seq, state}}}``; dsh ignores files it does not know in a session
directory. The file is replaced whole: the old one unlinked, a temporary renamed into
its place. It is never torn but not fsynced either: after a crash it may be missing
or empty, and a missing or unreadable sidecar is simply no cache. It is written
without the session lock: every row it can hold is valid for the log it names, so a
lost update costs a re-fold only.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Callable, Sequence
from pathlib import Path

from dshpy.core.json import dumps, loads
from dshpy.storage.jsonl.files import write_all
from dshpy.storage.projection_cache import ProjectionRow

__all__ = ["PROJECTION_CACHE_FILENAME", "read_sidecar", "save_sidecar"]

PROJECTION_CACHE_FILENAME = "dshpy.projcache.json"
"""The projection cache sidecar in a session directory (dsh ignores files it does not know there)."""
_PROJECTION_CACHE_FORMAT = "dshpy.projcache"


def read_sidecar(session_dir: Path) -> tuple[str, dict[str, ProjectionRow]] | None:
    """The sidecar's identity and rows; ``None`` when there is none or it is unreadable (no cache)."""
    try:
        with open(session_dir / PROJECTION_CACHE_FILENAME, "rb") as file:
            raw = loads(file.read())
    except (OSError, ValueError):
        return None
    if not isinstance(raw, dict) or raw.get("format") != _PROJECTION_CACHE_FORMAT or raw.get("version") != 1:
        return None
    identity, rows = raw.get("identity"), raw.get("rows")
    if not isinstance(identity, str) or not isinstance(rows, dict):
        return None
    found: dict[str, ProjectionRow] = {}
    for key, value in rows.items():
        if not isinstance(value, dict):
            continue
        version, seq = value.get("stateVersion"), value.get("seq")
        if type(version) is not int or type(seq) is not int or "state" not in value:
            continue
        found[key] = ProjectionRow(key, version, seq, value["state"], identity)
    return identity, found


def save_sidecar(session_dir: Path, rows: Sequence[ProjectionRow], *, still_there: Callable[[], bool]) -> None:
    """Merge ``rows`` (all of the last row's identity) into the sidecar and replace it.

    Rows the sidecar holds for the same identity are kept, another identity's are
    dropped. ``still_there`` is asked once the new file is written: a session deleted
    meanwhile must not get a cache back in its directory.
    """
    identity = rows[-1].identity
    existing = read_sidecar(session_dir)
    merged: dict[str, ProjectionRow] = {}
    if existing is not None and existing[0] == identity:
        merged.update(existing[1])
    merged.update((row.key, row) for row in rows if row.identity == identity)
    document = {
        "format": _PROJECTION_CACHE_FORMAT,
        "version": 1,
        "identity": identity,
        "rows": {
            key: {"stateVersion": row.state_version, "seq": row.seq, "state": row.state} for key, row in merged.items()
        },
    }
    final = session_dir / PROJECTION_CACHE_FILENAME
    temporary = session_dir / f"{PROJECTION_CACHE_FILENAME}.{secrets.token_hex(6)}.tmp"
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except FileNotFoundError:
        return  # the session directory is gone: deleted meanwhile
    try:
        try:
            write_all(fd, dumps(document))
        finally:
            os.close(fd)
        if not still_there():
            return  # deleted meanwhile: leave no cache behind in its directory
        # Unlink, then rename onto a free name: ext4 flushes a file renamed over an existing one
        # (auto_da_alloc), ~0.3 ms right after a log fsync, for a cache that needs no durability.
        # Meanwhile a reader finds no cache and folds the log, as after a crash.
        with contextlib.suppress(FileNotFoundError):
            os.unlink(final)
        os.replace(temporary, final)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
