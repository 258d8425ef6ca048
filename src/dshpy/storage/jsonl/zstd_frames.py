"""Zstandard frames as dsh's JSONL backend uses them: one checksummed frame per durable batch.

A compressed session log is a plain concatenation of independent frames. To tell a
crash-cut final frame (recoverable) from damage inside a complete one (corruption),
:func:`scan_frames` walks the frame and block headers without decompressing, exactly
like dsh's ``scanZstdFrames``: bad magic, a reserved header bit or a reserved block
type is structural damage; running out of bytes inside the last frame is a *possibly*
torn tail, reported by its start offset.

One damaged header byte can make a committed frame look cut (a block size grown past
the end of the file, a cleared last-block flag), so before a caller drops that tail,
:func:`check_torn` demands proof: nothing decodable may follow it, and its bytes must
not read as a complete, checksum-verified frame once one structural field (the frame
descriptor or one block header) is taken as damaged.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import zstandard

from dshpy.errors import DshError

__all__ = [
    "ZSTD_MAGIC",
    "FrameScan",
    "ZstdFrameError",
    "check_torn",
    "compress_frame",
    "decompress_frame",
    "decompress_prefix",
    "scan_frames",
]

ZSTD_MAGIC = 0xFD2FB528
_MAGIC_BYTES = ZSTD_MAGIC.to_bytes(4, "little")
_LEVEL = 3  # zstd's default level, which dsh uses
_BLOCK_MAX = 128 * 1024  # a block's payload never exceeds this (zstd's Block_Maximum_Size)
_CHECKSUM = 4
_COMPRESSED, _RAW = 2, 0


class ZstdFrameError(DshError, ValueError):
    """A structurally complete frame is damaged (bad header, checksum or data)."""


@dataclass(frozen=True, slots=True)
class FrameScan:
    """Complete frames as ``(start, end)`` byte ranges, and where an incomplete final frame starts.

    An incomplete final frame is only *possibly* torn: :func:`check_torn` decides.
    """

    frames: list[tuple[int, int]]
    torn_start: int | None = None


def scan_frames(buffer: bytes, max_frames: int | None = None) -> FrameScan:
    """Locate complete frames without decompressing them (at most ``max_frames``).

    Raises :class:`ZstdFrameError` for invalid structure (trailing bytes that cannot
    begin a frame included); EOF inside a frame ends the scan with ``torn_start`` set
    to that frame's first byte.
    """
    frames: list[tuple[int, int]] = []
    size = len(buffer)
    offset = 0
    while offset < size:
        start = offset
        if size - offset < 4:
            if not _MAGIC_BYTES.startswith(buffer[offset:]):
                raise ZstdFrameError(f"{size - offset} trailing bytes at byte {offset} cannot begin a zstd frame")
            return FrameScan(frames, start)
        if int.from_bytes(buffer[offset : offset + 4], "little") != ZSTD_MAGIC:
            raise ZstdFrameError(f"invalid frame magic at byte {offset}")
        offset += 4
        if offset == size:
            return FrameScan(frames, start)
        descriptor = buffer[offset]
        offset += 1
        if descriptor & 0x18:
            raise ZstdFrameError(f"reserved frame-header bit at byte {offset - 1}")
        content_size_flag = descriptor >> 6
        single_segment = bool(descriptor & 0x20)
        has_checksum = bool(descriptor & 0x04)
        dictionary_flag = descriptor & 0x03
        dictionary_bytes = 4 if dictionary_flag == 3 else dictionary_flag
        content_size_bytes = (1 if single_segment else 0) if content_size_flag == 0 else 1 << content_size_flag
        header_rest = (0 if single_segment else 1) + dictionary_bytes + content_size_bytes
        if size - offset < header_rest:
            return FrameScan(frames, start)
        offset += header_rest
        while True:
            if size - offset < 3:
                return FrameScan(frames, start)
            block_header = int.from_bytes(buffer[offset : offset + 3], "little")
            offset += 3
            block_type = (block_header >> 1) & 3
            if block_type == 3:
                raise ZstdFrameError(f"reserved block type at byte {offset - 3}")
            payload = 1 if block_type == 1 else block_header >> 3
            if size - offset < payload:
                return FrameScan(frames, start)
            offset += payload
            if block_header & 1:
                break
        if has_checksum:
            if size - offset < 4:
                return FrameScan(frames, start)
            offset += 4
        frames.append((start, offset))
        if max_frames is not None and len(frames) >= max_frames:
            break
    return FrameScan(frames)


def _header_size(descriptor: int) -> int:
    """Bytes of the frame header after the magic (descriptor included)."""
    content_size_flag = descriptor >> 6
    single_segment = bool(descriptor & 0x20)
    dictionary_flag = descriptor & 0x03
    dictionary_bytes = 4 if dictionary_flag == 3 else dictionary_flag
    content_size_bytes = (1 if single_segment else 0) if content_size_flag == 0 else 1 << content_size_flag
    return 1 + (0 if single_segment else 1) + dictionary_bytes + content_size_bytes


def _block_header(payload: int, block_type: int, *, last: bool) -> bytes:
    return ((payload << 3) | (block_type << 1) | int(last)).to_bytes(3, "little")


def _chains_to(frame: bytes | bytearray, offset: int, end: int) -> bool:
    """Whether the block headers from ``offset`` lead exactly to ``end`` with the last one flagged."""
    while offset + 3 <= end:
        header = int.from_bytes(frame[offset : offset + 3], "little")
        block_type = (header >> 1) & 3
        if block_type == 3:
            return False
        offset += 3 + (1 if block_type == 1 else header >> 3)
        if header & 1:
            return offset == end
    return False


def _decodes(frame: bytes | bytearray) -> bool:
    try:
        decompress_frame(bytes(frame))
    except ZstdFrameError:
        return False
    return True


def _complete_under_one_damaged_field(frame: bytes) -> bool:
    """Whether ``frame`` (cut-looking) is a whole checksummed frame with one header field damaged.

    A real tear leaves a prefix of a frame; its last four bytes then match the content
    checksum of a re-read of its blocks only by chance (about 2**-32 per reading tried).
    """
    end = len(frame) - _CHECKSUM
    size = _header_size(frame[4])
    # The descriptor is intact and one block header is damaged: re-derive that block's extent.
    offset = 4 + size
    while offset + 3 <= end:
        for stop in range(min(end, offset + 3 + _BLOCK_MAX), offset + 3, -1):
            last = stop == end
            if not last and not _chains_to(frame, stop, end):
                continue
            for block_type in (_COMPRESSED, _RAW):
                candidate = bytearray(frame)
                candidate[offset : offset + 3] = _block_header(stop - offset - 3, block_type, last=last)
                if _decodes(candidate):
                    return True
        header = int.from_bytes(frame[offset : offset + 3], "little")
        block_type = (header >> 1) & 3
        if block_type == 3 or header & 1:
            break
        offset += 3 + (1 if block_type == 1 else header >> 3)
    # The block headers are intact and the descriptor is damaged: try every descriptor a
    # checksummed, dictionary-less frame can have.
    for content_size_flag in range(4):
        for single_segment in (0x20, 0):
            descriptor = (content_size_flag << 6) | single_segment | 0x04
            if descriptor == frame[4]:
                continue
            offset = 4 + _header_size(descriptor)
            if _chains_to(frame, offset, end):
                candidate = bytearray(frame)
                candidate[4] = descriptor
                if _decodes(candidate):
                    return True
    return False


def _complete_frame_at(buffer: bytes, offset: int) -> int | None:
    """The end of a complete, checksummed frame that decodes at ``offset``, if there is one."""
    if len(buffer) - offset < 5 or not buffer[offset + 4] & 0x04:
        return None
    try:
        found = scan_frames(buffer[offset:], max_frames=1).frames
    except ZstdFrameError:
        return None
    if not found or not _decodes(buffer[offset : offset + found[0][1]]):
        return None
    return offset + found[0][1]


def check_torn(buffer: bytes, start: int) -> None:
    """Raise :class:`ZstdFrameError` unless the incomplete frame at ``start`` is provably torn.

    Torn means a crash cut the last write short: the frame runs to the end of the file,
    no complete frame follows inside what it claims, and no re-reading of one damaged
    descriptor or block header makes it (or its bytes up to a later frame's magic, the
    case of a damaged frame followed by a really torn one) a complete frame whose
    checksum matches.
    """
    position = buffer.find(_MAGIC_BYTES, start + 1)
    while position >= 0:
        if _complete_frame_at(buffer, position) is not None:
            raise ZstdFrameError(
                f"it runs past the end of the file, but a complete frame at byte {position} follows it "
                "(damaged frame or block header)"
            )
        if position - start > 4 + _CHECKSUM and _complete_under_one_damaged_field(buffer[start:position]):
            raise ZstdFrameError(  # a damaged committed frame, and then a frame a crash really cut
                f"it runs past the end of the file, but its bytes up to the frame at byte {position} are a complete "
                "frame whose checksum matches once one header field is read as damaged"
            )
        position = buffer.find(_MAGIC_BYTES, position + 1)
    frame = buffer[start:]
    if len(frame) > 4 + _CHECKSUM and _complete_under_one_damaged_field(frame):
        raise ZstdFrameError(
            "it runs past the end of the file, but its bytes are a complete frame whose checksum matches "
            "once one header field is read as damaged"
        )


class _Codecs(threading.local):
    """zstandard contexts are not thread-safe; each thread keeps its own pair."""

    def __init__(self) -> None:
        self.compressor = zstandard.ZstdCompressor(level=_LEVEL, write_checksum=True)
        self.decompressor = zstandard.ZstdDecompressor()


_codecs = _Codecs()


def compress_frame(plaintext: bytes) -> bytes:
    """One independent frame with the content checksum on (``ZSTD_c_checksumFlag=1``)."""
    return _codecs.compressor.compress(plaintext)


def decompress_frame(frame: bytes) -> bytes:
    """Decompress one structurally complete frame, verifying its checksum."""
    decoder = _codecs.decompressor.decompressobj()
    try:
        plaintext = decoder.decompress(frame)
    except zstandard.ZstdError as error:
        raise ZstdFrameError(str(error)) from None
    if not decoder.eof:
        raise ZstdFrameError("frame ended before its last block was decoded")
    return plaintext


def decompress_prefix(partial: bytes) -> bytes:
    """Whatever plaintext the complete blocks of a torn frame yield (``b""`` if none).

    The frame's checksum cannot be verified; callers keep only complete records. A
    complete block that does not decode was damaged, not cut: :class:`ZstdFrameError`.
    """
    decoder = _codecs.decompressor.decompressobj()
    try:
        return decoder.decompress(partial)
    except zstandard.ZstdError as error:
        raise ZstdFrameError(str(error)) from None
