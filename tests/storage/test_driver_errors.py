"""Driver errors never leave a store raw: each backend maps its driver's errors in one place.

In the spirit of httpx's test that every httpcore exception is mapped: every exception
class the driver defines (every ``sqlite3`` class and result code, every ``psycopg``
SQLSTATE class, every ``errno``) is fed through the backend's translation function and
must come out as a :class:`~dshpy.StoreError` branch. Then the same promise through
the public API, with real files that the file system refuses to read.
"""

from __future__ import annotations

import errno
import inspect
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

import psycopg
import psycopg.errors
import psycopg_pool
import pytest

import dshpy
from dshpy.errors import (
    CorruptSessionError,
    ReadOnlyStoreError,
    StoreError,
    StoreFullError,
    StoreUnavailableError,
)
from dshpy.storage.os_errors import os_store_error
from dshpy.storage.postgres_connect import raise_translated
from dshpy.storage.sqlite_errors import store_error

# -- SQLite -------------------------------------------------------------------------------------

SQLITE_CLASSES = [cls for cls in vars(sqlite3).values() if inspect.isclass(cls) and issubclass(cls, sqlite3.Error)]
SQLITE_PRIMARY_CODES = range(29)  # SQLITE_OK .. SQLITE_NOTADB; 100/101 are ROW/DONE, never errors


def _sqlite_error(cls: type[sqlite3.Error], code: int | None) -> sqlite3.Error:
    error = cls("driver message")
    if code is not None:
        error.sqlite_errorcode = code  # type: ignore[attr-defined]
    return error


def test_the_sqlite_sweep_covers_the_driver() -> None:
    names = {cls.__name__ for cls in SQLITE_CLASSES}
    assert {"DatabaseError", "OperationalError", "IntegrityError", "ProgrammingError", "InterfaceError"} <= names


@pytest.mark.parametrize("cls", SQLITE_CLASSES, ids=lambda cls: cls.__name__)
def test_every_sqlite_error_class_and_code_becomes_a_store_error(cls: type[sqlite3.Error]) -> None:
    for code in [
        None,
        *SQLITE_PRIMARY_CODES,
        *(primary | (extended << 8) for primary in (5, 10, 11) for extended in (1, 2, 3)),
    ]:
        mapped = store_error(_sqlite_error(cls, code), Path("/x/s.db"), "reading session s")
        assert isinstance(mapped, StoreError), (cls, code)
        assert "s.db" in str(mapped) and "reading session s" in str(mapped)


@pytest.mark.parametrize(
    ("code", "branch"),
    [
        (13, StoreFullError),  # SQLITE_FULL
        (8, ReadOnlyStoreError),  # SQLITE_READONLY
        (3, ReadOnlyStoreError),  # SQLITE_PERM
        (11, CorruptSessionError),  # SQLITE_CORRUPT
        (26, CorruptSessionError),  # SQLITE_NOTADB
        (5, StoreUnavailableError),  # SQLITE_BUSY
        (5 | (1 << 8), StoreUnavailableError),  # SQLITE_BUSY_RECOVERY: the low byte decides
        (6, StoreUnavailableError),  # SQLITE_LOCKED
        (14, StoreUnavailableError),  # SQLITE_CANTOPEN
        (10 | (3 << 8), StoreUnavailableError),  # SQLITE_IOERR_WRITE
    ],
)
def test_sqlite_result_codes_pick_their_branch(code: int, branch: type[StoreError]) -> None:
    assert type(store_error(_sqlite_error(sqlite3.OperationalError, code), Path("s.db"), "x")) is branch


def test_real_sqlite_failures_are_mapped(tmp_path: Path) -> None:
    """The driver's own errors, not hand-made ones: a full database, a file that is not one, a read-only one."""
    path = tmp_path / "s.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t(x)")
    conn.execute("PRAGMA max_page_count = 2")
    with pytest.raises(sqlite3.Error) as full:
        conn.execute("INSERT INTO t VALUES (zeroblob(100000))")
    conn.close()
    assert isinstance(store_error(full.value, path, "x"), StoreFullError)

    read_only = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    with pytest.raises(sqlite3.Error) as refused:
        read_only.execute("INSERT INTO t VALUES (1)")
    read_only.close()
    assert isinstance(store_error(refused.value, path, "x"), ReadOnlyStoreError)

    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database" * 300)
    with pytest.raises(sqlite3.Error) as not_a_db:
        sqlite3.connect(junk).execute("SELECT * FROM sqlite_master")
    assert isinstance(store_error(not_a_db.value, junk, "x"), CorruptSessionError)


# -- PostgreSQL ---------------------------------------------------------------------------------

PSYCOPG_CLASSES = sorted(
    {
        cls
        for module in (psycopg, psycopg.errors, psycopg_pool)
        for cls in vars(module).values()
        if inspect.isclass(cls) and issubclass(cls, psycopg.Error)
    },
    key=lambda cls: (cls.__module__, cls.__name__),
)


def _translated(error: Exception) -> StoreError:
    with pytest.raises(StoreError) as caught:
        raise_translated(error, "appending to session s")
    assert caught.value.__cause__ is error  # the driver's error stays attached for debugging
    return caught.value


