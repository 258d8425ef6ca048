"""Identifiers: session ids are untrusted input, message ids are minted here.

dsh treats a session id as an opaque string and escapes it before it becomes a path
segment (``encodeSegment`` in its JSONL backend: ``~XXXX`` for every UTF-16 code unit
outside ``A-Z a-z 0-9 . _ -``, lone surrogates and control characters included), so
its users have sessions named with spaces, slashes, tabs, any script, even half an
emoji. dshpy reads and writes all of those. What it still refuses, before any backend
sees the id, is what could make an id act as a path instead of a name: ``.`` and
``..`` (also as ``/``- or ``\\``-separated components), an absolute path (a leading
separator or a drive letter), NUL (C strings and PostgreSQL text end there), and more
than 128 characters. dsh itself refuses only the empty id. Every backend that puts an
id into a file name escapes it on top (:func:`dshpy.storage.jsonl.layout.encode_segment`,
the lease files), so the check is the first of two walls, not the only one.
"""

from __future__ import annotations

import re
import uuid

from dshpy.errors import InvalidSessionIdError

__all__ = ["SESSION_ID_PATTERN", "check_session_id", "new_message_id", "new_session_id", "refuse_unencodable_id"]

SESSION_ID_PATTERN = re.compile(r"[A-Za-z0-9._-]{1,128}")
"""The ids dshpy mints and always accepted: plain ASCII names (every such id needs no escaping)."""

MAX_SESSION_ID_LENGTH = 128
_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")
_ABSOLUTE = re.compile(r"[/\\]|[A-Za-z]:")
_SEPARATORS = re.compile(r"[/\\]")


def _problem(session_id: str) -> str | None:
    if not session_id:
        return "it is empty (dsh: sessionId must not be empty)"
    if len(session_id) > MAX_SESSION_ID_LENGTH:
        return f"it is longer than {MAX_SESSION_ID_LENGTH} characters"
    if SESSION_ID_PATTERN.fullmatch(session_id) is not None:
        return None if session_id not in (".", "..") else "it names a directory ('.' or '..')"
    if "\x00" in session_id:
        return "it holds a NUL character"
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
            "no NUL, no absolute path, no '.' or '..' component)"
        )
    return session_id


def refuse_unencodable_id(session_id: str, backend: str) -> None:
    """Refuse, by name, an id with a lone surrogate for a backend that keeps ids in UTF-8 text columns.

    dsh and dshpy's JSONL and memory stores hold such an id (escaped on disk); SQLite
    and PostgreSQL text cannot, and failing later as a ``UnicodeEncodeError`` would not
    say which id or why.
    """
    if _LONE_SURROGATE.search(session_id) is not None:
        shown = session_id if len(session_id) <= 40 else session_id[:40] + "…"
        raise InvalidSessionIdError(
            f"invalid session id {shown!r} for {backend}: it holds a lone UTF-16 surrogate, which a UTF-8 text "
            "column cannot store (dsh's JSONL root and dshpy's jsonl and memory stores can hold it)"
        )


def new_session_id() -> str:
    """A fresh id in the form dsh's SDK mints: ``session-<32 hex digits>``."""
    return f"session-{uuid.uuid4().hex}"


def new_message_id() -> str:
    """A fresh message id (a UUID v4, as dsh mints them)."""
    return str(uuid.uuid4())
