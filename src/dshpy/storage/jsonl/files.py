"""The POSIX file work of the JSONL backend: durable writes, fsynced directories, ``OSError`` translated.

A log is only as durable as the directory entry that names it, so every new entry is
followed by an fsync of its directory. No ``OSError`` may leave the store raw (DESIGN.md
§9): the two context managers here route each one through
:func:`~dshpy.storage.os_errors.os_store_error`, and a log that vanished while being
read is the answer "no such session", not a file-system failure.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from dshpy.errors import SessionNotFound, StoreError
from dshpy.storage.os_errors import os_store_error

__all__ = ["file_errors", "fsync_dir", "is_file", "make_dir", "reading", "same_file", "write_all"]


@contextlib.contextmanager
def file_errors(what: str) -> Iterator[None]:
    """Turn any ``OSError`` into its store error (:func:`~dshpy.storage.os_errors.os_store_error`)."""
    try:
        yield
    except OSError as error:
        raise os_store_error(error, what) from error


@contextlib.contextmanager
def reading(session_id: str, path: Path) -> Iterator[None]:
    """Reading a session's log: a log gone meanwhile is :class:`SessionNotFound`, any other ``OSError``
    (a symlink loop, a directory in its place, ``EIO``) its store error."""
    try:
        yield
    except FileNotFoundError:
        raise SessionNotFound(f'session "{session_id}" not found') from None
    except OSError as error:
        raise os_store_error(error, f'session "{session_id}": cannot read {path}') from error


def is_file(entry: os.DirEntry[str]) -> bool:
    """``entry.is_file()``, but an entry the file system cannot resolve (a symlink loop) is not a file."""
    try:
        return entry.is_file()
    except OSError:
        return False


def same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def make_dir(path: Path) -> None:
    """``mkdir`` with mode 0700, fsyncing the parent when the entry is new."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        if not path.is_dir():
            raise StoreError(f"{path} exists and is not a directory") from None
        return
    fsync_dir(path.parent)
