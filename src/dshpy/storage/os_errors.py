"""File-system errors as dshpy store errors, for the backends that keep sessions in files.

A store's caller acts on :class:`~dshpy.StoreError` branches (DESIGN.md §9), never on
an ``errno``, so an ``OSError`` must not leave a store raw. The errno decides the branch:

* ``ENOSPC``/``EDQUOT`` → :class:`~dshpy.StoreFullError`: the write did not happen (the
  caller rolls back any partial bytes before raising); ``EFBIG`` too (the file reached the
  process's or the file system's size limit): the same remedy, room, not a retry;
* ``EROFS``/``EACCES``/``EPERM`` → :class:`~dshpy.ReadOnlyStoreError`: reading still works;
* anything else (``EIO``, a path that became a directory or a symlink loop, …) →
  :class:`~dshpy.StoreUnavailableError` naming the file and the reason, as SQLite's
  ``SQLITE_IOERR`` is: the store cannot serve the request now.

A missing file is usually not an error of the store but an answer (no such session),
so callers that can tell handle ``FileNotFoundError`` before they get here.
"""

from __future__ import annotations

import errno

from dshpy.errors import ReadOnlyStoreError, StoreError, StoreFullError, StoreUnavailableError

__all__ = ["FULL_ERRNOS", "READ_ONLY_ERRNOS", "os_store_error"]

FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
READ_ONLY_ERRNOS = frozenset({errno.EROFS, errno.EACCES, errno.EPERM})


def os_store_error(error: OSError, what: str) -> StoreError:
    """The store error for ``error``, met while doing ``what`` (a phrase naming the session or file)."""
    reason = error.strerror or str(error) or type(error).__name__
    where = f" ({error.filename})" if error.filename else ""
    if error.errno == errno.EFBIG:
        return StoreFullError(f"{what}: the file reached its size limit ({reason}); nothing was written")
    if error.errno in FULL_ERRNOS:
        return StoreFullError(f"{what}: the disk is full ({reason}); nothing was written, free space and retry")
    if error.errno in READ_ONLY_ERRNOS:
        return ReadOnlyStoreError(f"{what}: the store is read-only{where}: {reason}; it can be read but not written")
    return StoreUnavailableError(f"{what}: file-system error{where}: {reason}")
