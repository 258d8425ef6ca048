"""Single-writer leases: at most one live handle may write a session at a time.

A live session (``create``/``open``/``fork``) holds its session's lease from before
it reads the log until it is closed, so crash repair on ``open`` can only ever close a
turn whose writer is gone: a second live ``open`` — in another process or this one —
gets :class:`~dshpy.errors.SessionBusyError` naming the holder instead of "repairing"
a turn that is still being written. Readers (``inspect``, ``read``, ``follow``) never
take a lease.

Two kinds live here, one per kind of store:

* :class:`FileLease` (SQLite): an ``flock`` on a small file per session beside the
  database. The kernel drops the lock when the holder's descriptor closes or its
  process dies, so a crashed holder is "provably gone" the moment it is gone, with no
  expiry to wait out and no pid guessing; the file records the holder's pid and host
  only so the busy message can name it.
* :class:`LocalLeases` (memory): a per-store registry, since a memory store lives in
  one process and two handles of one session are all there is to keep apart.

PostgreSQL's advisory-lock lease is in :mod:`dshpy.storage.postgres_lease`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import threading
import time
from pathlib import Path
from typing import Protocol

import orjson

from dshpy.core.ids import check_session_id
from dshpy.errors import SessionBusyError, SessionNotFound, StoreError
from dshpy.storage.file_lock import inode_at, take_file_lock
from dshpy.storage.os_errors import os_store_error

__all__ = [
    "FileLease",
    "Lease",
    "LocalLeases",
    "busy_error",
    "lease_file_name",
    "this_holder",
]

_ATTEMPTS = 5
"""How often a lock taken on a file that was unlinked meanwhile (a holder releasing) is retried."""


class Lease(Protocol):
    """A held single-writer lease on one session."""

    def check(self) -> None:
        """Raise if the lease was lost since it was taken (called before every write)."""

    def release(self) -> None:
        """Let go of the lease (idempotent)."""


def this_holder() -> tuple[int, str]:
    """``(pid, host)`` of this process, as a lease records its holder."""
    return os.getpid(), socket.gethostname()


def busy_error(session_id: str, pid: int | None, host: str | None, *, detail: str = "") -> SessionBusyError:
    """The one busy error every backend raises: it names the holder when the backend knows it."""
    if pid is None:
        holder = None
        where = f"open in another process{detail or ' (its holder is not recorded)'}"
    else:
        holder = f"pid {pid} on host {host}"
        place = "already open in this process" if (pid, host) == this_holder() else "open in another process"
        where = f"{place} (pid {pid}, host {host}){detail}"
    return SessionBusyError(
        f'session "{session_id}" is {where}: one live writer at a time; close it there first '
        "(reading it with inspect/read needs no lease)",
        holder=holder,
    )


def lease_file_name(session_id: str) -> str:
    """The lease file of a session: its (validated) id, escaped into one safe file name.

    ``a-z 0-9 . _ -`` stay literal; an upper-case letter becomes ``^`` + its lower case
    (ids are case-sensitive but some filesystems are not: ``"Ab"`` → ``"^ab.lock"``
    never meets ``"ab"`` → ``"ab.lock"``); every other UTF-16 code unit (``/``, a
    space, any other script) becomes ``~XXXX``, as in dsh's session directories. The
    escapes use characters that are never literal, so distinct ids never share a file.
    """
    check_session_id(session_id)
    raw = session_id.encode("utf-16-le", "surrogatepass")
    parts = []
    for offset in range(0, len(raw), 2):
        unit = int.from_bytes(raw[offset : offset + 2], "little")
        char = chr(unit)
        if "A" <= char <= "Z":
            parts.append(f"^{char.lower()}")
        elif char in _LEASE_LITERAL:
            parts.append(char)
        else:
            parts.append(f"~{unit:04X}")
    return "".join(parts) + ".lock"


_LEASE_LITERAL = frozenset("abcdefghijklmnopqrstuvwxyz0123456789._-")


class FileLease:
    """An exclusive ``flock`` on ``<directory>/<session>.lock`` held for a live session's lifetime.

    The file is unlinked by its holder on release (and on delete), so a directory of
    leases holds only live sessions and crashed ones that were never reopened. A lock
    names an inode, not a path: after locking, the taker checks the inode is still the
    file at the path (a holder may have unlinked it meanwhile) and tries again if not.
    """

    __slots__ = ("_fd", "_inode", "_pid", "path", "session_id")

    def __init__(self, session_id: str, path: Path, fd: int, inode: tuple[int, int]) -> None:
        self.session_id = session_id
        self.path = path
        self._fd = fd
        self._inode = inode
        self._pid = os.getpid()

    @classmethod
    def acquire(cls, directory: Path, session_id: str) -> FileLease:
        """Take the lease without waiting; :class:`SessionBusyError` naming the holder if it is held."""
        path = directory / lease_file_name(session_id)
        _make_private_dir(directory)
        taken = take_file_lock(
            path,
            lambda: _open_lock_file(path),
            attempts=_ATTEMPTS,
            follow_symlinks=False,
            busy=lambda fd: busy_error(session_id, *_read_holder(fd), detail=f" (lease {path})"),
            failed=lambda error: StoreError(f"cannot lock {path}: {error.strerror}"),
        )
        if taken is None:  # each time we locked a file its holder had unlinked on release
            raise busy_error(session_id, None, None, detail=f" (its lease file {path} keeps being replaced)")
        lease = cls(session_id, path, *taken)
        lease._record_holder()
        return lease

    def _record_holder(self) -> None:
        pid, host = this_holder()
        record = orjson.dumps({"pid": pid, "host": host, "since": int(time.time() * 1000)})
        with contextlib.suppress(OSError):  # the record is for messages only; the lock is what counts
            os.ftruncate(self._fd, 0)
            os.pwrite(self._fd, record + b"\n", 0)

    @property
    def held(self) -> bool:
        return self._fd >= 0

    def check(self) -> None:
        """Refuse to write if the lease file was removed or replaced under us (by hand: dshpy never does)."""
        if self._fd < 0:
            raise StoreError(f'session "{self.session_id}": the writer was closed')
        if inode_at(self.path, follow_symlinks=False) != self._inode:
            raise StoreError(
                f'session "{self.session_id}": its lease file {self.path} was removed or replaced while this '
                "writer held it, so another writer may have taken the session; reopen it"
            )

    def release(self) -> None:
        fd, self._fd = self._fd, -1
        if fd < 0:
            return
        if os.getpid() != self._pid:  # a forked child's copy: closing it is all; the lock stays its parent's
            os.close(fd)
            return
        try:
            # Still ours: nobody can take it before we unlock.
            if inode_at(self.path, follow_symlinks=False) == self._inode:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.path)
        finally:
            os.close(fd)

    def __del__(self) -> None:  # a dropped, unclosed session must not keep its session leased
        with contextlib.suppress(Exception):  # interpreter shutdown may have torn down os already
            self.release()


def _make_private_dir(directory: Path) -> None:
    try:
        os.mkdir(directory, 0o700)
    except FileExistsError:
        if not directory.is_dir():
            raise StoreError(f"{directory} exists and is not a directory (it should hold session leases)") from None
    except FileNotFoundError:
        raise SessionNotFound(f"the store's directory {directory.parent} no longer exists") from None
    except OSError as error:
        raise os_store_error(error, f"cannot create the lease directory {directory}") from None


def _open_lock_file(path: Path) -> int:
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise StoreError(f"the lease file {path} is a symbolic link; refusing to follow it") from None
        raise os_store_error(error, f"cannot open the lease file {path}") from None


def _read_holder(fd: int) -> tuple[int | None, str | None]:
    """The pid and host a lease file records (``None``s while its holder has not written them yet)."""
    try:
        record = orjson.loads(os.pread(fd, 4096, 0))
    except (OSError, orjson.JSONDecodeError):
        return None, None
    if not isinstance(record, dict):
        return None, None
    pid, host = record.get("pid"), record.get("host")
    if type(pid) is not int or not isinstance(host, str):
        return None, None
    return pid, host


class LocalLeases:
    """The leases of a store that lives in one process: a set of held session ids."""

    def __init__(self) -> None:
        self._held: set[str] = set()
        self._mutex = threading.Lock()

    def acquire(self, session_id: str) -> _LocalLease:
        with self._mutex:
            if session_id in self._held:
                pid, host = this_holder()
                raise busy_error(session_id, pid, host)
            self._held.add(session_id)
        return _LocalLease(self, session_id)

    def _release(self, session_id: str) -> None:
        with self._mutex:
            self._held.discard(session_id)


class _LocalLease:
    __slots__ = ("_leases", "_session_id")

    def __init__(self, leases: LocalLeases, session_id: str) -> None:
        self._leases: LocalLeases | None = leases
        self._session_id = session_id

    def check(self) -> None:
        if self._leases is None:
            raise StoreError(f'session "{self._session_id}": the writer was closed')

    def release(self) -> None:
        leases, self._leases = self._leases, None
        if leases is not None:
            leases._release(self._session_id)

    def __del__(self) -> None:  # a dropped, unclosed session must not keep its session leased
        with contextlib.suppress(Exception):
            self.release()
