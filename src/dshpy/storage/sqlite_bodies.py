"""How the session database stores an event's body: zstd with a dictionary trained from the store's own events.

An event's JSON repeats itself across events (keys, ids, the brackets every turn has)
and within one (an answer's text is in its message, its streamed deltas and its
``block-end`` chunk: dsh v4's wire shape), so the ``events`` table keeps each body as
one of:

* plain JSON, as every body was up to schema v5 (it starts with ``{``): what a body
  too small to gain from compression, or stored before this format, stays;
* ``0x00``, a ULEB128 dictionary number, then a zstd frame (level 3, its
  decompressed size in the frame header, no checksum of its own: the row's CRC covers the JSON): number 0 is no
  dictionary, any other number is a row of ``body_dictionaries``.

A store trains its dictionary once, from its own first events, when it holds enough of
them (:meth:`EventBodies.train`, inside a write transaction, so two writers never both
train); until then bodies big enough to gain are compressed alone. Dictionaries are
never replaced or deleted: each is a versioned row with a CRC-32, and a body names the
one it needs, so every body ever written stays readable.

The row's CRC-32 is over the decompressed JSON (what :func:`~dshpy.storage.checksum.event_row_crc`
always covered), so recompressing a row keeps its checksum, and a damaged compressed
body fails to decompress or fails its checksum: either way it is reported, never
served. :meth:`EventBodies.decode` is the one place a stored body is turned back into
JSON, for the read path and for the SQL function the full-text index extracts text with.
"""

from __future__ import annotations

import sqlite3
import threading
import zlib

import zstandard

from dshpy.errors import DshError

__all__ = [
    "DICTIONARY_SCHEMA",
    "BodyError",
    "EventBodies",
    "UnknownDictionary",
    "dictionary_crc",
    "packed_body",
]

DICTIONARY_SCHEMA = (
    "CREATE TABLE body_dictionaries (id INTEGER PRIMARY KEY, dictionary BLOB NOT NULL, crc INTEGER NOT NULL) STRICT"
)

_LEVEL = 3
_TAG = 0x00
_PLAIN = 0x7B  # "{": a JSON object, stored as it was written
_ALONE_FROM = 256
"""Without a dictionary, smaller bodies are stored plain: a zstd frame of its own gains them little or nothing."""
_WITH_DICTIONARY_FROM = 24
_MAX_BODY = 1 << 30
"""A frame claiming a bigger body is damage (no event is a gigabyte): refused before anything is allocated."""

TRAIN_AFTER_EVENTS = 512
"""A store trains its dictionary once it holds this many events (enough of its own to learn from)."""
_SAMPLE_EVENTS = 1024
_DICTIONARY_SIZE = 32 * 1024


class BodyError(DshError, ValueError):
    """A stored body that is not one this module writes (damage): the caller names the row."""


class UnknownDictionary(BodyError):
    """A body compressed with a dictionary this codec has not read (yet): :meth:`EventBodies.load`, then retry."""

    def __init__(self, number: int) -> None:
        super().__init__(f"it needs compression dictionary {number}, which this store does not hold")
        self.number = number


def _params() -> zstandard.ZstdCompressionParameters:
    return zstandard.ZstdCompressionParameters.from_level(
        _LEVEL,
        write_content_size=True,
        write_checksum=False,
        write_dict_id=False,
    )


def _uleb128(value: int) -> bytes:
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _read_uleb128(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data) or shift > 28:
            raise BodyError("its dictionary number is cut short")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
        shift += 7


def dictionary_crc(number: int, dictionary: bytes) -> int:
    """The checksum of one ``body_dictionaries`` row."""
    return zlib.crc32(dictionary, zlib.crc32(b"%d\x00" % number))


_ALONE = zstandard.ZstdCompressor(compression_params=_params())
_ALONE_LOCK = threading.Lock()


def packed_body(body: bytes) -> bytes:
    """``body`` compressed alone (no dictionary) when that makes it smaller; the SQL function schema v6's
    migration stores existing rows with. A body that is not a JSON object (damage) is always framed, so its
    exact bytes come back and its checksum still reports it."""
    if type(body) is not bytes:
        return body  # a damaged record header: left exactly as it is, and reported when read
    if body[:1] == b"{" and len(body) < _ALONE_FROM:
        return body
    with _ALONE_LOCK:
        framed = bytes((_TAG, 0)) + _ALONE.compress(body)
    return framed if len(framed) < len(body) or body[:1] != b"{" else body


