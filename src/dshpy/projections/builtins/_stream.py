"""Reading what the built-ins need from a packed assistant stream (dsh-v4 §3.4).

A stream is a list of records: ``{"type": "chunk", "time", "chunk"}`` for single
chunks, and runs (``text-chunks``, ``reasoning-chunks``, ``tool-call-chunks``) that
start at ``time0``. Only two facts are read here — when the first record arrived and
which token usage the provider reported last — so nothing is expanded.
"""

from __future__ import annotations

from typing import Any

__all__ = ["first_time", "is_count", "last_usage"]


def is_count(value: Any) -> bool:
    """Whether ``value`` is a usable token or millisecond count: a non-negative int, not a bool."""
    return type(value) is int and value >= 0


def first_time(stream: Any) -> int | None:
    """When the provider's first stream record arrived (epoch ms), or ``None`` if it sent none.

    A ``finish`` chunk is not from the provider when it closes a failed try: the
    runtime writes it when the call fails, so a call that never connected (its stream
    only that chunk) has no first token rather than one at the moment it failed.
    """
    if not isinstance(stream, list) or not stream:
        return None
    record = stream[0]
    if not isinstance(record, dict):
        return None
    if record.get("type") == "chunk":
        chunk = record.get("chunk")
        if isinstance(chunk, dict) and chunk.get("type") == "finish":
            return None  # a stream that starts with its end carried no token
        time = record.get("time")
    else:
        time = record.get("time0")
    return time if type(time) is int else None


def last_usage(stream: Any) -> Any:
    """The ``usage`` object of the stream's last usage chunk, or ``None``.

    Providers may report usage more than once per request (e.g. input tokens at the
    start, output at the end); each report is cumulative, so the last one is the bill.
    Usage chunks sit near the end, so the scan starts there.
    """
    if not isinstance(stream, list):
        return None
    for record in reversed(stream):
        if isinstance(record, dict) and record.get("type") == "chunk":
            chunk = record.get("chunk")
            if isinstance(chunk, dict) and chunk.get("type") == "usage":
                return chunk.get("usage")
    return None
