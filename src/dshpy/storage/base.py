"""The caller's contract implemented once, over whatever primitives and capabilities a backend declares.

:class:`BaseStore` answers every call of :class:`~dshpy.storage.contract.SessionStore`
on top of the primitives in :mod:`dshpy.storage.backend`, so repair, fork planning,
export/import, validation and the projection cache behave identically on every
backend; the shared contract suite in :mod:`dshpy.testing.contract` checks exactly
that. Where a backend declares a capability (zero-copy forks, metadata queries, a
change feed, ...) the matching call takes it; otherwise a generic path gives the same
answer more slowly.

Conditional append keeps every log consistent: a batch commits only if the stored
log ends exactly where the writer expected. Re-sending a batch that already
committed with identical bytes succeeds without writing, so a client that lost the
reply can simply retry.

On top of it, each session has one live writer at a time: ``create``/``open``/``fork``
take the session's lease (or the backend's own writer) before reading and hold it
until ``close``, so ``open``'s crash repair never closes a turn another live handle is
still writing. Readers never need the lease.
"""

from __future__ import annotations

import builtins
import hashlib
import itertools
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Literal, cast

import orjson

from dshpy.core.events import SessionEvent, decode_event, decode_stored, encode_event, is_seq
from dshpy.core.ids import check_session_id, new_session_id, refuse_unencodable_id
from dshpy.core.json import dumps, loads, thaw, unsafe_number_possible
from dshpy.core.vocabulary import KNOWN_EVENT_TYPES, unknown_type_error
from dshpy.errors import (
    ConflictError,
    CorruptSessionError,
    DshError,
    ForkError,
    FormatVersionError,
    SessionExistsError,
    SessionNotFound,
    StoreError,
)
from dshpy.log.fork import plan_fork
from dshpy.log.header import FORMAT_VERSION, SessionHeader
from dshpy.log.resume import event_fingerprint
from dshpy.log.session import Session, SessionWriter
from dshpy.log.stored_log import StoredLog
from dshpy.log.versions import DEFAULT_CHAIN
from dshpy.projections.checkpoint import CachedState
from dshpy.projections.definition import ProjectionDefinition
from dshpy.projections.registry import ProjectionRegistry, default_registry
from dshpy.projections.runner import Snapshot
from dshpy.storage.backend import (
    BulkListing,
    ChangeFeed,
    IndexedReads,
    MetadataQueries,
    OwnWriters,
    PagedListing,
    ProjectionCache,
    SearchIndex,
    SessionLengths,
    StorageBackend,
    WriterLeases,
    ZeroCopyForks,
    capabilities_of,
)
from dshpy.storage.contract import SessionStore
from dshpy.storage.delegation import DEFAULT_MAX_DELEGATION_DEPTH, check_delegation_depth, checked_maximum
from dshpy.storage.follow import StopSignal, check_follow_args, check_from_seq, poll_follow
from dshpy.storage.lease import Lease
from dshpy.storage.listing_page import PageRequest
from dshpy.storage.live_session import assemble_resumed, assemble_session, resume_session
from dshpy.storage.notices import SessionNotices
from dshpy.storage.projection_cache import (
    WRITE_BACK_TAIL,
    ProjectionRow,
    SessionProjections,
    cached_states,
    current_values,
    fold_cached,
    rows_of,
    session_identity,
)
from dshpy.storage.records import SessionInfo, StoredRecord
from dshpy.storage.resume_cache import RESUME_KEY, resume_state, usable_point
from dshpy.storage.search_records import SearchIndexStatus, TextHits, TextQuery
from dshpy.storage.search_scan import scan_search

__all__ = [
    "EXPORT_FORMAT",
    "BaseStore",
    "SessionInfo",
    "SessionStore",
    "StoredRecord",
    "cleared_row",
    "cleared_rows",
    "column_text",
    "events_digest",
    "parse_stored_header",
]

EXPORT_FORMAT = "dshpy.session-export"

log = logging.getLogger("dshpy.storage")


def parse_stored_header(session_id: str, raw: str | bytes) -> SessionHeader:
    """A header stored as its physical JSON record, checked to belong to ``session_id``.

    Database backends keep the record's exact text (dsh's key order); damage or a
    record naming another session is corruption, never silently accepted.
    """
    try:
        record = loads(raw)
    except orjson.JSONDecodeError:
        raise CorruptSessionError(f'stored header of session "{session_id}" is not JSON') from None
    header = SessionHeader.from_record(record)
    if header.id != session_id:
        raise CorruptSessionError(f'stored header of session "{session_id}" names session "{header.id}"')
    return header


def parse_stored_event(session_id: str, seq: int, body: str | bytes, cleared: bool = False) -> SessionEvent:
    """The event a database row at ``seq`` holds (its stored storage-form JSON); damage or a row holding
    another seq is corruption naming the row.

    ``cleared``: :func:`cleared_rows` found no number to refuse in ``body`` (or its chunk), so the data may be
    sealed as it is reached (see :func:`~dshpy.core.events.decode_stored`).
    """
    try:
        try:
            raw = orjson.loads(body)
        except orjson.JSONDecodeError:
            raw = loads(body)  # JSON.stringify's escaped lone surrogates, or the same error
        event = decode_stored(raw, body, cleared) if type(body) is bytes else decode_stored(raw, b"", False)
    except (orjson.JSONDecodeError, DshError) as error:
        raise CorruptSessionError(f'session "{session_id}" event {seq} is damaged: {error}') from None
    if event.seq != seq:
        raise CorruptSessionError(f'session "{session_id}" row {seq} holds event seq {event.seq}')
    return event