class EventBodies:
    """One store's body codec: the dictionary it writes with, and every dictionary it has read with."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._decoders: dict[int, zstandard.ZstdDecompressor] = {
            0: zstandard.ZstdDecompressor()
        }
        self._writer: tuple[bytes, zstandard.ZstdCompressor] | None = None
        """The newest dictionary's body prefix and compressor; ``None`` until the store has one."""

    # -- writing -------------------------------------------------------------------------

    def encode(self, body: bytes) -> bytes:
        """The stored form of one event's JSON (never larger than the JSON itself)."""
        writer = self._writer
        if writer is None:
            return packed_body(body) if len(body) >= _ALONE_FROM else body
        if len(body) < _WITH_DICTIONARY_FROM:
            return body
        prefix, compressor = writer
        with self._lock:
            framed = prefix + compressor.compress(body)
        return framed if len(framed) < len(body) else body

    @property
    def has_dictionary(self) -> bool:
        return self._writer is not None

    def load(self, db: sqlite3.Connection | sqlite3.Cursor) -> None:
        """Read the dictionaries this codec does not know yet (every one is kept; the newest is written with)."""
        known = max(self._decoders)
        rows = db.execute(
            "SELECT id, dictionary, crc FROM body_dictionaries WHERE id > ? ORDER BY id", (known,)
        ).fetchall()
        for number, dictionary, crc in rows:
            self._adopt(number, dictionary, crc)

    def _adopt(self, number: int, dictionary: bytes, crc: int) -> None:
        if type(dictionary) is not bytes or type(crc) is not int or dictionary_crc(number, dictionary) != crc:
            raise BodyError(f"compression dictionary {number} is damaged (checksum mismatch)")
        data = zstandard.ZstdCompressionDict(dictionary, dict_type=zstandard.DICT_TYPE_FULLDICT)
        decoder = zstandard.ZstdDecompressor(dict_data=data)
        compressor = zstandard.ZstdCompressor(dict_data=data, compression_params=_params())
        with self._lock:
            self._decoders[number] = decoder
            if self._writer is None or number >= max(self._decoders):
                self._writer = (bytes((_TAG,)) + _uleb128(number), compressor)

    def train(self, db: sqlite3.Connection | sqlite3.Cursor) -> None:
        """Inside the caller's write transaction: store a dictionary trained from the store's first events, unless
        the store has one already (another writer trained first) or holds too few events to learn from.

        Nothing is adopted here: the caller calls :meth:`load` once the transaction has
        committed, so no body is ever written with a dictionary that was rolled back.
        """
        if db.execute("SELECT 1 FROM body_dictionaries LIMIT 1").fetchone() is not None:
            return
        (count,) = db.execute("SELECT count(*) FROM (SELECT 1 FROM events LIMIT ?)", (TRAIN_AFTER_EVENTS,)).fetchone()
        if count < TRAIN_AFTER_EVENTS:
            return
        samples: list[bytes | bytearray | memoryview] = []
        for (body,) in db.execute("SELECT body FROM events LIMIT ?", (_SAMPLE_EVENTS,)).fetchall():
            try:
                samples.append(self.decode(body))
            except BodyError:
                continue  # a damaged row teaches nothing; reading it reports it
        try:
            trained = zstandard.train_dictionary(_DICTIONARY_SIZE, samples, k=1024, d=8, level=_LEVEL)
        except zstandard.ZstdError:
            return  # too little to learn from: bodies stay compressed alone
        dictionary = trained.as_bytes()
        number = 1
        db.execute(
            "INSERT INTO body_dictionaries (id, dictionary, crc) VALUES (?, ?, ?)",
            (number, dictionary, dictionary_crc(number, dictionary)),
        )

    # -- reading -------------------------------------------------------------------------

    def decode(self, stored: bytes) -> bytes:
        """The event JSON a stored body holds; :class:`BodyError` for one this format never writes.

        A dictionary this codec has not read yet (trained by another connection) must be
        loaded first (:meth:`load`): :meth:`number_of` tells which one a body needs.
        """
        if not stored or stored[0] == _PLAIN:
            return stored
        if stored[0] != _TAG:
            raise BodyError("it is neither JSON nor a compressed body")
        number, at = _read_uleb128(stored, 1)
        decoder = self._decoders.get(number)
        if decoder is None:
            raise UnknownDictionary(number)
        frame = stored[at:]
        try:
            size = zstandard.frame_content_size(frame)
            if size < 0 or size > _MAX_BODY:  # no size recorded (we always record it), or an impossible one
                raise BodyError(f"its frame claims {size} bytes")
            with self._lock:
                return decoder.decompress(frame)
        except zstandard.ZstdError as error:
            raise BodyError(f"it does not decompress ({error})") from None
