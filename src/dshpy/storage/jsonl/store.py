"""The JSONL store: sessions under a root, each in its dsh v4 session directory.

It finds sessions by their place in the layout (:mod:`~dshpy.storage.jsonl.layout`),
reads them through a :class:`~dshpy.storage.jsonl.scan.LogReader`, writes through a
:class:`~dshpy.storage.jsonl.writer.JsonlWriter` holding the session's
:class:`~dshpy.storage.jsonl.locking.SessionLock`, and keeps projection rows in a
sidecar (:mod:`~dshpy.storage.jsonl.sidecar`). The format itself is described in
:mod:`dshpy.storage.jsonl`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import secrets
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

from dshpy.core.events import SessionEvent
from dshpy.core.ids import check_session_id
from dshpy.errors import (
    CorruptSessionError,
    DshError,
    FormatVersionError,
    SessionExistsError,
    SessionNotFound,
    StoreError,
)
from dshpy.log.formats import ChildSource
from dshpy.log.header import FORMAT_VERSION, SessionHeader
from dshpy.log.session import SessionWriter
from dshpy.storage.backend import BulkListing, OwnWriters, ProjectionCache, SearchIndex
from dshpy.storage.base import BaseStore
from dshpy.storage.jsonl.files import file_errors, fsync_dir, is_file, make_dir, write_all
from dshpy.storage.jsonl.generations import child_evidence
from dshpy.storage.jsonl.layout import (
    LOCK_FILENAME,
    TORN_SUFFIX,
    Location,
    decode_segment,
    generation_filename,
    log_path,
    parse_generation_filename,
    session_segment,
)
from dshpy.storage.jsonl.locking import SessionLock
from dshpy.storage.jsonl.scan import LogReader, Scan, ScanCache, revision
from dshpy.storage.jsonl.search_sidecar import SearchSidecar
from dshpy.storage.jsonl.sidecar import PROJECTION_CACHE_FILENAME, read_sidecar, save_sidecar
from dshpy.storage.jsonl.upgrade import UpgradeReport, publish_upgrade
from dshpy.storage.jsonl.writer import JsonlWriter, encode_new
from dshpy.storage.os_errors import os_store_error
from dshpy.storage.projection_cache import ProjectionRow
from dshpy.storage.records import SessionInfo, StoredRecord
from dshpy.storage.search_records import SearchIndexStatus, TextHits, TextQuery
from dshpy.storage.search_scan import scan_search
from dshpy.storage.store_url import StoreURL

__all__ = ["COMPRESSIONS", "JsonlStore"]

log = logging.getLogger("dshpy.storage.jsonl")  # the backend's one logger: its name is what users configure

COMPRESSIONS = ("zstd", "none")
"""``zstd`` (dsh's default and ours) or ``none`` (plain JSONL)."""


class JsonlStore(BaseStore, BulkListing, ProjectionCache, SearchIndex, OwnWriters):
    """Sessions as dsh v4 JSONL logs under ``root`` (``compression``: ``"zstd"`` or ``"none"``).

    Forks copy the inherited prefix into the child's own log, as dsh does. Full-text
    search is answered by a derived index under the root
    (:mod:`~dshpy.storage.jsonl.search_sidecar`), caught up before each search.
    """

    def __init__(self, root: str | os.PathLike[str], *, compression: str = "zstd") -> None:
        if compression not in COMPRESSIONS:
            raise StoreError(f"jsonl compression must be one of {', '.join(COMPRESSIONS)}, not {compression!r}")
        self.root = Path(os.path.abspath(os.fspath(root)))
        if self.root.exists() and not self.root.is_dir():
            raise StoreError(f"jsonl store root {self.root} is not a directory")
        self.compression = compression
        self.url = f"jsonl:///{self.root}?compression={compression}"
        self._compressed = compression == "zstd"
        self._cache = ScanCache()
        self._reader = LogReader(self.root, self._cache, compressed=self._compressed, children=self._children_of)
        self._search = SearchSidecar(self.root, self._log_revisions, self._whole_log)
        self._listing = threading.local()
        """While a listing runs in this thread: ``children``, the subagent sessions of each parent it found."""

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

    def _resolve_dir(self, session_dir: Path) -> Location | None:
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
        return Location(session_dir, session_dir / best[1], best[0])

    def _encoding_mismatch(self, path: Path) -> StoreError:
        other = "none" if self._compressed else "zstd"
        suffix = ".jsonl" if self._compressed else ".jsonl.zstd"
        return StoreError(
            f'session log "{path}" uses {suffix}, but this store is configured for compression '
            f'"{self.compression}"; open the root with ?compression={other} (one root holds one encoding)'
        )

    def _find(self, session_id: str) -> Location | None:
        segment = session_segment(session_id)
        matches = [loc for project in self._project_dirs() if (loc := self._resolve_dir(project / segment))]
        if len(matches) > 1:
            places = ", ".join(str(loc.session_dir) for loc in matches)
            raise CorruptSessionError(
                f'duplicate JSONL session id "{session_id}" appears in multiple project directories: {places}'
            )
        return matches[0] if matches else None

    def _locate(self, session_id: str) -> Location:
        location = self._find(session_id)
        if location is None:
            raise SessionNotFound(f'session "{session_id}" not found')
        return location

    def _scan_root(self) -> list[tuple[str, Location]]:
        """Every session directory ``<root>/*/*/`` that holds a log of our encoding."""
        found: list[tuple[str, Location]] = []
        seen: dict[str, Location] = {}
        for project in self._project_dirs():
            with file_errors(f"cannot list project directory {project}"), os.scandir(project) as entries:
                children = sorted(entries, key=lambda entry: entry.name)
            for entry in children:
                if is_file(entry) and (entry.name.endswith(".jsonl") or entry.name.endswith(".jsonl.zstd")):
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

    def _children_of(self, session_id: str) -> list[ChildSource]:
        """Catalog evidence of the subagent sessions naming ``session_id`` as parent (for an old parent's upgrade).

        A child whose header cannot be read is not a child we know of (dsh's listing
        skips it too); one whose log cannot be read is kept with mode "unknown".
        """
        found: list[ChildSource] = []
        listing = getattr(self._listing, "children", None)
        candidates = listing.get(session_id, []) if listing is not None else self._subagents_of(session_id)
        for child_id, location, header in candidates:
            try:
                events: list[SessionEvent] | None = self._reader.scan(child_id, location).events
            except (CorruptSessionError, FormatVersionError) as error:
                found.append(child_evidence(child_id, header, None, f"{error}"))
                continue
            found.append(child_evidence(child_id, header, events, None))
        return found

    def _subagents_of(self, session_id: str) -> list[tuple[str, Location, SessionHeader]]:
        """The subagent sessions naming ``session_id`` as parent, found by reading every header of the root."""
        found = []
        for child_id, location in self._scan_root():
            if child_id == session_id:
                continue
            try:
                header = self._reader.read_header(child_id, location)
            except (CorruptSessionError, FormatVersionError):
                continue
            if header.origin == "subagent" and header.parent_session == session_id:
                found.append((child_id, location, header))
        return found

    # -- creating sessions --------------------------------------------------------------

    def _materialize(self, record: StoredRecord, *, keep_lock: bool) -> JsonlWriter | None:
        """Create a session's log; a write the filesystem refuses is a store error, not an ``OSError``."""
        header = record.header
        session_id = check_session_id(header.id)
        if record.base is not None:
            raise StoreError("the jsonl store copies fork prefixes; it cannot store a shared-prefix record")
        if self._find(session_id) is not None:
            raise SessionExistsError(f'session "{session_id}" already exists')
        with file_errors(f'cannot create session "{session_id}"'):
            return self._publish(record, session_id, keep_lock=keep_lock)

    def _publish(self, record: StoredRecord, session_id: str, *, keep_lock: bool) -> JsonlWriter | None:
        """Publish a new log (header + first batch) without clobbering, under the session's lock."""
        header = record.header
        final = log_path(self.root, header.cwd, header.id, FORMAT_VERSION, compressed=self._compressed)
        session_dir = final.parent
        if not self.root.is_dir():
            os.makedirs(self.root, 0o700, exist_ok=True)
            fsync_dir(self.root.parent)
        make_dir(session_dir.parent)
        make_dir(session_dir)
        lock = SessionLock.try_acquire(
            session_dir, f'session "{session_id}" already exists (its writer holds the lock)'
        )
        try:
            if self._resolve_dir(session_dir) is not None:
                raise SessionExistsError(f'session "{session_id}" already exists')
            content = encode_new(header, record.events, compressed=self._compressed)
            temporary = session_dir / f"{final.name}.{secrets.token_hex(6)}.tmp"
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
            try:
                try:
                    write_all(fd, content)
                    os.fsync(fd)
                finally:
                    os.close(fd)
                os.link(temporary, final)
            except FileExistsError:
                raise SessionExistsError(f'session "{session_id}" already exists') from None
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(temporary)
            fsync_dir(session_dir)
            published = os.stat(final)
        except BaseException:
            lock.release()
            raise
        events = list(record.events)
        scan = Scan(header, events, len(events), len(content), None, 0, events[-1].time if events else None)
        self._cache.put(final, revision(published), scan)  # what we just wrote need not be parsed again
        if not keep_lock:
            lock.release()
            return None
        return JsonlWriter(self._reader, session_id, Location(session_dir, final, FORMAT_VERSION), lock, scan)

    # -- BaseStore primitives -----------------------------------------------------------

    def _insert(self, record: StoredRecord) -> None:
        self._materialize(record, keep_lock=False)

    def _insert_writer(self, record: StoredRecord) -> SessionWriter:
        writer = self._materialize(record, keep_lock=True)
        assert writer is not None
        return writer

    def _writer(self, session_id: str) -> SessionWriter:
        return self._open_writer(session_id)

    def _open_writer(self, session_id: str) -> JsonlWriter:
        """The session's writer; an old generation is upgraded on disk first, and the writer continues the v4 file."""
        location = self._locate(session_id)
        lock = self._writer_lock(session_id, location)
        scan = None
        if location.version < FORMAT_VERSION:
            try:
                location, scan = self._publish_upgrade(session_id, location)
            except BaseException:
                lock.release()
                raise
        return JsonlWriter(self._reader, session_id, location, lock, scan)

    @staticmethod
    def _writer_lock(session_id: str, location: Location) -> SessionLock:
        return SessionLock.try_acquire(
            location.session_dir,
            f'session "{session_id}" is already owned by an active writer '
            f"(lock held on {location.session_dir / LOCK_FILENAME})",
        )

    def _publish_upgrade(self, session_id: str, location: Location) -> tuple[Location, Scan]:
        """Under the session's lock: store the in-memory upgrade of its old generation as ``session.v4``."""
        with file_errors(f'session "{session_id}": cannot read {location.path}'):
            source = revision(os.stat(location.path))
        scan = self._reader.scan(session_id, location)
        current, fresh = publish_upgrade(self._reader, session_id, location, scan, source)
        log.info(
            'session "%s": stored its v%d generation upgraded to v%d as %s (the old file is kept)',
            session_id,
            location.version,
            FORMAT_VERSION,
            current.path,
        )
        return current, fresh

    # -- upgrading old generations ---------------------------------------------------

    def upgrade(self, session_id: str, *, dry_run: bool = False) -> UpgradeReport:
        """Store an old generation's v4 upgrade beside it (dsh's staged publication); the old file stays.

        A session already in the current format is left as it is. With ``dry_run`` the
        upgrade is made and checked in memory and nothing is written or locked.
        Refusals raise :class:`~dshpy.log.formats.MigrationRefusedError`; a session
        another writer holds, :class:`~dshpy.errors.SessionBusyError`.
        """
        location = self._locate(session_id)
        target = location.session_dir / generation_filename(FORMAT_VERSION, compressed=self._compressed)
        if location.version >= FORMAT_VERSION or dry_run:
            count = self._reader.scan(session_id, location).count
            return UpgradeReport(session_id, location.version, location.path, target, count, written=False)
        lock = self._writer_lock(session_id, location)
        try:
            current, scan = self._publish_upgrade(session_id, location)
        finally:
            lock.release()
        return UpgradeReport(session_id, location.version, location.path, current.path, scan.count, written=True)

    def old_generations(self) -> list[str]:
        """Ids of the sessions whose highest stored generation is older than the current format."""
        return [session_id for session_id, location in self._scan_root() if location.version < FORMAT_VERSION]

    def _header(self, session_id: str) -> SessionHeader:
        return self._reader.read_header(session_id, self._locate(session_id))

    def _own_events(self, session_id: str, from_seq: int) -> Iterator[SessionEvent]:
        scan = self._reader.scan(session_id, self._locate(session_id))
        events = scan.events
        for seq in range(from_seq, scan.count):
            yield events[seq]

    def _length(self, session_id: str) -> int:
        return self._reader.scan(session_id, self._locate(session_id)).count

    def _append(self, session_id: str, expected_seq: int, events: Sequence[SessionEvent]) -> None:
        writer = self._open_writer(session_id)
        try:
            writer.write(session_id, expected_seq, events)
        finally:
            writer.close()

    def _remove(self, session_id: str) -> None:
        location = self._locate(session_id)
        lock = SessionLock.try_acquire(
            location.session_dir, f'session "{session_id}" cannot be deleted while a writer holds it'
        )
        try:
            with file_errors(f'cannot delete session "{session_id}"'):
                self._remove_files(location, lock)
        finally:
            lock.release()

    def _remove_files(self, location: Location, lock: SessionLock) -> None:
        """Unlink the session's files (its logs, torn tails set aside, temporaries, cache), then the directory."""
        for name in os.listdir(location.session_dir):
            if (
                parse_generation_filename(name, compressed=True) is not None
                or parse_generation_filename(name, compressed=False) is not None
                or (name.startswith("session") and TORN_SUFFIX in name)
                or name.endswith(".tmp")
                or name == PROJECTION_CACHE_FILENAME
            ):
                os.unlink(location.session_dir / name)
        fsync_dir(location.session_dir)  # the session is gone once no log remains
        self._cache.drop(location.path)
        os.unlink(lock.path)
        # A file someone else put there keeps the directory; without a log it is no session.
        with contextlib.suppress(OSError):
            os.rmdir(location.session_dir)
        fsync_dir(location.session_dir.parent)

    def _ids(self) -> list[str]:
        return [session_id for session_id, _ in self._scan_root()]

    # -- projection cache (the sidecar) ------------------------------------------------

    def _load_projection_rows(self, session_id: str) -> list[ProjectionRow]:
        location = self._find(session_id)
        sidecar = None if location is None else read_sidecar(location.session_dir)
        return [] if sidecar is None else list(sidecar[1].values())

    def _save_projection_rows(self, session_id: str, rows: Sequence[ProjectionRow]) -> None:
        location = self._find(session_id)
        if location is None or not rows or location.version < FORMAT_VERSION:
            return  # an old generation is only read: nothing is written beside it until it is upgraded
        save_sidecar(
            location.session_dir, rows, still_there=lambda: self._resolve_dir(location.session_dir) is not None
        )

    def _list_projection_rows(self, keys: Sequence[str]) -> dict[str, dict[str, ProjectionRow]]:
        wanted = frozenset(keys)
        found: dict[str, dict[str, ProjectionRow]] = {}
        for session_id, location in self._scan_root():
            sidecar = read_sidecar(location.session_dir)
            if sidecar is not None:
                found[session_id] = {key: row for key, row in sidecar[1].items() if key in wanted}
        return found

    # -- full-text search (the derived sidecar) ---------------------------------------------

    def _log_revisions(self) -> list[tuple[str, str]]:
        """Each session with its log's revision: what the sidecar compares to skip unchanged logs on a ``stat``."""
        found: list[tuple[str, str]] = []
        for session_id, location in self._scan_root():
            try:
                st = os.stat(location.path)
            except FileNotFoundError:
                continue  # deleted since the listing
            found.append((session_id, f"{location.path.name}:{':'.join(map(str, revision(st)))}"))
        return found

    def _whole_log(self, session_id: str) -> tuple[SessionHeader, list[SessionEvent]]:
        return self._header(session_id), list(self.read(session_id))

    def _search_text(self, query: TextQuery) -> TextHits:
        if not self._search.writable():  # a read-only root (a mounted dsh archive) is searched by a scan
            ids = self._ids() if query.sessions is None else list(query.sessions)
            return scan_search(query, ids, self._header, self.read, 0)
        return self._search.search(query)

    def _rebuild_search_index(self) -> SearchIndexStatus:
        if not self._search.writable():
            return SearchIndexStatus("scan", None, 0)
        return self._search.rebuild()

    def _search_index_status(self) -> SearchIndexStatus:
        if not self._search.writable():
            return SearchIndexStatus("scan", None, 0)
        return self._search.status()

    def close(self) -> None:
        self._search.close()

    # -- listing ------------------------------------------------------------------------

    def _readable_headers(self) -> list[tuple[str, Location, SessionHeader]]:
        """Headers of every listed session; unreadable ones are skipped with a warning, as dsh does."""
        headers: list[tuple[str, Location, SessionHeader]] = []
        for session_id, location in self._scan_root():
            try:
                headers.append((session_id, location, self._reader.read_header(session_id, location)))
            except (CorruptSessionError, FormatVersionError) as error:
                log.warning("not listing session %s: %s", session_id, error)
        return headers

    def _list_infos(self) -> list[SessionInfo]:
        """Every readable session (headers plus a cheap event count); unreadable ones are skipped with a warning."""
        headers = self._readable_headers()
        forks: dict[str, list[str]] = {}
        subagents: dict[str, list[tuple[str, Location, SessionHeader]]] = {}
        for session_id, location, header in headers:
            if header.parent_session is not None:
                forks.setdefault(header.parent_session, []).append(session_id)
                if header.origin == "subagent":
                    subagents.setdefault(header.parent_session, []).append((session_id, location, header))
        infos: list[SessionInfo] = []
        self._listing.children = subagents  # an old parent's upgrade finds its children here, not by re-listing
        try:
            for session_id, location, header in headers:
                try:
                    scan = self._reader.scan(session_id, location, light=True)
                except (CorruptSessionError, FormatVersionError) as error:
                    log.warning("not listing session %s: %s", session_id, error)
                    continue
                updated = header.created_at if scan.last_time is None else max(header.created_at, scan.last_time)
                children = tuple(sorted(forks.get(session_id, ())))
                infos.append(SessionInfo(session_id, header, scan.count, updated, children, location.version))
        finally:
            self._listing.children = None
        return infos

    def stat(self, session_id: str) -> SessionInfo:
        info = super().stat(session_id)
        version = self._locate(session_id).version
        return info if version == info.stored_version else dataclasses.replace(info, stored_version=version)


def _is_session_id(value: str) -> bool:
    try:
        check_session_id(value)
    except DshError:
        return False
    return True
