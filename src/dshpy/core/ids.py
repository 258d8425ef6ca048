"""Identifiers: session ids are untrusted input, message ids are minted here.

A session id ends up in file paths and SQL keys, so it is checked against one
narrow pattern before any backend sees it; the check is the only line between a
caller's string and the filesystem.
"""

from __future__ import annotations

import re
import uuid

from dshpy.errors import InvalidSessionIdError

__all__ = ["SESSION_ID_PATTERN", "check_session_id", "new_message_id", "new_session_id"]

SESSION_ID_PATTERN = re.compile(r"[A-Za-z0-9._-]{1,128}")
"""Accepted session ids: 1–128 of ``A-Z a-z 0-9 . _ -``, and never ``.`` or ``..``."""


def check_session_id(session_id: object) -> str:
    """Return ``session_id`` if it is a safe id, else raise :class:`InvalidSessionIdError`."""
    if not isinstance(session_id, str):
        raise InvalidSessionIdError(f"session id must be a string, got {type(session_id).__name__}")
    if SESSION_ID_PATTERN.fullmatch(session_id) is None or session_id in (".", ".."):
        shown = session_id if len(session_id) <= 40 else session_id[:40] + "…"
        raise InvalidSessionIdError(
            f"invalid session id {shown!r}: use 1-128 characters from A-Z a-z 0-9 . _ - (not '.' or '..')"
        )
    return session_id


def new_session_id() -> str:
    """A fresh id in the form dsh's SDK mints: ``session-<32 hex digits>``."""
    return f"session-{uuid.uuid4().hex}"


def new_message_id() -> str:
    """A fresh message id (a UUID v4, as dsh mints them)."""
    return str(uuid.uuid4())
