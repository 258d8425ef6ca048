"""``jsonl:///dir`` — dsh v4's own on-disk layout, so dsh and dshpy share session roots.

Each session is a directory ``<root>/<project>/<segment>/`` (see
:mod:`dshpy.storage.jsonl.layout`) holding its log ``session.v4.jsonl`` (or
``session.v4.jsonl.zstd``, dsh's default) and a ``session.lock``. The log's first
line is the header record; every further line is one event in its storage form
(``sourceEventSeqs`` range-packed), compact JSON, ``\\n``-terminated. Compressed,
frame 0 holds exactly the header line and every durable batch is one more
checksummed frame.

Durability and crash safety follow dsh (dsh-v4 §2.4, §2.5, §6.2):

* a new log is written to ``<final>.<12 hex>.tmp``, fsynced, published with
  ``link`` (never overwriting) and its directory fsynced;
* a batch is appended and fsynced; a failed write is truncated back off;
* the single writer holds a non-blocking ``flock`` on ``session.lock`` for its
  whole lifetime (readers never lock); the kernel drops it when the process dies;
* a torn tail (bytes of a batch whose flush never returned) is ignored on read; before
  the next append its bytes are moved aside to ``<log>.torn-<UTC time>``, logged, and
  cut off. A cut final zstd frame gives back the complete records it holds, which are
  re-appended as their own frame.

Only a *provably* torn tail is dropped (issue #11): in plain JSONL an unterminated
final line that is the start of a JSON object line; compressed, an incomplete final
frame that no re-reading of one header field makes complete and after which nothing
decodes (:func:`~dshpy.storage.jsonl.zstd_frames.check_torn`). Every complete line must be
the next valid event and every complete frame must decode and verify its checksum.
Anything else is :class:`~dshpy.errors.CorruptSessionError`, naming the line or frame,
and nothing is written. No ``OSError`` leaves the store raw: every one goes through
:func:`~dshpy.storage.os_errors.os_store_error`, so a write the filesystem refuses is
:class:`~dshpy.errors.ReadOnlyStoreError` or, when the disk is full,
:class:`~dshpy.errors.StoreFullError` (the failed batch is cut back off), and a log or
lock it cannot read or open (``EIO``, a symlink loop, a directory in its place)
:class:`~dshpy.errors.StoreUnavailableError`.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import os
import secrets
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from dshpy.core.events import SessionEvent, decode_event, encode_event
from dshpy.core.ids import check_session_id
from dshpy.core.json import dumps, loads
from dshpy.errors import (
    ConflictError,
    CorruptSessionError,
    DshError,
    FormatVersionError,
    SessionBusyError,
    SessionExistsError,
    SessionNotFound,
    StoreError,
)
from dshpy.log.header import FORMAT_VERSION, SessionHeader
from dshpy.log.session import SessionWriter
from dshpy.log.versions import DEFAULT_CHAIN
from dshpy.storage.base import BaseStore, SessionInfo, StoredRecord
from dshpy.storage.file_lock import take_file_lock
from dshpy.storage.jsonl.json_prefix import is_json_object_prefix
from dshpy.storage.jsonl.layout import (
    LOCK_FILENAME,
    decode_segment,
    encode_segment,
    generation_filename,
    parse_generation_filename,
    project_dir_name,
)
from dshpy.storage.jsonl.zstd_frames import (
    ZstdFrameError,
    check_torn,
    compress_frame,
    decompress_frame,
    decompress_prefix,
    scan_frames,
)
from dshpy.storage.os_errors import os_store_error
from dshpy.storage.projection_cache import ProjectionRow
from dshpy.storage.store_url import StoreURL

__all__ = ["COMPRESSIONS", "PROJECTION_CACHE_FILENAME", "JsonlStore"]

log = logging.getLogger("dshpy.storage.jsonl")

COMPRESSIONS = ("zstd", "none")
"""``zstd`` (dsh's default and ours) or ``none`` (plain JSONL)."""

PROJECTION_CACHE_FILENAME = "dshpy.projcache.json"
"""The projection cache sidecar in a session directory (dsh ignores files it does not know there)."""
_PROJECTION_CACHE_FORMAT = "dshpy.projcache"

_HEADER_REQUIRED = ("type", "version", "id", "createdAt", "isSeeded", "delegationDepth")
_CACHE_ENTRIES = 8
_LOCK_ATTEMPTS = 3
_READ_CHUNK = 8192
_TORN_SUFFIX = ".torn-"

Revision = tuple[int, int, int, int, int]
"""``(dev, ino, size, mtime_ns, ctime_ns)``: changes whenever the file does (dsh's revision)."""


_dump_line = orjson.dumps
_NEWLINE = orjson.OPT_APPEND_NEWLINE


def _revision(st: os.stat_result) -> Revision:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


# -- small POSIX helpers --------------------------------------------------------------------


@contextlib.contextmanager
def _file_errors(what: str) -> Iterator[None]:
    """Turn any ``OSError`` into its store error (:func:`~dshpy.storage.os_errors.os_store_error`)."""
    try:
        yield
    except OSError as error:
        raise os_store_error(error, what) from error


@contextlib.contextmanager
def _reading(session_id: str, path: Path) -> Iterator[None]:
    """Reading a session's log: a log gone meanwhile is :class:`SessionNotFound`, any other ``OSError``
    (a symlink loop, a directory in its place, ``EIO``) its store error."""
    try:
        yield
    except FileNotFoundError:
        raise SessionNotFound(f'session "{session_id}" not found') from None
    except OSError as error:
        raise os_store_error(error, f'session "{session_id}": cannot read {path}') from error


def _is_file(entry: os.DirEntry[str]) -> bool:
    """``entry.is_file()``, but an entry the file system cannot resolve (a symlink loop) is not a file."""
    try:
        return entry.is_file()
    except OSError:
        return False


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _make_dir(path: Path) -> None:
    """``mkdir`` with mode 0700, fsyncing the parent when the entry is new."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        if not path.is_dir():
            raise StoreError(f"{path} exists and is not a directory") from None
        return
    _fsync_dir(path.parent)


def _set_aside(path: Path, start: int, end: int) -> Path:
    """Copy bytes ``start:end`` of ``path`` (a torn tail) to a new ``<name>.torn-<UTC time>`` beside it, durably.

    The tail was never acknowledged, but a damaged log can look torn in ways no check
    foresees; keeping its bytes lets a person look before they are gone.
    """
    with open(path, "rb") as source:
        source.seek(start)
        tail = source.read(end - start)
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    aside = path.with_name(f"{path.name}{_TORN_SUFFIX}{stamp}")
    while True:
        try:
            fd = os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            break
        except FileExistsError:
            aside = path.with_name(f"{path.name}{_TORN_SUFFIX}{stamp}-{secrets.token_hex(3)}")
    try:
        _write_all(fd, tail)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(aside)
        raise
    os.close(fd)
    _fsync_dir(path.parent)
    return aside


class _Lock:
    """A held ``flock`` on a session's ``session.lock``; closing the descriptor releases it."""

    __slots__ = ("_fd", "path")

    def __init__(self, fd: int, path: Path) -> None:
        self._fd = fd
        self.path = path

    @classmethod
    def try_acquire(cls, session_dir: Path, busy: str) -> _Lock:
        """Take the lock without waiting; ``SessionBusyError(busy)`` while another descriptor holds it.

        A lock names an inode, so after locking we check the inode is still the file at
        the path (a deleted and recreated lock file would make our lock meaningless).
        """
        path = session_dir / LOCK_FILENAME

        def open_lock() -> int:
            try:
                return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            except FileNotFoundError:
                raise SessionNotFound(f"session directory {session_dir} no longer exists") from None
            except OSError as error:
                raise os_store_error(error, f"cannot take the writer lock {path}") from None

        taken = take_file_lock(
            path,
            open_lock,
            attempts=_LOCK_ATTEMPTS,
            follow_symlinks=True,
            busy=lambda _fd: SessionBusyError(busy),  # dsh's lock file records no holder
            failed=lambda error: os_store_error(error, f"cannot take the writer lock {path}"),
        )
        if taken is None:
            raise SessionBusyError(busy)
        return cls(taken[0], path)

    @property
    def held(self) -> bool:
        return self._fd >= 0

    def release(self) -> None:
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)


