"""Row checksums for database backends: CRC-32 over exactly the values a row stores.

SQLite checks its own page structure only loosely: a flipped byte inside a row's
value reads back as a different, perfectly valid value. Each row therefore carries
the CRC-32 (``zlib.crc32``: in the standard library, about a microsecond per event) of
its columns, and readers recompute it before they trust the row. A CRC is not a
defence against deliberate tampering, only against damage, which is all it is for.

Every column takes part, separated so that moving bytes from one column into the
next changes the sum; ``None`` and ``""`` are told apart. The verifiers below are what
every database backend calls on the rows it reads, so a damaged row is reported the
same way (and in the same words) whichever backend stored it.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable

import orjson

from dshpy.core.events import SessionEvent, decode_stored
from dshpy.errors import CorruptSessionError, DshError
from dshpy.storage.base import parse_stored_event

__all__ = [
    "EventVerifier",
    "cache_row_crc",
    "check_session_row",
    "decoded_body",
    "event_row_crc",
    "event_verifier",
    "lost_rows",
    "session_row_crc",
]

_NONE = type(None)
_SESSION_ROW_TYPES = ((str,), (str,), (int,), (str, _NONE), (str, _NONE), (str, _NONE), (int,), (int,))
"""Python types of ``check_session_row``'s values: SQLite checks a STRICT table only as it is written, so a
damaged record header can hand back any storage class (a text column read as an integer)."""


def _text(value: str | None) -> bytes:
    return b"\x01" if value is None else b"\x02" + value.encode()


def event_row_crc(session_id: str, seq: int, body: bytes) -> int:
    """The checksum of one ``events`` row: its key and the stored event JSON (``body``).

    The body holds the whole event (type, seq, time, data); the row's ``type`` and
    ``time`` columns are copies for SQL filtering, which readers that use them compare
    with the checked body. Leaving them out keeps a replay from decoding two more
    columns per row (it cost more than the CRC itself).
    """
    return zlib.crc32(body, zlib.crc32(b"%s\x00%d\x00" % (session_id.encode(), seq)))


def session_row_crc(
    session_id: str,
    header: str,
    created_at: int,
    cwd: str | None,
    parent_session: str | None,
    base_id: str | None,
    base_count: int,
) -> int:
    """The checksum of one ``sessions`` row: the header record and every column derived from it or from the fork."""
    parts = b"\x00".join(
        (
            _text(session_id),
            _text(header),
            b"%d" % created_at,
            _text(cwd),
            _text(parent_session),
            _text(base_id),
            b"%d" % base_count,
        )
    )
    return zlib.crc32(parts)


def cache_row_crc(session_id: bytes, key: bytes, state_version: int, seq: int, state: bytes, identity: bytes) -> int:
    """The checksum of one ``projection_cache`` row (a damaged row is dropped and folded again, never trusted).

    Over the stored bytes of its text columns: readers fetch them as blobs, so a row whose
    text is no longer UTF-8 is just a damaged row, not an error that fails a whole listing.
    """
    head = b"%s\x00%s\x00%d\x00%d\x00%s\x00" % (session_id, key, state_version, seq, identity)
    return zlib.crc32(state, zlib.crc32(head))


def decoded_body(session_id: str, seq: object, body: object, decode: Callable[[bytes], bytes]) -> bytes:
    """The JSON a stored (possibly compressed) body holds; a body ``decode`` refuses (``ValueError``) is damage
    like any other, reported naming the row."""
    if type(body) is not bytes:  # a damaged record header
        raise CorruptSessionError(f'session "{session_id}" event {seq!r} is damaged (a column of the wrong type)')
    try:
        return decode(body)
    except ValueError as error:
        raise CorruptSessionError(f'session "{session_id}" event {seq} is damaged ({error})') from None


EventVerifier = Callable[[int, bytes, int, bool], SessionEvent]
"""``(seq, body, crc, cleared) -> event``: an ``events`` row's event, once its checksum proves the row is as written."""


def event_verifier(session_id: str) -> EventVerifier:
    """The checker of one session's ``events`` rows: the event a row holds (its body as JSON, UTF-8), once its
    checksum proves the row is as written; ``cleared`` as for :func:`~dshpy.storage.base.parse_stored_event`.

    A replay checks tens of thousands of rows of one session; CRC-32 continues from a
    running value, so the session id's part is summed once instead of per row.
    """
    key_crc = zlib.crc32(b"%s\x00" % session_id.encode())

    def verified(seq: int, body: bytes, crc: int, cleared: bool) -> SessionEvent:
        if type(seq) is not int or type(body) is not bytes or type(crc) is not int:  # a damaged record header
            raise CorruptSessionError(f'session "{session_id}" event {seq!r} is damaged (a column of the wrong type)')
        if zlib.crc32(body, zlib.crc32(b"%d\x00" % seq, key_crc)) != crc:
            raise CorruptSessionError(f'session "{session_id}" event {seq} is damaged (checksum mismatch)')
        try:  # parse_stored_event's common case, inlined (one call less per replayed row)
            event = decode_stored(orjson.loads(body), body, cleared)
        except (orjson.JSONDecodeError, DshError):
            return parse_stored_event(session_id, seq, body, cleared)  # escaped surrogates, or the worded error
        if event.seq != seq:
            return parse_stored_event(session_id, seq, body, cleared)  # which says what the row holds
        return event

    return verified


def check_session_row(
    session_id: str,
    header: str,
    created_at: int,
    cwd: str | None,
    parent_session: str | None,
    base_id: str | None,
    base_count: int,
    crc: int,
) -> None:
    """Raise :class:`CorruptSessionError` unless a ``sessions`` row's columns are the ones written."""
    values = (session_id, header, created_at, cwd, parent_session, base_id, base_count, crc)
    if not all(type(value) in allowed for value, allowed in zip(values, _SESSION_ROW_TYPES, strict=True)) or (
        session_row_crc(session_id, header, created_at, cwd, parent_session, base_id, base_count) != crc
    ):
        raise CorruptSessionError(f'stored header of session "{session_id}" is damaged (checksum mismatch)')


def lost_rows(session_id: str, stored: int, recorded: int) -> str:
    """The message for a log whose rows disagree with the next seq its session row recorded."""
    return (
        f'session "{session_id}" is damaged: its log holds events up to seq {stored - 1} but recorded '
        f"{recorded} events (rows were lost, or the session row is damaged)"
    )