def test_the_psycopg_sweep_covers_every_sqlstate_class() -> None:
    assert len(PSYCOPG_CLASSES) > 250  # one class per SQLSTATE, plus the DB-API ones and the pool's
    assert psycopg_pool.PoolTimeout in PSYCOPG_CLASSES


def test_every_psycopg_error_becomes_a_store_error() -> None:
    for cls in PSYCOPG_CLASSES:
        mapped = _translated(cls("driver message"))
        assert "appending to session s" in str(mapped), cls
        if issubclass(cls, psycopg.OperationalError | psycopg.InterfaceError) and type(mapped) is StoreError:
            pytest.fail(f"{cls.__name__}: a lost connection must be StoreUnavailableError, not plain StoreError")


@pytest.mark.parametrize(
    ("cls", "branch"),
    [
        (psycopg.errors.DiskFull, StoreFullError),  # 53100
        (psycopg.errors.ReadOnlySqlTransaction, ReadOnlyStoreError),  # 25006
        (psycopg.errors.AdminShutdown, StoreUnavailableError),  # 57P01: the server restarted
        (psycopg.errors.ConnectionFailure, StoreUnavailableError),  # 08006
        (psycopg.errors.QueryCanceled, StoreUnavailableError),  # 57014: statement_timeout
        (psycopg_pool.PoolTimeout, StoreUnavailableError),
        (psycopg.InterfaceError, StoreUnavailableError),
        (psycopg.errors.DataCorrupted, CorruptSessionError),  # XX001: the server found damaged pages
        (psycopg.errors.IndexCorrupted, CorruptSessionError),  # XX002
    ],
)
def test_sqlstates_pick_their_branch(cls: type[psycopg.Error], branch: type[StoreError]) -> None:
    assert type(_translated(cls("driver message"))) is branch


# -- the file system (JSONL) -------------------------------------------------------------------


@pytest.mark.parametrize("number", sorted(errno.errorcode), ids=lambda number: errno.errorcode[number])
def test_every_errno_becomes_a_store_error(number: int) -> None:
    mapped = os_store_error(OSError(number, os.strerror(number), "/root/s/session.v4.jsonl"), 'session "s": reading')
    assert isinstance(mapped, StoreError)
    assert 'session "s": reading' in str(mapped)
    expected = {
        errno.ENOSPC: StoreFullError,
        errno.EFBIG: StoreFullError,
        errno.EDQUOT: StoreFullError,
        errno.EROFS: ReadOnlyStoreError,
        errno.EACCES: ReadOnlyStoreError,
        errno.EPERM: ReadOnlyStoreError,
    }.get(number, StoreUnavailableError)
    assert type(mapped) is expected


def _jsonl_session(root: Path) -> tuple[dshpy.BaseStore, str, Path]:
    store = dshpy.open_store(f"jsonl:///{root}")
    session = store.create(cwd="/srv/app")
    session.append("turn/start", {"turn": 1})
    session.flush()
    session.close()
    (log,) = root.glob(f"*/{session.id}/session.v4.jsonl*")
    return store, session.id, log


def _calls(store: dshpy.BaseStore, session_id: str) -> dict[str, Callable[[], object]]:
    return {
        "stat": lambda: store.stat(session_id),
        "inspect": lambda: store.inspect(session_id),
        "read": lambda: list(store.read(session_id)),
        "export": lambda: store.export(session_id),
        "open": lambda: store.open(session_id),
        "list": store.list,
    }


@pytest.mark.parametrize("damage", ["symlink-loop", "directory"])
def test_a_jsonl_log_the_file_system_refuses_to_read_is_a_store_error(tmp_path: Path, damage: str) -> None:
    """A log replaced by a symlink loop (ELOOP) or a directory (EISDIR) used to leak a raw OSError."""
    store, session_id, log = _jsonl_session(tmp_path / "root")
    log.unlink()
    if damage == "symlink-loop":
        log.symlink_to(log.name)
    else:
        log.mkdir()
    for name, call in _calls(store, session_id).items():
        with pytest.raises(StoreError) as caught:
            call()
        assert session_id in str(caught.value) or str(log) in str(caught.value), name


def test_a_jsonl_lock_the_file_system_refuses_is_a_store_error(tmp_path: Path) -> None:
    store, session_id, log = _jsonl_session(tmp_path / "root")
    lock = log.parent / "session.lock"
    lock.unlink(missing_ok=True)
    lock.mkdir()  # open(O_RDWR) on it: EISDIR
    with pytest.raises(StoreError, match=r"session\.lock"):
        store.open(session_id)
    assert [event.type for event in store.read(session_id)] == ["turn/start"]  # reading needs no lock


def test_a_jsonl_session_directory_in_a_symlink_loop_is_a_store_error_and_spares_the_others(tmp_path: Path) -> None:
    store, looped, log = _jsonl_session(tmp_path / "root")
    other = store.create(cwd="/other")
    other.close()
    session_dir = log.parent
    session_dir.rename(tmp_path / "moved")
    session_dir.symlink_to(session_dir.name)  # ELOOP on every access
    for name, call in _calls(store, looped).items():
        if name == "list":
            continue
        with pytest.raises(StoreError, match="symbolic links"):
            call()
    assert store.stat(other.id).id == other.id  # listing forks walks the root: the loop is not a session
    assert [info.id for info in store.list()] == [other.id]