# -- reading a log --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Location:
    """A session's directory and the generation file that holds its log."""

    session_dir: Path
    path: Path
    version: int


@dataclass(frozen=True, slots=True)
class _Scan:
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


class _Rows:
    """The event lines of a log, one complete (``\\n``-terminated) line at a time.

    A complete line was written whole, so one that does not parse or decode, or breaks
    seq continuity, is damage, not a torn write: corruption naming its line (and
    ``where``, e.g. its zstd frame). dsh drops such a line and everything after it when
    no ``turn/end`` follows; we refuse, since that loses committed events silently. A
    ``light`` scan (listing) only checks each row's ``type``, ``seq`` and ``time`` and
    keeps no events.
    """

    __slots__ = ("_corrupt", "count", "events", "last_time", "light", "line", "where")

    def __init__(self, corrupt: Callable[[str], CorruptSessionError], *, light: bool) -> None:
        self._corrupt = corrupt
        self.light = light
        self.events: list[SessionEvent] = []
        self.count = 0
        self.last_time: int | None = None
        self.line = 0
        self.where = ""

    @property
    def line_number(self) -> int:
        """1-based line number of the current row in the decompressed log (the header is line 1)."""
        return self.line + 1

    def feed(self, line: bytes) -> None:
        """Consume one complete line (without its ``\\n``)."""
        self.line += 1
        try:
            raw = loads(line)
        except ValueError:
            raise self._corrupt(f"unparsable committed event at line {self.line_number}{self.where}") from None
        try:
            if self.light:
                seq, time = self._light(raw)
            else:
                event = decode_event(raw, parsed=True)  # the parsed row is ours to seal in place
                seq, time = event.seq, event.time
            if seq != self.count:
                raise ValueError(f"seq gap (expected {self.count}, got {seq})")
        except (DshError, ValueError) as error:
            raise self._corrupt(f"invalid committed event at line {self.line_number}{self.where}: {error}") from None
        if not self.light:
            self.events.append(event)
        self.count += 1
        self.last_time = time

    @staticmethod
    def _light(raw: Any) -> tuple[int, int]:
        if not isinstance(raw, dict) or not isinstance(raw.get("type"), str):
            raise ValueError("an event must be a JSON object with a string type")
        seq, time = raw.get("seq"), raw.get("time")
        if type(seq) is not int or type(time) is not int:
            raise ValueError("seq and time must be integers")
        return seq, time


