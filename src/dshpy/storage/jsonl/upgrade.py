"""Storing an old generation's upgrade: the v4 file written beside it the way dsh stages it.

dsh publishes an upgraded generation before it grants write access (dsh-v4 §1.3):

1. the v4 log is written to ``session.migration.<16 hex>.jsonl[.zstd].tmp`` (created
   exclusively, mode 0600): the header line, then every event — compressed, the
   header alone in frame 0 and the body as one checksummed frame — and fsynced;
2. the stage is read back from disk and verified: it must decode as a v4 log of
   this session with the same events, and hold exactly the bytes that were written;
3. the source must be unchanged since it was read (its stat identity), and so must
   the set of historical children whose facts went into the upgrade;
4. ``link(stage, session.v4.jsonl[.zstd])`` publishes it without ever overwriting;
   the directory is fsynced and the stage unlinked. If the target already exists
   its bytes must be the ones staged, else nothing is published.

The old file is never changed or deleted. A crash at any point leaves the old file
alone, or the old file and a complete v4 file beside it (a stage left behind is
ignored by readers: its name is not a generation). The v4 file's bytes are exactly
what dsh 0.2.1rc2 stages for the same source (the records keep dsh's key order).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dshpy.core.events import encode_seq_ranges
from dshpy.core.json import dumps
from dshpy.errors import ConflictError, StoreError
from dshpy.log.header import FORMAT_VERSION
from dshpy.log.invariants import validate
from dshpy.storage.jsonl.files import file_errors, fsync_dir, write_all
from dshpy.storage.jsonl.layout import Location, generation_filename
from dshpy.storage.jsonl.scan import LogReader, Scan, revision
from dshpy.storage.jsonl.zstd_frames import compress_frame

__all__ = ["STAGE_PREFIX", "UpgradeReport", "encode_generation", "publish_upgrade"]

STAGE_PREFIX = "session.migration."


@dataclass(frozen=True, slots=True)
class UpgradeReport:
    """What upgrading one session did (or, for a dry run, would do)."""

    session_id: str
    from_version: int
    source: Path
    """The generation that was read (never changed)."""
    target: Path
    """The v4 file written, or that a real run would write."""
    event_count: int
    written: bool
    """Whether ``target`` was written by this call (``False`` for a dry run or a session already current)."""

    @property
    def current(self) -> bool:
        """The session was stored in the current format already; there was nothing to do."""
        return self.from_version >= FORMAT_VERSION

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.session_id,
            "fromVersion": self.from_version,
            "source": str(self.source),
            "target": str(self.target),
            "eventCount": self.event_count,
            "written": self.written,
        }


def _checkpoint(step: str) -> None:
    """Called between the publication steps; the crash tests kill the process here (dsh's ``barrier``)."""


def _storage_form(record: dict[str, Any]) -> dict[str, Any]:
    seqs = record.get("sourceEventSeqs")
    if not isinstance(seqs, list):
        return record
    return {**record, "sourceEventSeqs": encode_seq_ranges(seqs)}


def encode_generation(records: tuple[dict[str, Any], ...], *, compressed: bool) -> bytes:
    """The v4 file of an upgrade: the header line, then one line per event (``sourceEventSeqs`` range-packed)."""
    header, *events = records
    head = dumps(header) + b"\n"
    body = b"".join(dumps(_storage_form(event)) + b"\n" for event in events)
    if not compressed:
        return head + body
    return compress_frame(head) + (compress_frame(body) if body else b"")


def _stage(session_dir: Path, data: bytes, suffix: str) -> Path:
    while True:
        path = session_dir / f"{STAGE_PREFIX}{secrets.token_hex(8)}{suffix}.tmp"
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            break
        except FileExistsError:
            continue
    try:
        _checkpoint("staging")
        write_all(fd, data)
        _checkpoint("staged")
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise
    os.close(fd)
    _checkpoint("synced")
    return path


def _verify(reader: LogReader, session_id: str, location: Location, stage: Path, data: bytes, events: int) -> Scan:
    """Read the stage back from disk: the same bytes, decoding as this session's v4 log with every event."""
    staged = stage.read_bytes()
    if staged != data:
        raise StoreError(f'session "{session_id}": the staged upgrade {stage} does not hold the bytes written')
    checked = reader.scan_bytes(staged, session_id, Location(location.session_dir, stage, FORMAT_VERSION))
    if checked.header.id != session_id or checked.count != events or checked.truncate_to is not None:
        raise StoreError(f'session "{session_id}": the staged upgrade {stage} does not read back as written')
    validate(checked.events[: checked.count])
    return checked


def publish_upgrade(
    reader: LogReader, session_id: str, location: Location, scan: Scan, source_revision: tuple[int, ...]
) -> tuple[Location, Scan]:
    """Write the upgrade ``scan`` holds beside the old generation at ``location``; returns the v4 location and scan.

    The caller holds the session's lock and read ``scan`` from the file whose stat
    identity was ``source_revision``.
    """
    compressed = reader.compressed
    target = location.session_dir / generation_filename(FORMAT_VERSION, compressed=compressed)
    data = encode_generation(scan.records, compressed=compressed)
    children = reader.children(session_id)
    with file_errors(f'session "{session_id}": cannot store its upgrade to v{FORMAT_VERSION}'):
        stage = _stage(location.session_dir, data, ".zstd" if compressed else "")
        try:
            checked = _verify(reader, session_id, location, stage, data, scan.count)
            _checkpoint("verified")
            if revision(os.stat(location.path)) != source_revision or reader.children(session_id) != children:
                raise ConflictError(
                    f'historical session generation changed during migration: "{location.path}"', expected_seq=0
                )
            try:
                os.link(stage, target)
            except FileExistsError:
                existing = target.read_bytes()
                if hashlib.sha256(existing).digest() != hashlib.sha256(data).digest():
                    raise StoreError(
                        f'current session generation already exists at "{target}": its bytes differ from the '
                        "upgrade of the old generation; nothing was published"
                    ) from None
            _checkpoint("linked")
            fsync_dir(location.session_dir)
            _checkpoint("published")
        finally:
            with contextlib.suppress(OSError):
                os.unlink(stage)
        published = os.stat(target)
    current = Location(location.session_dir, target, FORMAT_VERSION)
    fresh = Scan(checked.header, checked.events, checked.count, len(data), None, 0, checked.last_time)
    reader.cache.put(target, revision(published), fresh)
    return current, fresh