def cleared_rows(bodies: Sequence[object]) -> bool:
    """Whether no stored body in ``bodies`` can hold a number a read must refuse: one scan for a whole chunk.

    ``False`` says only "check each row" (a damaged row may not even be bytes); see
    :func:`~dshpy.core.json.unsafe_number_possible`.
    """
    try:
        return not unsafe_number_possible(b"\n".join(cast("Sequence[bytes]", bodies)))
    except TypeError:
        return False


def cleared_row(body: object) -> bool:
    """Whether one stored body can hold no number a read must refuse (for rows of a chunk that was not cleared)."""
    return type(body) is bytes and not unsafe_number_possible(body)


def readable(session_id: str, events: Iterable[SessionEvent]) -> Iterator[SessionEvent]:
    """Pass stored events through the rule ``open()`` applies: a type this build does not know
    must be marked ``ignorable``, or the log is refused rather than shown half-understood.

    Every read path (``read``, ``read_types``, ``follow``, ``export``) goes through it, so a
    log no reader can open is never streamed either.
    """
    known = KNOWN_EVENT_TYPES
    for event in events:
        if event.type not in known and not event.ignorable:
            raise unknown_type_error(event.type, event.seq, session_id)
        yield event


def column_text(value: str) -> str:
    """``value`` as a database text column can hold it, for columns that only index or describe a row.

    UTF-8 cannot encode a lone surrogate and PostgreSQL text refuses NUL, though event
    types and cwds may hold either; such a value is stored JSON-escaped (``\\udcff``,
    ``\\u0000``). The row's JSON record keeps the exact string, and every string a
    query filters on is plain ASCII, so the escaped form never matches one by accident.
    """
    if "\x00" not in value:
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            pass
        else:
            return value
    return dumps(value).decode()[1:-1]


def events_digest(events: Sequence[SessionEvent]) -> str:
    """SHA-256 over the canonical event bytes: each event's wire JSON plus ``\\n``."""
    digest = hashlib.sha256()
    for event in events:
        digest.update(encode_event(event, seq_ranges=False))
        digest.update(b"\n")
    return digest.hexdigest()


@contextmanager
def _reading_older(session_id: str, point: int) -> Iterator[None]:
    """Say why a resumed session touched its store when that read fails for a reason other than the data
    (typically: the store was closed while the session was still used)."""
    try:
        yield
    except StoreError as error:
        if type(error) is not StoreError:
            raise
        raise StoreError(
            f"{error} (session \"{session_id}\" was resumed at seq {point}: its earlier events are read from the "
            "store when they are used, so keep the store open while the session is read)"
        ) from error


class _StoreWriter:
    """The writer a live session gets: conditional appends straight into the backend, under its lease."""

    __slots__ = ("_lease", "_store")

    def __init__(self, store: BaseStore, lease: Lease | None) -> None:
        self._store = store
        self._lease = lease

    def write(self, session_id: str, expected_seq: int, events: Sequence[SessionEvent]) -> None:
        if self._lease is not None:
            self._lease.check()
        self._store._append_checked(session_id, expected_seq, events)

    def close(self) -> None:
        lease, self._lease = self._lease, None
        if lease is not None:
            lease.release()


def _encodable(request: PageRequest) -> bool:
    """Whether every text of ``request`` can be a text column's parameter (UTF-8: no lone surrogate)."""
    texts = [*(request.ids or ()), *(request.exclude_ids or ()), *(request.cwd or ()), *(request.parent or ())]
    if request.after is not None:
        texts.append(request.after[1])
    try:
        for text in texts:
            if text is not None:
                text.encode()
    except UnicodeEncodeError:
        return False
    return True


