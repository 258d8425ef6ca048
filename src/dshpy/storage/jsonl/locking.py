"""A JSONL session's writer lock: dsh's ``session.lock``, held with ``flock`` by the one writer.

dsh and dshpy exclude each other through the same file, so its name and its
non-blocking ``flock`` are part of the on-disk contract (dsh-v4 §2.5). Readers never
lock. The file records no holder (dsh writes none), which is why a busy session names
the lock file instead of a process.
"""

from __future__ import annotations

import os
from pathlib import Path

from dshpy.errors import SessionBusyError, SessionNotFound
from dshpy.storage.file_lock import take_file_lock
from dshpy.storage.jsonl.layout import LOCK_FILENAME
from dshpy.storage.os_errors import os_store_error

__all__ = ["SessionLock"]

_LOCK_ATTEMPTS = 3
"""How often a lock file found replaced after locking is opened again (as in dsh)."""


class SessionLock:
    """A held ``flock`` on a session's ``session.lock``; closing the descriptor releases it."""

    __slots__ = ("_fd", "path")

    def __init__(self, fd: int, path: Path) -> None:
        self._fd = fd
        self.path = path

    @classmethod
    def try_acquire(cls, session_dir: Path, busy: str) -> SessionLock:
        """Take the lock without waiting; ``SessionBusyError(busy)`` while another descriptor holds it.

        A lock names an inode, so after locking we check the inode is still the file at
        the path (a deleted and recreated lock file would make our lock meaningless).
        """
        path = session_dir / LOCK_FILENAME

        def open_lock() -> int:
            try:
                return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            except FileNotFoundError:
                raise SessionNotFound(f"session directory {session_dir} no longer exists") from None
            except OSError as error:
                raise os_store_error(error, f"cannot take the writer lock {path}") from None

        taken = take_file_lock(
            path,
            open_lock,
            attempts=_LOCK_ATTEMPTS,
            follow_symlinks=True,
            busy=lambda _fd: SessionBusyError(busy),  # dsh's lock file records no holder
            failed=lambda error: os_store_error(error, f"cannot take the writer lock {path}"),
        )
        if taken is None:
            raise SessionBusyError(busy)
        return cls(taken[0], path)

    @property
    def held(self) -> bool:
        return self._fd >= 0

    def release(self) -> None:
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)