# -- the store ----------------------------------------------------------------------------


@dataclass(eq=False)
class _ScanCache:
    """The last few scans, keyed by path and guarded by the file's revision."""

    entries: OrderedDict[Path, tuple[Revision, _Scan]] = field(default_factory=OrderedDict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def get(self, path: Path, revision: Revision) -> _Scan | None:
        with self.lock:
            hit = self.entries.get(path)
            if hit is None or hit[0] != revision:
                return None
            self.entries.move_to_end(path)
            return hit[1]

    def put(self, path: Path, revision: Revision, scan: _Scan) -> None:
        with self.lock:
            self.entries[path] = (revision, scan)
            self.entries.move_to_end(path)
            while len(self.entries) > _CACHE_ENTRIES:
                self.entries.popitem(last=False)

    def drop(self, path: Path) -> None:
        with self.lock:
            self.entries.pop(path, None)


class JsonlStore(BaseStore):
    """Sessions as dsh v4 JSONL logs under ``root`` (``compression``: ``"zstd"`` or ``"none"``).

    Forks copy the inherited prefix into the child's own log, as dsh does.
    """

    zero_copy_fork = False

    def __init__(self, root: str | os.PathLike[str], *, compression: str = "zstd") -> None:
        if compression not in COMPRESSIONS:
            raise StoreError(f"jsonl compression must be one of {', '.join(COMPRESSIONS)}, not {compression!r}")
        self.root = Path(os.path.abspath(os.fspath(root)))
        if self.root.exists() and not self.root.is_dir():
            raise StoreError(f"jsonl store root {self.root} is not a directory")
        self.compression = compression
        self.url = f"jsonl:///{self.root}?compression={compression}"
        self._compressed = compression == "zstd"
        self._cache = _ScanCache()

    @classmethod
    def from_url(cls, url: StoreURL) -> JsonlStore:
        unknown = sorted(set(url.options) - {"compression"})
        if unknown:
            raise StoreError(f"unknown jsonl store option {unknown[0]!r} in {url.raw!r} (known: compression)")
        return cls(url.location, compression=url.options.get("compression", "zstd"))

    def __repr__(self) -> str:
        return f"<JsonlStore {self.url}>"

    # -- locating sessions --------------------------------------------------------------

    def _project_dirs(self) -> list[Path]:
        try:
            with os.scandir(self.root) as entries:
                return sorted(Path(entry.path) for entry in entries if entry.is_dir(follow_symlinks=False))
        except FileNotFoundError:
            return []
        except OSError as error:
            raise os_store_error(error, f"cannot list the store root {self.root}") from error

    def _resolve_dir(self, session_dir: Path) -> _Location | None:
        """The highest canonical generation of our encoding in ``session_dir``, if any.

        A log of the other encoding means the root belongs to the other mode: refused.
        """
        try:
            names = os.listdir(session_dir)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as error:  # a symlink loop in its place, EIO
            raise os_store_error(error, f"cannot list session directory {session_dir}") from error
        best: tuple[int, str] | None = None
        for name in names:
            version = parse_generation_filename(name, compressed=self._compressed)
            if version is not None:
                if best is None or version > best[0]:
                    best = (version, name)
            elif parse_generation_filename(name, compressed=not self._compressed) is not None:
                raise self._encoding_mismatch(session_dir / name)
        if best is None:
            return None
        return _Location(session_dir, session_dir / best[1], best[0])

    def _encoding_mismatch(self, path: Path) -> StoreError:
        other = "none" if self._compressed else "zstd"
        suffix = ".jsonl" if self._compressed else ".jsonl.zstd"
        return StoreError(
            f'session log "{path}" uses {suffix}, but this store is configured for compression '
            f'"{self.compression}"; open the root with ?compression={other} (one root holds one encoding)'
        )

    def _find(self, session_id: str) -> _Location | None:
        segment = encode_segment(check_session_id(session_id))
        matches = [loc for project in self._project_dirs() if (loc := self._resolve_dir(project / segment))]
        if len(matches) > 1:
            places = ", ".join(str(loc.session_dir) for loc in matches)
            raise CorruptSessionError(
                f'duplicate JSONL session id "{session_id}" appears in multiple project directories: {places}'
            )
        return matches[0] if matches else None

    def _locate(self, session_id: str) -> _Location:
        location = self._find(session_id)
        if location is None:
            raise SessionNotFound(f'session "{session_id}" not found')
        return location

    def _scan_root(self) -> list[tuple[str, _Location]]:
        """Every session directory ``<root>/*/*/`` that holds a log of our encoding."""
        found: list[tuple[str, _Location]] = []
        seen: dict[str, _Location] = {}
        for project in self._project_dirs():
            with _file_errors(f"cannot list project directory {project}"), os.scandir(project) as entries:
                children = sorted(entries, key=lambda entry: entry.name)
            for entry in children:
                if _is_file(entry) and (entry.name.endswith(".jsonl") or entry.name.endswith(".jsonl.zstd")):
                    raise StoreError(
                        f'session artifact "{entry.path}" uses the unsupported flat-file layout; move it into '
                        "a <project>/<session>/ directory or use a separate root"
                    )
                if not entry.is_dir(follow_symlinks=False):
                    continue
                session_id = decode_segment(entry.name)
                location = self._resolve_dir(Path(entry.path))
                if location is None:
                    continue
                if session_id is None or not _is_session_id(session_id):
                    log.warning("skipping %s: its name is not a session id dshpy accepts", entry.path)
                    continue
                if session_id in seen:
                    raise CorruptSessionError(
                        f'duplicate JSONL session id "{session_id}" appears in multiple project directories: '
                        f"{seen[session_id].session_dir}, {location.session_dir}"
                    )
                seen[session_id] = location
                found.append((session_id, location))
        return found

    # -- reading logs -------------------------------------------------------------------

    def _corruption(self, session_id: str, location: _Location, detail: str) -> CorruptSessionError:
        return CorruptSessionError(
            f'session "{session_id}": stored log is corrupt: {detail} (raw log: {location.path})'
        )

    def _parse_header(self, line: bytes, session_id: str, location: _Location) -> SessionHeader:
        """Check a header record: version first, then shape, then that it names this session and path."""
        try:
            raw = loads(line)
        except ValueError:
            raise self._corruption(session_id, location, "header line is not valid JSON") from None
        if not isinstance(raw, dict):
            raise self._corruption(session_id, location, "first line is not a JSON object")
        version = raw.get("version")
        if type(version) is not int or version < 0:
            raise self._corruption(session_id, location, f"header version {version!r} is not a non-negative integer")
        try:
            DEFAULT_CHAIN.plan(version, session_id)
        except FormatVersionError as error:
            raise FormatVersionError(f"{error} (raw log: {location.path})") from None
        missing = [key for key in _HEADER_REQUIRED if key not in raw]
        if missing or raw.get("type") != "session":
            what = f"lacks {missing[0]}" if missing else "is not of type session"
            raise self._corruption(session_id, location, f"first line is not a session header (it {what})")
        if version != location.version:
            raise self._corruption(
                session_id, location, f"the file name says format v{location.version}, its header v{version}"
            )
        if raw["id"] != session_id:
            raise self._corruption(session_id, location, f"its header names session {raw['id']!r}")
        try:
            header = SessionHeader.from_record(raw)
        except (CorruptSessionError, ValueError) as error:
            raise self._corruption(session_id, location, str(error)) from None
        expected = self._log_path(header, location.version)
        if location.path != expected and not _same_file(location.path, expected):
            raise self._corruption(session_id, location, f"its header id and cwd belong at {expected}")
        return header

    def _log_path(self, header: SessionHeader, version: int = FORMAT_VERSION) -> Path:
        return (
            self.root
            / project_dir_name(header.cwd)
            / encode_segment(check_session_id(header.id))
            / generation_filename(version, compressed=self._compressed)
        )

    def _read_header(self, session_id: str, location: _Location) -> SessionHeader:
        """Read only the header: the first line, or the first frame when compressed."""
        cached = self._cached_scan(session_id, location)
        if cached is not None:
            return cached.header
        content = b""
        with _reading(session_id, location.path), open(location.path, "rb") as file:
            while True:
                chunk = file.read(_READ_CHUNK)
                if not chunk:
                    raise self._corruption(session_id, location, "empty or header-less session log")
                content += chunk
                if self._compressed:
                    try:
                        frames = scan_frames(content, max_frames=1).frames
                        if not frames:
                            continue
                        plaintext = decompress_frame(content[frames[0][0] : frames[0][1]])
                    except ZstdFrameError as error:
                        raise self._corruption(
                            session_id, location, f"header frame failed validation: {error}"
                        ) from None
                    return self._parse_header(
                        self._header_frame_line(plaintext, session_id, location), session_id, location
                    )
                newline = content.find(b"\n")
                if newline >= 0:
                    return self._parse_header(content[:newline], session_id, location)

    def _header_frame_line(self, plaintext: bytes, session_id: str, location: _Location) -> bytes:
        if not plaintext.endswith(b"\n") or plaintext.count(b"\n") != 1:
            raise self._corruption(session_id, location, "first zstd frame is not exactly one header line")
        return plaintext[:-1]

    def _cached_scan(self, session_id: str, location: _Location) -> _Scan | None:
        """The cached scan of the log as it is on disk now (checked by its revision), if there is one."""
        with _reading(session_id, location.path):
            stat = os.stat(location.path)
        return self._cache.get(location.path, _revision(stat))

    def _scan(self, session_id: str, location: _Location | None = None, *, light: bool = False) -> _Scan:
        """Read and scan a whole log (a full scan is cached by the file's revision)."""
        location = location or self._locate(session_id)
        cached = self._cached_scan(session_id, location)
        if cached is not None:
            return cached
        with _reading(session_id, location.path), open(location.path, "rb") as file:
            stat = os.fstat(file.fileno())
            data = file.read()
        parse = self._scan_zstd if self._compressed else self._scan_plain
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
        if not light and len(data) == stat.st_size:
            self._cache.put(location.path, _revision(stat), scan)
        return scan

    def _scan_plain(self, data: bytes, session_id: str, location: _Location, *, light: bool) -> _Scan:
        newline = data.find(b"\n")
        if newline < 0:
            raise self._corruption(session_id, location, "empty or header-less session log")
        header = self._parse_header(data[:newline], session_id, location)
        rows = _Rows(lambda detail: self._corruption(session_id, location, detail), light=light)
        start = newline + 1
        while (end := data.find(b"\n", start)) >= 0:
            rows.feed(data[start:end])
            start = end + 1
        if start == len(data):
            return _Scan(header, rows.events, rows.count, len(data), None, 0, rows.last_time)
        if not is_json_object_prefix(data[start:]):
            raise self._corruption(
                session_id,
                location,
                f"unterminated final line {rows.line_number + 1} ({len(data) - start} bytes at byte {start}) "
                "is not the start of an event line, so it is damage, not a torn write",
            )
        return _Scan(header, rows.events, rows.count, len(data), start, 0, rows.last_time)

    def _scan_zstd(self, data: bytes, session_id: str, location: _Location, *, light: bool) -> _Scan:
        def corrupt(detail: str) -> CorruptSessionError:
            return self._corruption(session_id, location, detail)

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
        header = self._parse_header(self._header_frame_line(header_plain, session_id, location), session_id, location)
        rows = _Rows(corrupt, light=light)
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
            for line in lines:
                rows.feed(line)
        if carry:
            last = len(structure.frames) - 1
            raise corrupt(f"complete zstd frame {last} at byte {structure.frames[-1][0]} ends inside a JSONL record")
        if structure.torn_start is None:
            return _Scan(header, rows.events, rows.count, len(data), None, 0, rows.last_time)
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
        for line in lines:
            rows.feed(line)
        if partial and not is_json_object_prefix(partial):
            raise corrupt(
                f"torn zstd frame {torn} at byte {torn_start} ends in a record that is not the start of an event line"
            )
        return _Scan(header, rows.events, rows.count, len(data), torn_start, rows.count - complete, rows.last_time)

    # -- writing logs -------------------------------------------------------------------

    def _encode_batch(self, events: Sequence[SessionEvent]) -> bytes:
        """Storage lines (what :func:`encode_event` gives, each with its newline), framed when compressed."""
        try:
            lines = b"".join([_dump_line(event.to_wire(seq_ranges=True), option=_NEWLINE) for event in events])
        except TypeError:  # a lone surrogate: the escaping encoder writes the batch (see dshpy.core.json)
            lines = b"".join([encode_event(event) + b"\n" for event in events])
        return compress_frame(lines) if self._compressed else lines

    def _encode_new(self, header: SessionHeader, events: Sequence[SessionEvent]) -> bytes:
        line = dumps(header.to_record()) + b"\n"
        head = compress_frame(line) if self._compressed else line
        return head + self._encode_batch(events) if events else head

    def _append_batch(
        self, session_id: str, location: _Location, scan: _Scan, events: Sequence[SessionEvent], fd: int
    ) -> _Scan:
        """Repair a torn tail if there is one, then append ``events`` as one batch and fsync.

        The caller holds the session's lock, has checked ``scan`` is the file's state, and
        passes its ``O_APPEND`` descriptor of the log. One ``fstat`` checks the file is
        still the log at ``location`` (not unlinked or renamed over: its link count) and
        was not written by anyone else (its size). On any failure the file is truncated
        back to where this batch began.
        """
        payload = self._encode_batch(events)
        if scan.recovered:
            payload = self._encode_batch(scan.events[scan.count - scan.recovered : scan.count]) + payload
        current = os.fstat(fd)
        if current.st_nlink == 0:
            if not location.path.exists():
                raise SessionNotFound(f'session "{session_id}" was deleted')
            raise ConflictError(
                f'session "{session_id}" was replaced on disk while its lock was held ({location.path} is '
                "another file now); reopen it",
                expected_seq=scan.count,
            )
        before = current.st_size
        if before != scan.size:
            raise ConflictError(
                f'session "{session_id}" changed on disk while its lock was held (another program wrote '
                f"{location.path}); reopen it",
                expected_seq=scan.count,
            )
        if scan.truncate_to is not None:
            with _file_errors(f'session "{session_id}": cannot set its torn tail aside'):
                aside = _set_aside(location.path, scan.truncate_to, scan.size)
                os.ftruncate(fd, scan.truncate_to)
                os.fsync(fd)
            before = scan.truncate_to
            log.warning(
                'session "%s" recovered from a torn tail: %d bytes that were never acknowledged were moved to %s '
                "and cut from %s%s",
                session_id,
                scan.size - scan.truncate_to,
                aside,
                location.path,
                f"; the {scan.recovered} complete events they held are appended again" if scan.recovered else "",
            )
        try:
            _write_all(fd, payload)
            os.fsync(fd)
        except BaseException as failure:
            try:
                os.ftruncate(fd, before)
                os.fsync(fd)
            except OSError as rollback:
                raise StoreError(
                    f'session "{session_id}": append failed ({failure}) and rolling it back failed too '
                    f"({rollback}); {location.path} may end in a torn batch, which the next open discards"
                ) from failure
            if isinstance(failure, OSError):
                raise os_store_error(failure, f'session "{session_id}": append failed') from failure
            raise
        stat = os.fstat(fd)
        shared = scan.events
        if len(shared) != scan.count:
            shared = shared[: scan.count]
        shared.extend(events)  # readers of older scans only look at their own events[:count]
        after = _Scan(scan.header, shared, scan.count + len(events), stat.st_size, None, 0, events[-1].time)
        self._cache.put(location.path, _revision(stat), after)
        return after

    def _materialize(self, record: StoredRecord, *, keep_lock: bool) -> _JsonlWriter | None:
        """Create a session's log; a write the filesystem refuses is a store error, not an ``OSError``."""
        header = record.header
        session_id = check_session_id(header.id)
        if record.base is not None:
            raise StoreError("the jsonl store copies fork prefixes; it cannot store a shared-prefix record")
        if self._find(session_id) is not None:
            raise SessionExistsError(f'session "{session_id}" already exists')
        with _file_errors(f'cannot create session "{session_id}"'):
            return self._publish(record, session_id, keep_lock=keep_lock)

    def _publish(self, record: StoredRecord, session_id: str, *, keep_lock: bool) -> _JsonlWriter | None:
        """Publish a new log (header + first batch) without clobbering, under the session's lock."""
        header = record.header
        final = self._log_path(header)
        session_dir = final.parent
        if not self.root.is_dir():
            os.makedirs(self.root, 0o700, exist_ok=True)
            _fsync_dir(self.root.parent)
        _make_dir(session_dir.parent)
        _make_dir(session_dir)
        lock = _Lock.try_acquire(session_dir, f'session "{session_id}" already exists (its writer holds the lock)')
        try:
            if self._resolve_dir(session_dir) is not None:
                raise SessionExistsError(f'session "{session_id}" already exists')
            content = self._encode_new(header, record.events)
            temporary = session_dir / f"{final.name}.{secrets.token_hex(6)}.tmp"
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            try:
                try:
                    _write_all(fd, content)
                    os.fsync(fd)
                finally:
                    os.close(fd)
                os.link(temporary, final)
            except FileExistsError:
                raise SessionExistsError(f'session "{session_id}" already exists') from None
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(temporary)
            _fsync_dir(session_dir)
            published = os.stat(final)
        except BaseException:
            lock.release()
            raise
        events = list(record.events)
        scan = _Scan(header, events, len(events), len(content), None, 0, events[-1].time if events else None)
        self._cache.put(final, _revision(published), scan)  # what we just wrote need not be parsed again
        if not keep_lock:
            lock.release()
            return None
        return _JsonlWriter(self, session_id, _Location(session_dir, final, FORMAT_VERSION), lock, scan)

    # -- BaseStore primitives -----------------------------------------------------------

    def _insert(self, record: StoredRecord) -> None:
        self._materialize(record, keep_lock=False)

    def _insert_writer(self, record: StoredRecord) -> SessionWriter:
        writer = self._materialize(record, keep_lock=True)
        assert writer is not None
        return writer

    def _writer(self, session_id: str) -> SessionWriter:
        return self._open_writer(session_id)

    def _open_writer(self, session_id: str) -> _JsonlWriter:
        location = self._locate(session_id)
        lock = _Lock.try_acquire(
            location.session_dir,
            f'session "{session_id}" is already owned by an active writer '
            f"(lock held on {location.session_dir / LOCK_FILENAME})",
        )
        return _JsonlWriter(self, session_id, location, lock)

    def _header(self, session_id: str) -> SessionHeader:
        return self._read_header(session_id, self._locate(session_id))

    def _base(self, session_id: str) -> tuple[str, int] | None:
        return None

    def _own_events(self, session_id: str, from_seq: int) -> Iterator[SessionEvent]:
        scan = self._scan(session_id)
        events = scan.events
        for seq in range(from_seq, scan.count):
            yield events[seq]

    def _length(self, session_id: str) -> int:
        return self._scan(session_id).count

    def _append(self, session_id: str, expected_seq: int, events: Sequence[SessionEvent]) -> None:
        writer = self._open_writer(session_id)
        try:
            writer.write(session_id, expected_seq, events)
        finally:
            writer.close()

    def _remove(self, session_id: str) -> None:
        location = self._locate(session_id)
        lock = _Lock.try_acquire(
            location.session_dir, f'session "{session_id}" cannot be deleted while a writer holds it'
        )
        try:
            with _file_errors(f'cannot delete session "{session_id}"'):
                self._remove_files(location, lock)
        finally:
            lock.release()

    def _remove_files(self, location: _Location, lock: _Lock) -> None:
        """Unlink the session's files (its logs, torn tails set aside, temporaries, cache), then the directory."""
        for name in os.listdir(location.session_dir):
            if (
                parse_generation_filename(name, compressed=True) is not None
                or parse_generation_filename(name, compressed=False) is not None
                or (name.startswith("session") and _TORN_SUFFIX in name)
                or name.endswith(".tmp")
                or name == PROJECTION_CACHE_FILENAME
            ):
                os.unlink(location.session_dir / name)
        _fsync_dir(location.session_dir)  # the session is gone once no log remains
        self._cache.drop(location.path)
        os.unlink(lock.path)
        # A file someone else put there keeps the directory; without a log it is no session.
        with contextlib.suppress(OSError):
            os.rmdir(location.session_dir)
        _fsync_dir(location.session_dir.parent)

    def _ids(self) -> list[str]:
        return [session_id for session_id, _ in self._scan_root()]

    def _children(self, session_id: str) -> list[str]:
        return []

    # -- projection cache ---------------------------------------------------------------
    #
    # One sidecar per session directory, dshpy.projcache.json: {"format", "version", "identity", "rows": {key:
    # {stateVersion, seq, state}}}, replaced whole: the old one unlinked, a temporary file renamed into its place
    # (never torn; not fsynced: after a crash it may be missing or empty, and a missing or unreadable sidecar is no
    # cache). It is written without the session lock: every row it can hold is valid for the log it names, so a
    # lost update costs a re-fold only.

    @staticmethod
    def _read_sidecar(session_dir: Path) -> tuple[str, dict[str, ProjectionRow]] | None:
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

    def _load_projection_rows(self, session_id: str) -> list[ProjectionRow]:
        location = self._find(session_id)
        sidecar = None if location is None else self._read_sidecar(location.session_dir)
        return [] if sidecar is None else list(sidecar[1].values())

    def _save_projection_rows(self, session_id: str, rows: Sequence[ProjectionRow]) -> None:
        location = self._find(session_id)
        if location is None or not rows:
            return
        identity = rows[-1].identity
        existing = self._read_sidecar(location.session_dir)
        merged: dict[str, ProjectionRow] = {}
        if existing is not None and existing[0] == identity:
            merged.update(existing[1])
        merged.update((row.key, row) for row in rows if row.identity == identity)
        document = {
            "format": _PROJECTION_CACHE_FORMAT,
            "version": 1,
            "identity": identity,
            "rows": {
                key: {"stateVersion": row.state_version, "seq": row.seq, "state": row.state}
                for key, row in merged.items()
            },
        }
        final = location.session_dir / PROJECTION_CACHE_FILENAME
        temporary = location.session_dir / f"{PROJECTION_CACHE_FILENAME}.{secrets.token_hex(6)}.tmp"
        try:
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        except FileNotFoundError:
            return  # the session directory is gone: deleted meanwhile
        try:
            try:
                _write_all(fd, dumps(document))
            finally:
                os.close(fd)
            if self._resolve_dir(location.session_dir) is None:
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

    def _list_projection_rows(self, keys: Sequence[str]) -> dict[str, dict[str, ProjectionRow]]:
        wanted = frozenset(keys)
        found: dict[str, dict[str, ProjectionRow]] = {}
        for session_id, location in self._scan_root():
            sidecar = self._read_sidecar(location.session_dir)
            if sidecar is not None:
                found[session_id] = {key: row for key, row in sidecar[1].items() if key in wanted}
        return found

    # -- listing ------------------------------------------------------------------------

    def _readable_headers(self) -> list[tuple[str, _Location, SessionHeader]]:
        """Headers of every listed session; unreadable ones are skipped with a warning, as dsh does."""
        headers: list[tuple[str, _Location, SessionHeader]] = []
        for session_id, location in self._scan_root():
            try:
                headers.append((session_id, location, self._read_header(session_id, location)))
            except (CorruptSessionError, FormatVersionError) as error:
                log.warning("not listing session %s: %s", session_id, error)
        return headers

    def _forks_of(self, session_id: str) -> list[str]:
        return sorted(sid for sid, _, header in self._readable_headers() if header.parent_session == session_id)

    def list(self) -> list[SessionInfo]:
        """Every readable session, newest activity first (headers plus a cheap event count)."""
        headers = self._readable_headers()
        forks: dict[str, list[str]] = {}
        for session_id, _, header in headers:
            if header.parent_session is not None:
                forks.setdefault(header.parent_session, []).append(session_id)
        infos: list[SessionInfo] = []
        for session_id, location, header in headers:
            try:
                scan = self._scan(session_id, location, light=True)
            except (CorruptSessionError, FormatVersionError) as error:
                log.warning("not listing session %s: %s", session_id, error)
                continue
            updated = header.created_at if scan.last_time is None else max(header.created_at, scan.last_time)
            infos.append(SessionInfo(session_id, header, scan.count, updated, tuple(sorted(forks.get(session_id, ())))))
        infos.sort(key=lambda info: (info.updated_at, info.id), reverse=True)
        return infos


class _JsonlWriter:
    """The single writer of one session: holds its lock and appends conditional batches."""

    def __init__(
        self, store: JsonlStore, session_id: str, location: _Location, lock: _Lock, scan: _Scan | None = None
    ) -> None:
        self._store = store
        self._session_id = session_id
        self._location = location
        self._lock = lock
        self._scan = scan
        self._mutex = threading.Lock()
        self._fd: int | None = None
        """The log opened for appending, from the first batch until :meth:`close` (the lock is held all along)."""

    def write(self, session_id: str, expected_seq: int, events: Sequence[SessionEvent]) -> None:
        if session_id != self._session_id:
            raise StoreError(f'this writer belongs to session "{self._session_id}", not "{session_id}"')
        if not events:
            return
        with self._mutex:
            if not self._lock.held:
                raise StoreError(f'session "{session_id}": the writer was closed')
            scan = self._current()
            if scan.count != expected_seq:
                raise ConflictError(
                    f'session "{session_id}" ends at seq {scan.count}, not {expected_seq}',
                    expected_seq=expected_seq,
                    actual_seq=scan.count,
                )
            fd = self._fd
            if fd is None:
                try:
                    fd = self._fd = os.open(self._location.path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
                except FileNotFoundError:
                    raise SessionNotFound(f'session "{session_id}" was deleted') from None
                except OSError as error:  # e.g. a log file another user owns, in a directory we may write
                    raise os_store_error(error, f'session "{session_id}": cannot open its log for appending') from None
            self._scan = self._store._append_batch(session_id, self._location, scan, events, fd)

    def _current(self) -> _Scan:
        """The file's state: what this writer last wrote (scanned once, when it has not written yet).

        Not re-checked here: the append itself checks the open log's link count and size
        against this scan, so a deleted, replaced or foreign-written log still fails the batch.
        """
        scan = self._scan
        return scan if scan is not None else self._store._scan(self._session_id, self._location)

    def close(self) -> None:
        with self._mutex:
            self._close_fd()
            self._lock.release()

    def _close_fd(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def __del__(self) -> None:  # a dropped, unclosed session must not keep its session locked
        with contextlib.suppress(Exception):  # interpreter shutdown may have torn down os already
            self._close_fd()
            self._lock.release()


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _is_session_id(value: str) -> bool:
    try:
        check_session_id(value)
    except DshError:
        return False
    return True
