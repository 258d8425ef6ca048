"""Zstandard frames as dsh's JSONL backend uses them: one checksummed frame per durable batch.

A compressed session log is a plain concatenation of independent frames. To tell a
crash-cut final frame (recoverable) from damage inside a complete one (corruption),
:func:`scan_frames` walks the frame and block headers without decompressing, exactly
like dsh's ``scanZstdFrames``: bad magic, a reserved header bit or a reserved block
type is structural damage; running out of bytes inside the last frame is a torn
tail, reported by its start offset.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import zstandard

__all__ = [
    "ZSTD_MAGIC",
    "FrameScan",
    "ZstdFrameError",
    "compress_frame",
    "decompress_frame",
    "decompress_prefix",
    "scan_frames",
]

ZSTD_MAGIC = 0xFD2FB528
_LEVEL = 3  # zstd's default level, which dsh uses


class ZstdFrameError(ValueError):
    """A structurally complete frame is damaged (bad header, checksum or data)."""


@dataclass(frozen=True, slots=True)
class FrameScan:
    """Complete frames as ``(start, end)`` byte ranges, and where a torn final frame starts."""

    frames: list[tuple[int, int]]
    torn_start: int | None = None


def scan_frames(buffer: bytes, max_frames: int | None = None) -> FrameScan:
    """Locate complete frames without decompressing them (at most ``max_frames``).

    Raises :class:`ZstdFrameError` for invalid structure; EOF inside a frame ends the
    scan with ``torn_start`` set to that frame's first byte.
    """
    frames: list[tuple[int, int]] = []
    size = len(buffer)
    offset = 0
    while offset < size:
        start = offset
        if size - offset < 4:
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

    The frame's checksum cannot be verified; callers keep only complete records.
    """
    decoder = _codecs.decompressor.decompressobj()
    try:
        return decoder.decompress(partial)
    except zstandard.ZstdError:
        return b""
