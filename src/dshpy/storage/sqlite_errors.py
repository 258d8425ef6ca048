"""The one place where ``sqlite3`` and file-system errors become dshpy store errors.

Callers of a store catch :class:`~dshpy.StoreError` branches by what they can do
about them (DESIGN.md §9), so no raw ``sqlite3.Error``, ``OSError`` or
``UnicodeDecodeError`` may leave the SQLite backend. SQLite reports the cause as a
result code; the primary code (low byte) decides the branch:

* ``SQLITE_FULL`` (and ``ENOSPC``/``EDQUOT``) → :class:`~dshpy.StoreFullError`: the
  transaction was rolled back, nothing of the batch is stored;
* ``SQLITE_READONLY``/``SQLITE_PERM`` (and ``EROFS``/``EACCES``) →
  :class:`~dshpy.ReadOnlyStoreError`: reads still work;
* ``SQLITE_CORRUPT``/``SQLITE_NOTADB``, and text that is not UTF-8 →
  :class:`~dshpy.CorruptSessionError`;
* ``SQLITE_BUSY``/``SQLITE_LOCKED`` (the busy timeout ran out), ``SQLITE_CANTOPEN``,
  ``SQLITE_IOERR`` → :class:`~dshpy.StoreUnavailableError`;
* anything else → :class:`~dshpy.StoreError` with SQLite's own message.
"""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path
from types import TracebackType

from dshpy.errors import (
    CorruptSessionError,
    ReadOnlyStoreError,
    StoreError,
    StoreFullError,
    StoreUnavailableError,
)

__all__ = ["SqliteErrors", "store_error"]

_FULL = 13
_READONLY = 8
_PERM = 3
_CORRUPT = 11
_NOTADB = 26
_BUSY = 5
_LOCKED = 6
_CANTOPEN = 14
_IOERR = 10

_UNAVAILABLE = {
    _BUSY: "is busy (another process holds it)",
    _LOCKED: "is locked",
    _CANTOPEN: "cannot be opened",
    _IOERR: "had an I/O error",
}


def store_error(error: BaseException, path: Path, doing: str) -> StoreError:
    """The dshpy error for ``error``, raised while ``doing`` (a short phrase: "appending to session x")."""
    if isinstance(error, StoreError):
        return error
    if isinstance(error, UnicodeDecodeError):
        return CorruptSessionError(f"{path} is damaged ({doing}): stored text is not UTF-8")
    if isinstance(error, OSError):
        return _os_error(error, path, doing)
    if isinstance(error, sqlite3.Error):
        return _sqlite_error(error, path, doing)
    return StoreError(f"{path}: {doing} failed: {error}")


def _sqlite_error(error: sqlite3.Error, path: Path, doing: str) -> StoreError:
    code = getattr(error, "sqlite_errorcode", None)
    primary = None if code is None else code & 0xFF
    if primary == _FULL:
        return StoreFullError(
            f"{path}: the disk is full ({doing}); nothing of this write was stored — free space and retry"
        )
    if primary in (_READONLY, _PERM):
        return ReadOnlyStoreError(f"{path} is read-only ({doing} needs write access): {error}")
    if primary in (_CORRUPT, _NOTADB) or (primary is None and "decode" in str(error)):
        return CorruptSessionError(f"{path} is damaged ({doing}): {error}")
    if primary in _UNAVAILABLE:
        return StoreUnavailableError(f"{path} {_UNAVAILABLE[primary]} ({doing}): {error}")
    return StoreError(f"{path}: {doing} failed: {error}")


def _os_error(error: OSError, path: Path, doing: str) -> StoreError:
    reason = error.strerror or str(error)
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        return StoreFullError(f"{path}: the disk is full ({doing}); nothing of this write was stored")
    if error.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return ReadOnlyStoreError(f"{path} is read-only ({doing} needs write access): {reason}")
    return StoreUnavailableError(f"{path}: {doing} failed: {reason}")


class SqliteErrors:
    """``with SqliteErrors(path, "reading x"):`` — raise the translated error instead of a raw one.

    A plain class rather than ``@contextmanager``: it wraps every read and write, and
    entering it costs nothing but an attribute store.
    """

    __slots__ = ("_doing", "_path")

    def __init__(self, path: Path, doing: str) -> None:
        self._path = path
        self._doing = doing

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, _traceback: TracebackType | None
    ) -> None:
        if error is None or isinstance(error, StoreError):
            return
        if isinstance(error, sqlite3.Error | OSError | UnicodeDecodeError):
            raise store_error(error, self._path, self._doing) from None