class BaseStore(StorageBackend):
    """The caller's contract (:class:`~dshpy.storage.contract.SessionStore`) implemented once over a backend.

    A backend subclasses this, provides :class:`~dshpy.storage.backend.StorageBackend`'s
    primitives and declares the capabilities it offers (see :mod:`dshpy.storage.backend`);
    the declaration is checked once, when the subclass is built. Every public method
    validates the session id first, so no backend ever sees an unchecked id.
    """

    url: str = ""
    _max_delegation_depth: int = DEFAULT_MAX_DELEGATION_DEPTH
    zero_copy_fork: bool = False
    """Whether forks read the parent's prefix instead of copying it (then deletes must detach)."""
    _capabilities: frozenset[str] = frozenset()
    _scan_generation: int = 0
    """Without :class:`~dshpy.storage.backend.SearchIndex`: deletes by this store object (a scan has no index
    to version, so the generation of its hits is that count)."""

    text_column_ids: bool = False
    """Whether this backend keeps session ids in UTF-8 text columns (SQLite, PostgreSQL), which cannot hold
    a lone surrogate: such an id, valid for dsh and for the JSONL and memory stores, is refused by name."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._capabilities = capabilities_of(cls)
        cls.zero_copy_fork = "zero_copy_forks" in cls._capabilities

    def _check_id(self, session_id: object) -> str:
        """:func:`~dshpy.core.ids.check_session_id`, plus what this backend's storage cannot hold."""
        checked = check_session_id(session_id)
        if self.text_column_ids:
            refuse_unencodable_id(checked, type(self).__name__)
        return checked

    @property
    def notices(self) -> SessionNotices:
        """The store's ``session/created`` / ``session/flush`` / ``session/disposed`` handlers (made on first use)."""
        notices: SessionNotices | None = self.__dict__.get("_session_notices")
        if notices is None:
            notices = self.__dict__.setdefault("_session_notices", SessionNotices())
        return notices

    def on(self, name: str, handler: Callable[[Any], Any]) -> Callable[[], None]:
        """Call ``handler(payload)`` at the session point ``name`` for every live session of this store.

        The seed's points: ``session/created``, ``session/flush`` (with the seq range made
        durable), ``session/disposed`` — see :mod:`dshpy.storage.notices`. Returns a
        function that unregisters the handler.
        """
        return self.notices.on(name, handler)

    @property
    def max_delegation_depth(self) -> int:
        """The deepest sub-agent session this store creates (:mod:`dshpy.storage.delegation`); settable."""
        return self._max_delegation_depth

    @max_delegation_depth.setter
    def max_delegation_depth(self, value: int) -> None:
        self._max_delegation_depth = checked_maximum(value)

    @property
    def capabilities(self) -> frozenset[str]:
        """Names of the capabilities this store's backend declares (``dshpy.storage.backend.CAPABILITIES``)."""
        return self._capabilities

    # -- capabilities, or the generic path --------------------------------------------------

    def _lineage(self, session_id: str) -> tuple[str, int] | None:
        """``(parent, inherited count)`` of a zero-copy fork, else ``None``."""
        return cast(ZeroCopyForks, self)._base(session_id) if self.zero_copy_fork else None

    def _shared_with(self, session_id: str) -> builtins.list[str]:
        """Forks that read this session's prefix in place."""
        return cast(ZeroCopyForks, self)._children(session_id) if self.zero_copy_fork else []

    def _cache_rows(self, session_id: str) -> builtins.list[ProjectionRow]:
        if "projection_cache" not in self._capabilities:
            return []  # no cache: every projection is folded from the log
        return cast(ProjectionCache, self)._load_projection_rows(session_id)

    def _store_cache_rows(self, session_id: str, rows: Sequence[ProjectionRow]) -> None:
        if "projection_cache" in self._capabilities:
            cast(ProjectionCache, self)._save_projection_rows(session_id, rows)

    def _take_lease(self, session_id: str) -> Lease | None:
        """The session's lease, or ``None`` where the backend has none or keeps it in its own writers."""
        return cast(WriterLeases, self)._lease(session_id) if "writer_leases" in self._capabilities else None

    @contextmanager
    def _leased(self, session_id: str) -> Iterator[None]:
        """Hold the session's lease for one write done outside a live handle (a raw append, a delete)."""
        lease = self._take_lease(session_id)
        try:
            yield
        finally:
            if lease is not None:
                lease.release()

    def _live_writer(self, session_id: str) -> SessionWriter:
        """The writer a live session appends through, its exclusion taken before the session is read.

        So ``open`` repairs only a log it owns: SessionBusyError while another writer
        holds the session; released by the writer's ``close()``.
        """
        if "own_writers" in self._capabilities:
            return cast(OwnWriters, self)._writer(session_id)
        return _StoreWriter(self, self._take_lease(session_id))

    def _create_live(self, record: StoredRecord) -> SessionWriter:
        """Create a record and return its live writer; the exclusion is taken before the record is visible."""
        if "own_writers" in self._capabilities:
            return cast(OwnWriters, self)._insert_writer(record)
        session_id = record.header.id
        if self.exists(session_id):
            raise SessionExistsError(f'session "{session_id}" already exists')
        lease = self._take_lease(session_id)
        try:
            self._insert(record)
        except BaseException:
            if lease is not None:
                lease.release()
            raise
        return _StoreWriter(self, lease)

    def close(self) -> None:
        """Release backend resources."""

    def __enter__(self) -> BaseStore:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # -- reading ----------------------------------------------------------------------

    def exists(self, session_id: str) -> bool:
        self._check_id(session_id)
        try:
            self._header(session_id)
        except SessionNotFound:
            return False
        return True

    def read(self, session_id: str, from_seq: int = 0) -> Iterator[SessionEvent]:
        """Stream the stored events with seq >= ``from_seq`` (inherited prefix included)."""
        self._check_id(session_id)
        check_from_seq(from_seq)
        DEFAULT_CHAIN.plan(self._header(session_id).version, session_id)
        return self._read_chain(session_id, from_seq)

    def read_types(self, session_id: str, types: Iterable[str], from_seq: int = 0) -> Iterator[SessionEvent]:
        """Stream only the events of ``types`` (seq >= ``from_seq``, inherited prefix included).

        Database backends filter in SQL, so counting turns or finding a title never decodes
        the rest of a long log. Unlike :meth:`read`, gaps between the returned seqs are expected.
        """
        self._check_id(session_id)
        check_from_seq(from_seq)
        DEFAULT_CHAIN.plan(self._header(session_id).version, session_id)
        return self._typed_chain(session_id, tuple(sorted(set(types))), from_seq, None)

    def _typed_chain(
        self, session_id: str, types: tuple[str, ...], from_seq: int, until: int | None
    ) -> Iterator[SessionEvent]:
        if not types:
            return
        base = self._lineage(session_id)
        if base is not None and from_seq < base[1]:
            parent, inherited = base
            yield from self._typed_chain(parent, types, from_seq, inherited if until is None else min(until, inherited))
            from_seq = inherited
        if "indexed_reads" in self._capabilities:
            own = cast(IndexedReads, self)._own_typed_events(session_id, types, from_seq, until)
        else:
            own = self._filtered_own_events(session_id, types, from_seq, until)
        yield from readable(session_id, own)

    def _filtered_own_events(
        self, session_id: str, types: tuple[str, ...], from_seq: int, until: int | None
    ) -> Iterator[SessionEvent]:
        """Without :class:`~dshpy.storage.backend.IndexedReads`: the session's own events, filtered here."""
        for event in self._own_events(session_id, from_seq):
            if until is not None and event.seq >= until:
                return
            if event.type in types:
                yield event

    def follow(
        self, session_id: str, from_seq: int = 0, *, poll_interval: float = 0.2, stop: StopSignal = None
    ) -> Iterator[SessionEvent]:
        """Yield events with seq >= ``from_seq`` as any writer commits them, until ``stop``.

        Stored events come first, then new ones as they are committed (by this process or
        any other). Reads go by seq, so nothing is skipped or repeated. ``stop`` is a
        :class:`threading.Event` or a callable returning True; without it the generator
        runs until closed. Without :class:`~dshpy.storage.backend.ChangeFeed` it polls
        every ``poll_interval`` seconds; with it, it wakes when a writer commits. The id and the
        session's existence are checked before the first event is asked for.
        """
        self._check_id(session_id)
        check_follow_args(from_seq, poll_interval)
        self._header(session_id)
        if "change_feed" in self._capabilities:
            return cast(ChangeFeed, self)._follow(session_id, from_seq, poll_interval, stop)
        return poll_follow(self.read, session_id, from_seq, poll_interval, stop)

    def _read_chain(self, session_id: str, from_seq: int) -> Iterator[SessionEvent]:
        base = self._lineage(session_id)
        if base is not None:
            parent, inherited = base
            if from_seq < inherited:
                for event in self._read_chain(parent, from_seq):
                    if event.seq >= inherited:
                        break
                    yield event
                from_seq = inherited
        known = KNOWN_EVENT_TYPES
        for event in self._own_events(session_id, from_seq):  # readable(), inlined: one generator less per event
            if event.type not in known and not event.ignorable:
                raise unknown_type_error(event.type, event.seq, session_id)
            yield event

    def _load(self, session_id: str) -> tuple[SessionHeader, list[SessionEvent]]:
        self._check_id(session_id)
        header = self._header(session_id)
        DEFAULT_CHAIN.plan(header.version, session_id)
        return header, list(self._read_chain(session_id, 0))

    def _restore(self, header: SessionHeader, events: list[SessionEvent], **options: Any) -> Session:
        try:
            return Session(header, events, **options)
        except DshError as error:
            if isinstance(error, StoreError):
                raise
            raise CorruptSessionError(f'stored session "{header.id}" failed validation: {error}') from error

    def stat(self, session_id: str) -> SessionInfo:
        self._check_id(session_id)
        if "metadata_queries" in self._capabilities:
            info = cast(MetadataQueries, self)._session_info(session_id)
            if info is None:
                raise SessionNotFound(f'session "{session_id}" not found')
            return info
        header = self._header(session_id)
        length = self._length(session_id)
        updated = header.created_at
        if length:
            last = next(self._read_chain(session_id, length - 1), None)
            if last is not None:
                updated = max(updated, last.time)
        return SessionInfo(session_id, header, length, updated, tuple(self._forks_of(session_id)))

    def _forks_of(self, session_id: str) -> builtins.list[str]:
        """Sessions whose header names ``session_id`` as parent; a session whose header cannot be read is skipped."""
        forks: builtins.list[str] = []
        for other in self._ids():
            try:
                if self._header(other).parent_session == session_id:
                    forks.append(other)
            except (CorruptSessionError, FormatVersionError, SessionNotFound) as error:
                log.warning("not listing session %s: %s", other, error)
        return sorted(forks)

    def list(self) -> builtins.list[SessionInfo]:
        """Every session, newest activity first."""
        if "bulk_listing" in self._capabilities:
            infos = cast(BulkListing, self)._list_infos()
        else:
            infos = [self.stat(session_id) for session_id in self._ids()]
        infos.sort(key=lambda info: (info.updated_at, info.id), reverse=True)
        return infos

    def lengths(self) -> dict[str, int]:
        """Every session's event count (its next seq) by id: what a reader of the whole store compares to see which
        sessions grew, without the headers a listing parses (a backend with
        :class:`~dshpy.storage.backend.SessionLengths` reads them from its session rows alone)."""
        if "session_lengths" in self._capabilities:
            return cast(SessionLengths, self)._lengths()
        return {info.id: info.event_count for info in self.list()}

    def list_page(self, request: PageRequest) -> builtins.list[SessionInfo]:
        """One page of the listing (see :class:`~dshpy.storage.listing_page.PageRequest`).

        A backend that cuts pages in storage reads only the page's sessions; any other
        cuts the page out of :meth:`list` (as does every backend for a request holding
        text no UTF-8 column can: ids and paths may hold lone surrogates, which match nothing there).
        """
        if "paged_listing" in self._capabilities and _encodable(request):
            return cast(PagedListing, self)._list_page(request)
        return request.cut(self.list())

    # -- sessions -------------------------------------------------------------------

    def create(
        self,
        *,
        session_id: str | None = None,
        cwd: str | None = None,
        agent_preset: str | None = None,
        origin: str | None = None,
        delegation_depth: int = 0,
        write_behind_ms: int | None = None,
    ) -> Session:
        """Create an empty session and return it live (the header is stored at once).

        With ``write_behind_ms`` the session flushes by itself that long after its
        first unflushed append (see :meth:`Session.set_write_behind`).
        """
        sid = self._check_id(session_id) if session_id is not None else new_session_id()
        header = SessionHeader.new(
            sid, cwd=cwd, agent_preset=agent_preset, origin=origin, delegation_depth=delegation_depth
        )
        check_delegation_depth(header.delegation_depth, self._max_delegation_depth, f'session "{sid}"')
        writer = self.notices.watch(self._create_live(StoredRecord(header)))
        session = self._assemble(header, [], writer, None)
        session.set_write_behind(write_behind_ms)
        writer.announce(session, "created")
        return session

    def open(self, session_id: str, *, write_behind_ms: int | None = None) -> Session:
        """Open a live session; an interrupted turn is closed durably first (crash repair)."""
        return self._open_live(session_id, write_behind_ms, "opened")

    def _open_live(
        self, session_id: str, write_behind_ms: int | None, how: Literal["opened", "forked"]
    ) -> Session:
        self._check_id(session_id)
        self._header(session_id)
        # taken before reading: a locking backend reads what it owns
        writer = self.notices.watch(self._live_writer(session_id))
        try:
            session = self._load_session(session_id, writer)
        except BaseException:
            writer.close()
            raise
        session.set_write_behind(write_behind_ms)
        writer.announce(session, how)
        return session

    def inspect(self, session_id: str) -> Session:
        """A read-only view; an interrupted turn shows closed, but nothing is written."""
        return self._load_session(session_id, None)

    def _load_session(self, session_id: str, writer: SessionWriter | None) -> Session:
        """The session from its resume point and the tail after it when the point is usable, else from its whole log.

        Both give the same session (see :mod:`dshpy.storage.resume_cache`); the first
        reads only the tail and leaves the older events in the store until read.
        """
        self._check_id(session_id)
        header = self._header(session_id)
        DEFAULT_CHAIN.plan(header.version, session_id)
        seeds = self._cached_states(header)
        resumed = self._resume(header, seeds, writer) if header.version == FORMAT_VERSION else None
        if resumed is not None:
            session, closers = resumed
            session = assemble_resumed(
                session, closers, writer=writer, seeds=seeds, save_rows=self._store_cache_rows, backend=self._backend
            )
            read = len(session) - (session.resumed_from or 0)
        else:
            header, events = self._load(session_id)
            session = self._assemble(header, events, writer, seeds)
            read = len(events)
        if read >= WRITE_BACK_TAIL and session.pending_count == 0 and header.version == FORMAT_VERSION:
            self._write_back_point(header, session)
        return session

    def _write_back_point(self, header: SessionHeader, session: Session) -> None:
        """Store the resume point of a session that had to read a long log, so that the next open need not.

        Fail-soft, as every cache write: only positions the store holds (the caller checks
        that nothing is pending), under the session's identity.
        """
        try:
            point = session.resume_point()
        except DshError as error:  # a lazily read older event turned out damaged: the next reader will say so
            log.warning("resume point of session %s not written: %s", header.id, error)
            return
        if point is not None:
            self._save_fail_soft(header, {RESUME_KEY: resume_state(point)})

    def _resume(
        self, header: SessionHeader, seeds: Mapping[str, CachedState], writer: SessionWriter | None
    ) -> tuple[Session, builtins.list[SessionEvent]] | None:
        """The session restored from its resume point, and its repair; ``None`` when the point is missing or unusable.

        The tail is read from the point's last event on, whose fingerprint must be the
        point's; a tail that does not validate on top of the point also means "not
        usable" (the whole log then decides whether the session is corrupt).
        """
        session_id = header.id
        point = usable_point(session_id, seeds, self._length(session_id))
        if point is None:
            return None
        tail = builtins.list(self._read_chain(session_id, point.length - 1))
        if not tail or tail[0].seq != point.length - 1 or event_fingerprint(tail[0]) != point.last_event:
            log.info("resume point of session %s not used: the log is not the one it was taken from", session_id)
            return None

        def fetch(start: int, stop: int) -> builtins.list[SessionEvent]:
            with _reading_older(session_id, point.length):
                return builtins.list(itertools.islice(self._read_chain(session_id, start), stop - start))

        def stream(start: int) -> Iterator[SessionEvent]:
            with _reading_older(session_id, point.length):
                yield from self._read_chain(session_id, start)

        try:
            return resume_session(
                header, point, lambda: StoredLog(session_id, point.length, fetch, stream), tail[1:], writer=writer
            )
        except DshError as error:
            log.info("resume point of session %s not used: the tail does not follow it (%s)", session_id, error)
            return None

    @property
    def _backend(self) -> str:
        """The backend's name for :func:`~dshpy.storage.live_session.observe_writers` observers (its URL scheme)."""
        return self.url.split(":", 1)[0] or type(self).__name__

    def _assemble(
        self,
        header: SessionHeader,
        events: builtins.list[SessionEvent],
        writer: SessionWriter | None,
        seeds: Mapping[str, CachedState] | None,
    ) -> Session:
        """A session of this store: :func:`~dshpy.storage.live_session.assemble_session` with its cache and restore."""
        return assemble_session(
            header,
            events,
            writer=writer,
            seeds=seeds,
            save_rows=self._store_cache_rows,
            restore=self._restore,
            backend=self._backend,
        )

    # -- projections --------------------------------------------------------------------

    def _cached_states(self, header: SessionHeader) -> dict[str, CachedState]:
        """The session's cache rows recorded under its current identity (none if the cache cannot be read)."""
        try:
            rows = self._cache_rows(header.id)
        except (DshError, OSError) as error:
            log.warning("projection cache of session %s not read: %s", header.id, error)
            return {}
        return cached_states(header, rows)

    def _save_fail_soft(self, header: SessionHeader, states: Mapping[str, CachedState]) -> None:
        if not states:
            return
        try:
            self._store_cache_rows(header.id, rows_of(header, states))
        except (DshError, OSError) as error:
            log.warning("projection cache of session %s not written: %s", header.id, error)

    @staticmethod
    def _definitions(
        keys: Iterable[str] | None, registry: ProjectionRegistry | None
    ) -> builtins.list[ProjectionDefinition[Any]]:
        chosen = default_registry() if registry is None else registry
        if keys is None:
            return builtins.list(chosen)
        if isinstance(keys, str):
            raise TypeError("keys must be an iterable of projection keys, not one string")
        return [chosen[key] for key in dict.fromkeys(keys)]

    def projections(
        self,
        session_id: str,
        keys: Iterable[str] | None = None,
        *,
        registry: ProjectionRegistry | None = None,
        info: SessionInfo | None = None,
    ) -> Snapshot:
        """``{"as_of_seq", "values"}`` of projections ``keys`` (default: every registered one) over the stored log.

        Answered from the projection cache plus a fold of the stored events after it,
        without building a :class:`Session` (no validation replay, no lock, nothing
        appended: an interrupted turn is reported as stored). Only the tail after the
        lowest usable cached row is read. Rows that had to be re-folded, or that lagged
        far behind the log, are written back (fail-soft). Unknown keys raise
        :class:`~dshpy.errors.ProjectionError`.

        ``info``: the session's info as a listing (or ``stat``) just gave it; its header
        and length are taken instead of read again, so a page of a listing folds each
        of its sessions with one read of the cache (an older stored format is read anyway).
        """
        self._check_id(session_id)
        definitions = self._definitions(keys, registry)
        if info is not None and info.id != session_id:
            raise ValueError(f'info of session "{info.id}" given for session "{session_id}"')
        if info is not None and info.stored_version == FORMAT_VERSION:
            header, length = info.header, info.event_count
            DEFAULT_CHAIN.plan(header.version, session_id)
        else:
            header = self._header(session_id)
            DEFAULT_CHAIN.plan(header.version, session_id)
            length = self._length(session_id)
        folded = fold_cached(
            definitions,
            self._cached_states(header),
            length,
            lambda start: self._read_chain(session_id, start),
        )
        self._save_fail_soft(header, folded.write_back)
        return folded.snapshot

    def list_projections(
        self,
        keys: Iterable[str] | None = None,
        *,
        registry: ProjectionRegistry | None = None,
        limit: int | None = None,
    ) -> builtins.list[SessionProjections]:
        """Every session (as :meth:`list` orders them; the first ``limit``) with the values of projections ``keys``.

        Cached rows at the end of a log are served as stored, so listing a store whose
        cache is warm reads no events at all; other sessions are folded as
        :meth:`projections` folds them (and their rows written back). A session whose
        log cannot be read is listed with ``error`` set instead of values.
        """
        definitions = self._definitions(keys, registry)
        infos, rows = self._listing_with_rows([d.key for d in definitions])
        if limit is not None:
            infos = infos[:limit]
        versions = [(d.key, d.state_version) for d in definitions]
        listed: builtins.list[SessionProjections] = []
        for info in infos:
            header = info.header
            found = rows.get(info.id)
            if found is not None:  # the common case, inline: every row current, same identity and version
                values = current_values(found, versions, session_identity(header), info.event_count - 1)
                if values is not None and header.version == FORMAT_VERSION:
                    listed.append(SessionProjections(info, info.event_count - 1, values))
                    continue
            try:
                DEFAULT_CHAIN.plan(header.version, info.id)
                folded = fold_cached(
                    definitions,
                    cached_states(header, (found or {}).values()),
                    info.event_count,
                    lambda start, sid=info.id: self._read_chain(sid, start),
                    trust_current=True,
                )
            except (CorruptSessionError, FormatVersionError, SessionNotFound) as error:
                listed.append(SessionProjections(info, -1, {}, " ".join(str(error).split())))
                continue
            self._save_fail_soft(header, folded.write_back)
            snapshot = folded.snapshot
            listed.append(SessionProjections(info, snapshot["as_of_seq"], snapshot["values"]))
        return listed

    def _listing_with_rows(
        self, keys: Sequence[str]
    ) -> tuple[builtins.list[SessionInfo], dict[str, dict[str, ProjectionRow]]]:
        """:meth:`list` and the cache rows of ``keys``, in one snapshot where the backend offers it."""
        if "metadata_queries" in self._capabilities:
            return cast(MetadataQueries, self)._infos_and_projection_rows(keys)
        infos = self.list()
        if "projection_cache" not in self._capabilities:
            return infos, {}
        return infos, cast(ProjectionCache, self)._list_projection_rows(keys)

    def append(self, session_id: str, events: Sequence[SessionEvent], *, expected_seq: int) -> None:
        """Validate ``events`` against the stored log and append them conditionally.

        The write takes the session's lease for its duration, so it is refused with
        :class:`~dshpy.errors.SessionBusyError` while a live handle holds the session
        (an identical re-send of stored events still succeeds without writing).
        """
        header, stored = self._load(session_id)
        if expected_seq < len(stored) and self._same_as_stored(stored, expected_seq, events):
            return
        if expected_seq != len(stored):
            raise ConflictError(
                f'session "{session_id}" ends at seq {len(stored)}, not {expected_seq}',
                expected_seq=expected_seq,
                actual_seq=len(stored),
            )
        session = self._restore(header, stored)
        session.append_events(events)
        with self._leased(session_id):  # a raw append is a writer too: refused while a live handle holds the session
            self._append_checked(session_id, expected_seq, events)

    def _append_checked(self, session_id: str, expected_seq: int, events: Sequence[SessionEvent]) -> None:
        """Conditional append of already-validated events, with idempotent re-send."""
        if not events:
            return
        try:
            self._append(session_id, expected_seq, events)
        except ConflictError:
            stored = list(self._read_chain(session_id, expected_seq))
            if self._same_as_stored(stored, 0, events):
                return
            raise

    @staticmethod
    def _same_as_stored(stored: Sequence[SessionEvent], offset: int, events: Sequence[SessionEvent]) -> bool:
        if offset + len(events) > len(stored):
            return False
        return all(
            encode_event(a, seq_ranges=False) == encode_event(b, seq_ranges=False)
            for a, b in zip(stored[offset : offset + len(events)], events, strict=True)
        )

    def fork(
        self,
        source: Session | str,
        boundary: int | None = None,
        child_id: str | None = None,
        *,
        close_open_turn: bool = False,
        origin: str | None = None,
        write_behind_ms: int | None = None,
    ) -> Session:
        """Fork ``source`` at the inclusive ``boundary`` (default: its last seq) and open the new child live.

        ``source`` is a session id or a live :class:`Session` of this store, as in the
        seed's ``fork(source, boundary?, childSessionId?)``: its pending events are
        flushed first, so its in-memory prefix is what the child inherits (a boundary
        among events that cannot be flushed is ``INVALID_BOUNDARY``, saying why).
        ``origin="subagent"`` forks on behalf of a sub-agent: the child records it and
        sits one ``delegationDepth`` below the parent, refused past
        :attr:`max_delegation_depth` (:class:`~dshpy.errors.DelegationDepthError`).

        Raises :class:`ForkError` (``SESSION_ALREADY_EXISTS`` first, then
        ``SESSION_NOT_FOUND``, ``INVALID_BOUNDARY``, ``OPEN_TURN``,
        ``DELEGATION_DEPTH_EXCEEDED``); nothing is created on error and the parent is
        never written (beyond flushing what it had already appended). See :meth:`fork_stored`.
        """
        info = self.fork_stored(source, boundary, child_id, close_open_turn=close_open_turn, origin=origin)
        return self._open_live(info.id, write_behind_ms, "forked")

    def _fork_source(self, source: Session | str, boundary: int | None) -> tuple[str, int | None]:
        """The parent's id and the boundary to cut at: a live session's pending events are flushed first."""
        if isinstance(source, str):
            return source, boundary
        if not isinstance(source, Session):
            raise TypeError(f"fork() takes a session id or a Session, not {type(source).__name__}")
        sid = source.id
        last = len(source) - 1
        target = last if boundary is None else boundary
        if not is_seq(target) or target > last:
            return sid, target  # plan_fork names the bad boundary
        why = " and this handle cannot flush them (read-only or closed)"
        if source.pending_count and not source.read_only:
            try:
                source.flush()
            except DshError as error:
                why = f"; flushing them failed ({type(error).__name__}: {error})"
        if self.exists(sid):
            stored = self._length(sid)
            if target >= stored:
                raise ForkError(
                    "INVALID_BOUNDARY",
                    f'cannot fork session "{sid}" at {target}: this store holds only its events 0..{stored - 1}, '
                    f"the rest are pending in memory{why}",
                )
        return sid, target

    def fork_stored(
        self,
        source: Session | str,
        boundary: int | None = None,
        child_id: str | None = None,
        *,
        close_open_turn: bool = False,
        origin: str | None = None,
    ) -> SessionInfo:
        """Create the fork in storage without loading it; returns the child's info (arguments as :meth:`fork`).

        Only the parent's events from the last turn boundary before ``boundary`` are
        read, so on a zero-copy backend the cost does not depend on the prefix length.
        """
        session_id, boundary = self._fork_source(source, boundary)
        self._check_id(session_id)
        if origin not in (None, "subagent"):
            raise ValueError(f'origin must be "subagent" or None, not {origin!r}')
        cid = self._check_id(child_id) if child_id is not None else new_session_id()
        if self.exists(cid):
            raise ForkError("SESSION_ALREADY_EXISTS", f'session "{cid}" already exists')
        if not self.exists(session_id):
            raise ForkError("SESSION_NOT_FOUND", f'session "{session_id}" not found')
        parent_header = self._header(session_id)
        DEFAULT_CHAIN.plan(parent_header.version, session_id)
        depth = parent_header.delegation_depth + 1 if origin == "subagent" else 0
        check_delegation_depth(depth, self._max_delegation_depth, f'the sub-agent fork "{cid}" of "{session_id}"')
        length = self._length(session_id)
        target = length - 1 if boundary is None else boundary
        window = self._window_at(session_id, target) if is_seq(target) and 0 <= target < length else []
        plan = plan_fork(window, boundary, length=length, session_id=session_id, close_open_turn=close_open_turn)
        header = SessionHeader.new(
            cid,
            cwd=parent_header.cwd,
            parent_session=session_id,
            is_seeded=True,
            agent_preset=parent_header.agent_preset,
            origin=origin,
            delegation_depth=depth,
        )
        if self.zero_copy_fork:
            record = StoredRecord(header, (session_id, plan.inherited_count), list(plan.own))
        else:
            prefix = [e for e in self._read_chain(session_id, 0) if e.seq < plan.inherited_count]
            record = StoredRecord(header, None, [*prefix, *plan.own])
        try:
            self._insert(record)
        except SessionExistsError:
            raise ForkError("SESSION_ALREADY_EXISTS", f'session "{cid}" already exists') from None
        # The child's first inherited_count events are the parent's: the parent's rows up to there seed its cache.
        inherited_rows = self._cached_states(parent_header)
        self._save_fail_soft(header, {k: c for k, c in inherited_rows.items() if c.seq < plan.inherited_count})
        return self.stat(cid)

    def _window_at(self, session_id: str, boundary: int) -> builtins.list[SessionEvent]:
        """Events from the last ``turn/start``/``turn/end`` at or before ``boundary`` through ``boundary``.

        Without :class:`~dshpy.storage.backend.IndexedReads` the log is read from the start.
        """
        if "indexed_reads" in self._capabilities:
            return cast(IndexedReads, self)._turn_window(session_id, boundary)
        window: builtins.list[SessionEvent] = []
        for event in self._read_chain(session_id, 0):
            if event.seq > boundary:
                break
            if event.type in ("turn/start", "turn/end"):
                window = []
            window.append(event)
        return window

    # -- full-text search --------------------------------------------------------------

    def search_text(self, query: TextQuery) -> TextHits:
        """A page of ranked hits for ``query``, from the backend's index or, without one, a scan of the logs."""
        if "search_index" in self._capabilities:
            return cast(SearchIndex, self)._search_text(query)
        ids = self._ids() if query.sessions is None else [self._check_id(sid) for sid in query.sessions]
        return scan_search(query, ids, self._header, self.read, self._scan_generation)

    def rebuild_search_index(self) -> SearchIndexStatus:
        """Index every stored event again from its log (without an index: nothing to do)."""
        if "search_index" in self._capabilities:
            return cast(SearchIndex, self)._rebuild_search_index()
        return self.search_index_status()

    def search_index_status(self) -> SearchIndexStatus:
        """What the search index holds; ``kind`` ``"scan"`` when the backend keeps none."""
        if "search_index" in self._capabilities:
            return cast(SearchIndex, self)._search_index_status()
        return SearchIndexStatus("scan", None, self._scan_generation)

    def forks_sharing(self, session_id: str) -> builtins.list[str]:
        """The forks that read ``session_id``'s history in place: :meth:`delete` refuses while there are any
        (unless ``detach_forks``), so a caller can say so before it asks anyone to confirm a delete."""
        check_session_id(session_id)
        self._header(session_id)
        return self._shared_with(session_id)

    def delete(self, session_id: str, *, detach_forks: bool = False) -> None:
        """Delete a session. Refused while zero-copy forks read its prefix, unless ``detach_forks``,
        and while a live handle holds it (:class:`~dshpy.errors.SessionBusyError`)."""
        self._check_id(session_id)
        self._header(session_id)
        children = self._shared_with(session_id)
        if children and not detach_forks:
            names = ", ".join(children)
            raise StoreError(
                f'session "{session_id}" has forks that share its history ({names}); delete them first or '
                "pass detach_forks=True to copy the shared prefix into each fork"
            )
        with self._leased(session_id):  # never pull a session from under its live writer; its lease goes with it
            for child in children:
                base = self._lineage(child)
                assert base is not None
                prefix = [event for event in self._read_chain(session_id, 0) if event.seq < base[1]]
                cast(ZeroCopyForks, self)._rebase(child, prefix)
            self._remove(session_id)
        self._scan_generation += 1

    # -- export / import --------------------------------------------------------------

    def export(self, session_id: str) -> dict[str, Any]:
        """A self-contained JSON document: header, every event, and their SHA-256."""
        header, events = self._load(session_id)
        return {
            "format": EXPORT_FORMAT,
            "version": 1,
            "header": header.to_record(),
            "events": [thaw(event.to_wire()) for event in events],
            "eventsSha256": events_digest(events),
            "exportedAt": int(time.time() * 1000),
        }

    def import_session(self, document: dict[str, Any], *, session_id: str | None = None) -> SessionInfo:
        """Verify an exported document and store it (under ``session_id`` if given).

        The digest must match and every event must pass the same validation as a live
        append; a mismatch raises :class:`CorruptSessionError` and stores nothing.
        Imported sessions are self-contained (their prefix is never shared).
        """
        if not isinstance(document, dict) or document.get("format") != EXPORT_FORMAT:
            raise CorruptSessionError(f"not a dshpy session export (format must be {EXPORT_FORMAT!r})")
        if document.get("version") != 1:
            raise CorruptSessionError(f"unsupported export version {document.get('version')!r}")
        raw_header = document.get("header")
        raw_events = document.get("events")
        if not isinstance(raw_header, dict) or not isinstance(raw_events, list):
            raise CorruptSessionError("export needs a header object and an events array")
        version = raw_header.get("version")
        DEFAULT_CHAIN.plan(version if type(version) is int else -1)
        header = SessionHeader.from_record(raw_header)
        for named in (header.id if session_id is None else None, header.parent_session):
            if named is not None:
                self._check_id(named)
        try:
            events = [decode_event(raw) for raw in raw_events]
        except DshError as error:
            raise CorruptSessionError(f"export holds an invalid event: {error}") from None
        if events_digest(events) != document.get("eventsSha256"):
            raise CorruptSessionError("export digest mismatch: the events were altered or truncated")
        if session_id is not None:
            header = SessionHeader(
                id=self._check_id(session_id),
                created_at=header.created_at,
                cwd=header.cwd,
                parent_session=header.parent_session,
                is_seeded=header.is_seeded,
                origin=header.origin,
                delegation_depth=header.delegation_depth,
                agent_preset=header.agent_preset,
            )
        self._restore(header, events)
        self._insert(StoredRecord(header, None, events))
        return self.stat(header.id)
