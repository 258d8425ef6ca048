"""Identifiers: session ids are untrusted input, message ids are minted here.

dsh treats a session id as an opaque string and escapes it before it becomes a path
segment (``~XXXX`` for every code unit outside ``A-Z a-z 0-9 . _ -``), so its users
have sessions named with spaces, slashes and any script. dshpy reads and writes all
of those. What it still refuses, before any backend sees the id, is what could make
an id act as a path instead of a name, or make it unprintable: ``.`` and ``..`` (also
as ``/``- or ``\\``-separated components), an absolute path (a leading separator or a
drive letter), control characters (NUL included), lone surrogates, and more than 128
characters. Every backend that puts an id into a file name escapes it on top
(:func:`dshpy.storage.jsonl.layout.encode_segment`, the lease files), so the check
is the first of two walls, not the only one.
"""

from __future__ import annotations

import re
import uuid

from dshpy.errors import InvalidSessionIdError

__all__ = ["SESSION_ID_PATTERN", "check_session_id", "new_message_id", "new_session_id"]

SESSION_ID_PATTERN = re.compile(r"[A-Za-z0-9._-]{1,128}")
"""The ids dshpy mints and always accepted: plain ASCII names (every such id needs no escaping)."""

MAX_SESSION_ID_LENGTH = 128
_FORBIDDEN = re.compile(r"[\x00-\x1f\x7f\ud800-\udfff]")
_ABSOLUTE = re.compile(r"[/\\]|[A-Za-z]:")
_SEPARATORS = re.compile(r"[/\\]")


def _problem(session_id: str) -> str | None:
    if not session_id:
        return "it is empty"
    if len(session_id) > MAX_SESSION_ID_LENGTH:
        return f"it is longer than {MAX_SESSION_ID_LENGTH} characters"
    if SESSION_ID_PATTERN.fullmatch(session_id) is not None:
        return None if session_id not in (".", "..") else "it names a directory ('.' or '..')"
    if _FORBIDDEN.search(session_id) is not None:
        return "it holds a control character or a lone surrogate"
    if _ABSOLUTE.match(session_id) is not None:
        return "it is an absolute path"
    if any(part in (".", "..") for part in _SEPARATORS.split(session_id)):
        return "it has a '.' or '..' path component"
    return None


def check_session_id(session_id: object) -> str:
    """Return ``session_id`` if it is a safe id, else raise :class:`InvalidSessionIdError`."""
    if not isinstance(session_id, str):
        raise InvalidSessionIdError(f"session id must be a string, got {type(session_id).__name__}")
    problem = _problem(session_id)
    if problem is not None:
        shown = session_id if len(session_id) <= 40 else session_id[:40] + "…"
        raise InvalidSessionIdError(
            f"invalid session id {shown!r}: {problem} (ids are 1-{MAX_SESSION_ID_LENGTH} characters; "
            "no control characters, no absolute path, no '.' or '..' component)"
        )
    return session_id


def new_session_id() -> str:
    """A fresh id in the form dsh's SDK mints: ``session-<32 hex digits>``."""
    return f"session-{uuid.uuid4().hex}"


def new_message_id() -> str:
    """A fresh message id (a UUID v4, as dsh mints them)."""
    return str(uuid.uuid4())
