"""Opaque page cursors: bound to the request that made them, checked before anything is read.

A cursor is ``v1.`` and the URL-safe base64 of a small JSON object: what it pages
(``list`` or ``search``), a fingerprint of the request (filters, sort, query — not
the page size, which may change between pages) and the position to continue from.
Callers must treat it as opaque; it is not signed, because it only ever selects what
its bearer could ask for directly. A cursor that does not decode, or was made for
another request, is ``SESSION_QUERY_INVALID_CURSOR``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from typing import Any

import orjson

from dshpy.core.json import JsonValue
from dshpy.query.errors import INVALID_CURSOR, InvalidQueryError

__all__ = ["decode_cursor", "encode_cursor", "fingerprint"]

_PREFIX = "v1."


def fingerprint(request: Any) -> str:
    """A short digest of a request's defining values (plain JSON), stable across processes."""
    try:
        encoded = orjson.dumps(request, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # a lone surrogate (a dsh session id may hold one): escaped, as JSON.stringify does
        encoded = json.dumps(request, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(encoded).hexdigest()[:24]


def encode_cursor(kind: str, request: str, position: JsonValue) -> str:
    """The cursor continuing request ``request`` (its :func:`fingerprint`) of ``kind`` at ``position``."""
    raw = orjson.dumps({"k": kind, "f": request, "p": position})
    return _PREFIX + base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: Any, kind: str, request: str) -> Any:
    """The position ``cursor`` holds, after checking it continues this very request."""
    if not isinstance(cursor, str) or not cursor.startswith(_PREFIX):
        raise InvalidQueryError(INVALID_CURSOR, "the cursor is not one this service issued")
    body = cursor[len(_PREFIX) :]
    try:
        decoded = orjson.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    except (binascii.Error, ValueError):
        raise InvalidQueryError(INVALID_CURSOR, "the cursor is damaged (it does not decode)") from None
    if not isinstance(decoded, dict) or decoded.get("k") != kind or "p" not in decoded:
        raise InvalidQueryError(INVALID_CURSOR, f"the cursor does not continue a {kind} request")
    if decoded.get("f") != request:
        raise InvalidQueryError(
            INVALID_CURSOR, f"the cursor continues another {kind} request (different filters, sort or query)"
        )
    return decoded["p"]
