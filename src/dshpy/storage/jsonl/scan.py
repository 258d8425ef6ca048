"""Reading a JSONL log: the header check, the plain and zstd scans, and the cache of whole scans.

A scan tells a torn tail from damage (see :mod:`dshpy.storage.jsonl`): only bytes a
crash can have left unfinished are dropped, and every complete line or frame must be
the next valid event, or the log is :class:`~dshpy.errors.CorruptSessionError` naming
where. A full scan is cached under the file's revision, so a session reopened, or
replayed after its own writer appended (the writer puts its new scan here), is not
parsed again.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from dshpy.core.events import SessionEvent, decode_stored
from dshpy.core.json import loads, unsafe_number_possible
from dshpy.errors import CorruptSessionError, DshError, FormatVersionError
from dshpy.log.formats import ChildSource, FormatError
from dshpy.log.formats.physical import decode_header, decode_row, is_packed, packed_run_span, row_count
from dshpy.log.header import FORMAT_VERSION, SessionHeader
from dshpy.log.versions import DEFAULT_CHAIN
from dshpy.storage.jsonl.files import reading, same_file
from dshpy.storage.jsonl.generations import migrate_header, migrate_log
from dshpy.storage.jsonl.json_prefix import is_json_object_prefix
from dshpy.storage.jsonl.layout import Location, log_path
from dshpy.storage.jsonl.zstd_frames import (
    ZstdFrameError,
    check_torn,
    decompress_frame,
    decompress_prefix,
    scan_frames,
)

__all__ = ["LogReader", "Revision", "Scan", "ScanCache", "revision"]

log = logging.getLogger("dshpy.storage.jsonl")  # the backend's one logger: its name is what users configure

_HEADER_REQUIRED = ("type", "version", "id", "createdAt", "isSeeded", "delegationDepth")
_CACHE_ENTRIES = 8
_READ_CHUNK = 8192

Revision = tuple[int, int, int, int, int]
"""``(dev, ino, size, mtime_ns, ctime_ns)``: changes whenever the file does (dsh's revision)."""


def revision(st: os.stat_result) -> Revision:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


@dataclass(frozen=True, slots=True)
class Scan:
    """One read of a log: the valid events and what a writer must repair before appending.

    ``events`` may be shared with later scans of the same file (a writer extends it in
    place after appending); only ``events[:count]`` belongs to this scan.
    """

    header: SessionHeader
    events: list[SessionEvent]
    count: int
    size: int
    """Bytes of the file this scan covers."""
    truncate_to: int | None = None
    """Start of the torn tail, when there is one."""
    recovered: int = 0
    """How many of the last events came out of a torn zstd frame (re-appended as their own frame)."""
    last_time: int | None = None
    """Time of the last event (a light scan, which builds no events, still knows it)."""
    stored_version: int = FORMAT_VERSION
    """The generation the file holds; below the current one, ``events`` are its in-memory upgrade."""
    records: tuple[dict[str, Any], ...] = ()
    """For an old generation: the upgraded header record and events, in dsh's key order (what an upgrade writes)."""


class _Rows:
    """The event lines of a log, one complete (``\\n``-terminated) line at a time.

    A complete line was written whole, so one that does not parse or decode, or breaks
    seq continuity, is damage, not a torn write: corruption naming its line (and
    ``where``, e.g. its zstd frame). dsh drops such a line and everything after it when
    no ``turn/end`` follows; we refuse, since that loses committed events silently. A
    ``light`` scan (listing) only checks each row's ``type``, ``seq`` and ``time`` and
    keeps no events.
    """

    __slots__ = (
        "_corrupt",
        "cleared",
        "count",
        "events",
        "last_time",
        "light",
        "line",
        "records",
        "version",
        "where",
    )

    def __init__(
        self, corrupt: Callable[[str], CorruptSessionError], *, light: bool, version: int = FORMAT_VERSION
    ) -> None:
        self._corrupt = corrupt
        self.light = light
        self.version = version
        self.events: list[SessionEvent] = []
        self.records: list[dict[str, Any]] = []
        """An old generation's rows, decoded but not converted (the chain converts them all at once)."""
        self.count = 0
        self.last_time: int | None = None
        self.line = 0
        self.where = ""
        self.cleared = False
        """Whether the lines being fed are known to hold no number to refuse (one scan of their whole text)."""

    @property
    def line_number(self) -> int:
        """1-based line number of the current row in the decompressed log (the header is line 1)."""
        return self.line + 1

    def feed(self, line: bytes) -> None:
        """Consume one complete line (without its ``\\n``)."""
        self.line += 1
        try:
            try:
                raw = orjson.loads(line)
            except orjson.JSONDecodeError:
                raw = loads(line)  # JSON.stringify's escaped lone surrogates, or the same error
        except ValueError:
            raise self._corrupt(f"unparsable committed event at line {self.line_number}{self.where}") from None
        if self.version < FORMAT_VERSION:
            self._feed_old(raw)
            return
        try:
            if self.light:
                seq, time = self._light(raw)
            else:  # the parsed row is ours to seal in place (or to wrap, when its numbers are cleared)
                event = decode_stored(raw, line, self.cleared or not unsafe_number_possible(line))
                seq, time = event.seq, event.time
            if seq != self.count:
                raise ValueError(f"seq gap (expected {self.count}, got {seq})")
        except (DshError, ValueError) as error:
            raise self._corrupt(f"invalid committed event at line {self.line_number}{self.where}: {error}") from None
        if not self.light:
            self.events.append(event)
        self.count += 1
        self.last_time = time

    def _feed_old(self, raw: Any) -> None:
        """A row of generation v0–v3: checked as its version's layout and kept for the upgrade."""
        try:
            record = decode_row(raw, self.version, len(self.records))
            time: Any
            if is_packed(record):
                seq, events, time = packed_run_span(record)
            else:
                seq, events, time = record["seq"], row_count(record), record.get("time")
            if seq != self.count:
                raise FormatError(f"seq gap (expected {self.count}, got {seq})")
        except FormatError as error:
            raise self._corrupt(f"invalid committed event at line {self.line_number}{self.where}: {error}") from None
        self.records.append(record)
        self.count += events
        self.last_time = time if type(time) is int else self.last_time

    @staticmethod
    def _light(raw: Any) -> tuple[int, int]:
        if not isinstance(raw, dict) or not isinstance(raw.get("type"), str):
            raise ValueError("an event must be a JSON object with a string type")
        seq, time = raw.get("seq"), raw.get("time")
        if type(seq) is not int or type(time) is not int:
            raise ValueError("seq and time must be integers")
        return seq, time


@dataclass(eq=False)
class ScanCache:
    """The last few scans, keyed by path and guarded by the file's revision."""

    entries: OrderedDict[Path, tuple[Revision, Scan]] = field(default_factory=OrderedDict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def get(self, path: Path, revision: Revision) -> Scan | None:
        with self.lock:
            hit = self.entries.get(path)
            if hit is None or hit[0] != revision:
                return None
            self.entries.move_to_end(path)
            return hit[1]

    def put(self, path: Path, revision: Revision, scan: Scan) -> None:
        with self.lock:
            self.entries[path] = (revision, scan)
            self.entries.move_to_end(path)
            while len(self.entries) > _CACHE_ENTRIES:
                self.entries.popitem(last=False)

    def drop(self, path: Path) -> None:
        with self.lock:
            self.entries.pop(path, None)


def _corruption(session_id: str, location: Location, detail: str) -> CorruptSessionError:
    return CorruptSessionError(f'session "{session_id}": stored log is corrupt: {detail} (raw log: {location.path})')


class LogReader:
    """Reads and checks the logs under ``root`` in one encoding, keeping whole scans in ``cache``.

    It knows the root because a header must name the session whose place it is in.
    """

    def __init__(
        self,
        root: Path,
        cache: ScanCache,
        *,
        compressed: bool,
        children: Callable[[str], list[ChildSource]] | None = None,
    ) -> None:
        self.root = root
        self.cache = cache
        self.compressed = compressed
        self.children = children if children is not None else lambda _session_id: []
        """The catalog evidence of a session's historical subagent children (read when an old parent is upgraded)."""

    def read_header(self, session_id: str, location: Location) -> SessionHeader:
        """Read only the header: the first line, or the first frame when compressed."""
        cached = self.cached_scan(session_id, location)
        if cached is not None:
            return cached.header
        content = b""
        with reading(session_id, location.path), open(location.path, "rb") as file:
            while True:
                chunk = file.read(_READ_CHUNK)
                if not chunk:
                    raise _corruption(session_id, location, "empty or header-less session log")
                content += chunk
                if self.compressed:
                    try:
                        frames = scan_frames(content, max_frames=1).frames
                        if not frames:
                            continue
                        plaintext = decompress_frame(content[frames[0][0] : frames[0][1]])
                    except ZstdFrameError as error:
                        raise _corruption(session_id, location, f"header frame failed validation: {error}") from None
                    return self._parse_header(
                        self._header_frame_line(plaintext, session_id, location), session_id, location
                    )
                newline = content.find(b"\n")
                if newline >= 0:
                    return self._parse_header(content[:newline], session_id, location)

    def cached_scan(self, session_id: str, location: Location) -> Scan | None:
        """The cached scan of the log as it is on disk now (checked by its revision), if there is one."""
        with reading(session_id, location.path):
            stat = os.stat(location.path)
        return self.cache.get(location.path, revision(stat))

    def scan(self, session_id: str, location: Location, *, light: bool = False) -> Scan:
        """Read and scan a whole log (a full scan is cached by the file's revision)."""
        cached = self.cached_scan(session_id, location)
        if cached is not None:
            return cached
        with reading(session_id, location.path), open(location.path, "rb") as file:
            stat = os.fstat(file.fileno())
            data = file.read()
        parse = self._scan_zstd if self.compressed else self._scan_plain
        scan = parse(data, session_id, location, light=light)
        if scan.truncate_to is not None:
            log.info(
                'session "%s": reading without a torn tail of %d bytes at byte %d of %s (never acknowledged; '
                "the next write sets it aside)",
                session_id,
                scan.size - scan.truncate_to,
                scan.truncate_to,
                location.path,
            )
        if (not light or scan.stored_version < FORMAT_VERSION) and len(data) == stat.st_size:
            self.cache.put(location.path, revision(stat), scan)  # an old generation's light scan is its whole upgrade
        return scan

    def scan_bytes(self, data: bytes, session_id: str, location: Location) -> Scan:
        """Scan a whole log given as bytes, without the cache or the path check (a staged file is verified so)."""
        parse = self._scan_zstd if self.compressed else self._scan_plain
        return parse(data, session_id, location, light=False, check_path=False)

    def _parse_header(self, line: bytes, session_id: str, location: Location) -> SessionHeader:
        return self._parse_header_record(line, session_id, location)[0]

    def _parse_header_record(
        self, line: bytes, session_id: str, location: Location, *, check_path: bool = True
    ) -> tuple[SessionHeader, dict[str, Any]]:
        """Check a header record: version first, then shape, then that it names this session and path.

        Returns the header as the current format has it (an old generation's header
        upgraded in memory) and the record as stored.
        """
        try:
            raw = loads(line)
        except ValueError:
            raise _corruption(session_id, location, "header line is not valid JSON") from None
        if not isinstance(raw, dict):
            raise _corruption(session_id, location, "first line is not a JSON object")
        version = raw.get("version")
        if type(version) is not int or version < 0:
            raise _corruption(session_id, location, f"header version {version!r} is not a non-negative integer")
        try:
            DEFAULT_CHAIN.plan(version, session_id)
        except FormatVersionError as error:
            raise FormatVersionError(f"{error} (raw log: {location.path})") from None
        if version < FORMAT_VERSION:
            try:
                decode_header(raw, version)
            except FormatError as error:
                raise _corruption(session_id, location, f"first line is not a session header ({error})") from None
        else:
            missing = [key for key in _HEADER_REQUIRED if key not in raw]
            if missing or raw.get("type") != "session":
                what = f"lacks {missing[0]}" if missing else "is not of type session"
                raise _corruption(session_id, location, f"first line is not a session header (it {what})")
        if version != location.version:
            raise _corruption(
                session_id, location, f"the file name says format v{location.version}, its header v{version}"
            )
        if raw["id"] != session_id:
            raise _corruption(session_id, location, f"its header names session {raw['id']!r}")
        current = migrate_header(raw, session_id, location.path) if version < FORMAT_VERSION else raw
        try:
            header = SessionHeader.from_record(current)
        except (CorruptSessionError, ValueError) as error:
            raise _corruption(session_id, location, str(error)) from None
        expected = log_path(self.root, header.cwd, header.id, location.version, compressed=self.compressed)
        if check_path and location.path != expected and not same_file(location.path, expected):
            raise _corruption(session_id, location, f"its header id and cwd belong at {expected}")
        return header, raw

    @staticmethod
    def _header_frame_line(plaintext: bytes, session_id: str, location: Location) -> bytes:
        if not plaintext.endswith(b"\n") or plaintext.count(b"\n") != 1:
            raise _corruption(session_id, location, "first zstd frame is not exactly one header line")
        return plaintext[:-1]

    def _scan_plain(
        self, data: bytes, session_id: str, location: Location, *, light: bool, check_path: bool = True
    ) -> Scan:
        newline = data.find(b"\n")
        if newline < 0:
            raise _corruption(session_id, location, "empty or header-less session log")
        header, record = self._parse_header_record(data[:newline], session_id, location, check_path=check_path)
        rows = _Rows(lambda detail: _corruption(session_id, location, detail), light=light, version=location.version)
        start = newline + 1
        rows.cleared = not light and not unsafe_number_possible(data)
        while (end := data.find(b"\n", start)) >= 0:
            rows.feed(data[start:end])
            start = end + 1
        if start == len(data):
            scan = Scan(header, rows.events, rows.count, len(data), None, 0, rows.last_time)
            return self._finish(scan, record, rows, location)
        if not is_json_object_prefix(data[start:]):
            raise _corruption(
                session_id,
                location,
                f"unterminated final line {rows.line_number + 1} ({len(data) - start} bytes at byte {start}) "
                "is not the start of an event line, so it is damage, not a torn write",
            )
        scan = Scan(header, rows.events, rows.count, len(data), start, 0, rows.last_time)
        return self._finish(scan, record, rows, location)

    def _scan_zstd(
        self, data: bytes, session_id: str, location: Location, *, light: bool, check_path: bool = True
    ) -> Scan:
        def corrupt(detail: str) -> CorruptSessionError:
            return _corruption(session_id, location, detail)

        try:
            structure = scan_frames(data)
        except ZstdFrameError as error:
            raise corrupt(f"invalid zstd structure: {error}") from None
        if not structure.frames:
            raise corrupt("empty or header-less zstd session log")
        frames = [data[start:end] for start, end in structure.frames]
        try:
            header_plain = decompress_frame(frames[0])
        except ZstdFrameError as error:
            raise corrupt(f"zstd frame 0 (the header, at byte 0) does not decode: {error}") from None
        header, record = self._parse_header_record(
            self._header_frame_line(header_plain, session_id, location), session_id, location, check_path=check_path
        )
        rows = _Rows(corrupt, light=light, version=location.version)
        carry = b""
        for index, (start, _end) in enumerate(structure.frames[1:], start=1):
            try:
                plaintext = carry + decompress_frame(frames[index])
            except ZstdFrameError as error:
                raise corrupt(
                    f"complete zstd frame {index} at byte {start} fails its checksum or does not decode: {error}"
                ) from None
            lines = plaintext.split(b"\n")
            carry = lines.pop()
            rows.where = f" in complete zstd frame {index} at byte {start}"
            rows.cleared = not light and not unsafe_number_possible(plaintext)
            for line in lines:
                rows.feed(line)
        if carry:
            last = len(structure.frames) - 1
            raise corrupt(f"complete zstd frame {last} at byte {structure.frames[-1][0]} ends inside a JSONL record")
        if structure.torn_start is None:
            scan = Scan(header, rows.events, rows.count, len(data), None, 0, rows.last_time)
            return self._finish(scan, record, rows, location)
        torn, torn_start = len(structure.frames), structure.torn_start
        try:
            check_torn(data, torn_start)
        except ZstdFrameError as error:
            raise corrupt(f"zstd frame {torn} at byte {torn_start} is not a torn tail: {error}") from None
        try:
            recovered = decompress_prefix(data[torn_start:])
        except ZstdFrameError as error:
            raise corrupt(
                f"torn zstd frame {torn} at byte {torn_start}: a complete block does not decode: {error}"
            ) from None
        complete = rows.count
        lines = recovered.split(b"\n")
        partial = lines.pop()
        rows.where = f" in torn zstd frame {torn} at byte {torn_start}"
        rows.cleared = not light and not unsafe_number_possible(recovered)
        for line in lines:
            rows.feed(line)
        if partial and not is_json_object_prefix(partial):
            raise corrupt(
                f"torn zstd frame {torn} at byte {torn_start} ends in a record that is not the start of an event line"
            )
        scan = Scan(header, rows.events, rows.count, len(data), torn_start, rows.count - complete, rows.last_time)
        return self._finish(scan, record, rows, location)

    def _finish(self, scan: Scan, record: dict[str, Any], rows: _Rows, location: Location) -> Scan:
        """An old generation's scan becomes its upgrade: the events (and count, last time) of its v4 form."""
        if rows.version >= FORMAT_VERSION:
            return scan
        session_id = scan.header.id
        upgraded = migrate_log(record, rows.records, self.children(session_id), location.path)
        return dataclasses.replace(
            scan,
            header=upgraded.header,
            events=upgraded.events,
            count=len(upgraded.events),
            recovered=0,
            last_time=upgraded.events[-1].time if upgraded.events else None,
            stored_version=rows.version,
            records=upgraded.records,
        )
