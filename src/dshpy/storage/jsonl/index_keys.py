"""Session ids as the search sidecar's SQLite text columns can hold them.

dsh's JSONL root holds any session id, half an emoji (a lone UTF-16 surrogate)
included, but SQLite text is UTF-8 and cannot store such a string. The sidecar keys
those sessions by ``/`` plus the hex of the id's UTF-16 code units instead: no valid
id starts with ``/`` (an absolute path is refused), so a key never collides with an
id stored as itself, and every other id keeps its own readable key.
"""

from __future__ import annotations

__all__ = ["id_of_key", "index_key", "optional_key"]

_MARK = "/"


def index_key(session_id: str) -> str:
    """The sidecar's key for ``session_id``: the id itself unless UTF-8 cannot encode it."""
    try:
        session_id.encode("utf-8")
    except UnicodeEncodeError:
        return _MARK + session_id.encode("utf-16-le", "surrogatepass").hex()
    return session_id


def optional_key(session_id: str | None) -> str | None:
    """:func:`index_key` of an optional id (a header's parent)."""
    return None if session_id is None else index_key(session_id)


def id_of_key(key: str) -> str:
    """The session id a sidecar key stands for (the inverse of :func:`index_key`)."""
    if key.startswith(_MARK):
        return bytes.fromhex(key[1:]).decode("utf-16-le", "surrogatepass")
    return key
