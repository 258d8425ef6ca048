"""An exclusive ``flock`` on the file at a path, taken without waiting: the core of every file-based writer lock.

The SQLite lease (:class:`~dshpy.storage.lease.FileLease`) and a JSONL session's
writer lock (:class:`~dshpy.storage.jsonl.locking.SessionLock`) both rest on it. The
kernel drops an ``flock`` when its descriptor closes or its process dies, so a crashed
holder needs no expiry. A lock names an inode, not a path: a holder may unlink its file
on release, or someone may replace it, and a lock on the unlinked inode would exclude
nobody. So after locking, the taker checks that its inode is still the file at the path,
and opens the path afresh if not. How the file is opened and how a refusal is worded
differ per caller, so the caller passes those in.
"""

from __future__ import annotations

import errno
import fcntl
import os
from collections.abc import Callable
from pathlib import Path

__all__ = ["BUSY_ERRNOS", "Inode", "inode_at", "take_file_lock"]

Inode = tuple[int, int]
"""``(st_dev, st_ino)``: what a lock is really held on."""

BUSY_ERRNOS = frozenset({errno.EAGAIN, errno.EWOULDBLOCK, errno.EACCES})
"""Another descriptor holds the lock (``EACCES`` where ``flock`` is emulated with ``fcntl`` locks)."""


def inode_at(path: Path, *, follow_symlinks: bool) -> Inode | None:
    """The inode the path names now, ``None`` when nothing is there."""
    try:
        current = os.stat(path, follow_symlinks=follow_symlinks)
    except FileNotFoundError:
        return None
    return current.st_dev, current.st_ino


def take_file_lock(
    path: Path,
    open_file: Callable[[], int],
    *,
    attempts: int,
    follow_symlinks: bool,
    busy: Callable[[int], Exception],
    failed: Callable[[OSError], Exception],
) -> tuple[int, Inode] | None:
    """Lock the file at ``path``: the held descriptor and its inode, or ``None`` if it kept being replaced.

    ``open_file`` opens (creating) the file, raising the caller's error when it cannot.
    While another descriptor holds the lock, ``busy(fd)`` is raised; it gets the open
    descriptor, so it can read what the holder recorded there. Any other ``flock``
    failure raises ``failed(error)``. Each of ``attempts`` rounds that locks an inode no
    longer at the path closes it and opens the path again.
    """
    for _ in range(attempts):
        fd = open_file()
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            try:
                refusal = busy(fd) if error.errno in BUSY_ERRNOS else failed(error)
            finally:
                os.close(fd)
            raise refusal from None
        held = os.fstat(fd)
        inode = (held.st_dev, held.st_ino)
        if inode_at(path, follow_symlinks=follow_symlinks) == inode:
            return fd, inode
        os.close(fd)
    return None
