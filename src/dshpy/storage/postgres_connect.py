"""Connecting to PostgreSQL: URL options, the connection pool, and psycopg errors as dshpy errors.

A ``postgresql://`` store URL is a libpq connection URI plus dshpy's own query
options (``schema``, ``pool_min``, ``pool_max``); every other query option is
libpq's (``sslmode``, ``connect_timeout``, …) and is passed through untouched, so
any DSN a user already has works as a store URL.

Callers never see a psycopg exception: a full disk (SQLSTATE ``53100``) becomes
:class:`~dshpy.errors.StoreFullError` (the transaction was rolled back), a read-only
server (``25006``: a hot standby, ``default_transaction_read_only``)
:class:`~dshpy.errors.ReadOnlyStoreError`, a lost or refused connection
:class:`~dshpy.errors.StoreUnavailableError` (a write's outcome is then unknown and
retrying it is safe), damaged pages or indexes the server found (``XX001``, ``XX002``)
:class:`~dshpy.errors.CorruptSessionError`, anything else :class:`~dshpy.errors.StoreError`.
:func:`raise_translated` is the one place that decides; every psycopg call of the
backend runs inside :meth:`StorePool.connection`, :func:`translated` or :func:`connect`.
"""

from __future__ import annotations

import re
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, NoReturn

from dshpy.errors import CorruptSessionError, ReadOnlyStoreError, StoreError, StoreFullError, StoreUnavailableError

try:
    import psycopg
    import psycopg_pool
    from psycopg import conninfo as libpq_conninfo
except ImportError as missing:  # pragma: no cover - exercised only without the extra
    raise StoreError(
        "the postgresql:// store needs psycopg 3 and psycopg-pool: pip install 'dshpy[postgres]'"
    ) from missing

__all__ = [
    "DEFAULT_SCHEMA",
    "IDLE_CHECK_S",
    "PostgresOptions",
    "StorePool",
    "connect",
    "quote_identifier",
    "raise_translated",
    "translated",
]

DEFAULT_SCHEMA = "dshpy"
_OUR_OPTIONS = frozenset({"schema", "pool_min", "pool_max"})
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,47}")
"""Schema names we accept: plain identifiers, short enough that ``dshpy:<schema>`` is a valid channel name."""


def quote_identifier(name: str) -> str:
    """``name`` as a quoted SQL identifier; only names :func:`check_schema_name` accepted get here."""
    if not _IDENTIFIER.fullmatch(name):
        raise StoreError(f"not a plain SQL identifier: {name!r}")
    return f'"{name}"'


def check_schema_name(name: str) -> str:
    """Refuse schema names that need escaping or that PostgreSQL reserves."""
    if not _IDENTIFIER.fullmatch(name):
        raise StoreError(
            f"invalid schema {name!r}: use letters, digits and _ (not starting with a digit), at most 48 characters"
        )
    if name.lower().startswith("pg_") or name.lower() == "information_schema":
        raise StoreError(f"invalid schema {name!r}: names starting with pg_ are reserved by PostgreSQL")
    return name


def _count(options: dict[str, str], key: str, default: int, url: str) -> int:
    raw = options.get(key)
    if raw is None:
        return default
    if not raw.isdigit() or int(raw) < 1:
        raise StoreError(f"invalid {key}={raw!r} in {url!r}: expected a positive integer")
    return int(raw)


@dataclass(frozen=True, slots=True)
class PostgresOptions:
    """What a store URL says: the libpq conninfo (password included), the schema, the pool bounds."""

    conninfo: str
    schema: str = DEFAULT_SCHEMA
    pool_min: int = 1
    pool_max: int = 10

    @classmethod
    def parse(cls, dsn: str, options: dict[str, str], *, display: str = "") -> PostgresOptions:
        """Split dshpy's options from libpq's and validate them (``display`` names the URL in errors)."""
        shown = display or dsn
        schema = check_schema_name(options.get("schema", DEFAULT_SCHEMA))
        pool_min = _count(options, "pool_min", 1, shown)
        pool_max = _count(options, "pool_max", max(10, pool_min), shown)
        if pool_max < pool_min:
            raise StoreError(f"pool_max ({pool_max}) is below pool_min ({pool_min}) in {shown!r}")
        libpq = {key: value for key, value in options.items() if key not in _OUR_OPTIONS}
        try:
            parsed = libpq_conninfo.conninfo_to_dict(dsn, **libpq)
            parsed.setdefault("application_name", f"dshpy:{schema}")  # which store a backend serves
            conninfo = libpq_conninfo.make_conninfo("", **parsed)  # libpq checks every option name here
        except psycopg.ProgrammingError as error:
            known = ", ".join(sorted(_OUR_OPTIONS))
            raise StoreError(
                f"invalid PostgreSQL URL {shown!r}: {_one_line(error)} (dshpy's options: {known}; "
                "others must be libpq connection parameters)"
            ) from None
        return cls(conninfo, schema, pool_min, pool_max)


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__


_LOST = (psycopg.OperationalError, psycopg.InterfaceError)
"""Connection failures (pool timeouts and a closed pool included: they subclass OperationalError)."""


_DISK_FULL = "53100"
"""``disk_full``: the server could not extend a table, index or temporary file. psycopg files it under
OperationalError, which would otherwise read as a lost connection."""

_CORRUPTED = frozenset({"XX001", "XX002"})
"""``data_corrupted`` and ``index_corrupted``: the server read damaged pages. Our own checksum
trigger raises XX001 too, and the backend catches that one first to name the session and row."""

_READ_ONLY = "25006"
"""``read_only_sql_transaction``: a standby, or a server or role that defaults to read-only transactions."""


def raise_translated(error: Exception, what: str) -> NoReturn:
    """Re-raise a psycopg error as the dshpy error a caller can act on."""
    state = getattr(error, "sqlstate", None)
    if state == _DISK_FULL:
        raise StoreFullError(
            f"{what}: the PostgreSQL server's disk is full ({_one_line(error)}); nothing of this write was "
            "stored — free space and retry"
        ) from error
    if state == _READ_ONLY:
        raise ReadOnlyStoreError(f"{what}: the PostgreSQL server is read-only ({_one_line(error)})") from error
    if state in _CORRUPTED:
        raise CorruptSessionError(f"{what}: PostgreSQL reports damaged data ({_one_line(error)})") from error
    if isinstance(error, _LOST):
        raise StoreUnavailableError(
            f"{what}: PostgreSQL connection failed or the request was interrupted ({_one_line(error)}); "
            "retrying is safe"
        ) from error
    raise StoreError(f"{what}: PostgreSQL error: {_one_line(error)}") from error


@contextmanager
def translated(what: str) -> Iterator[None]:
    """Run a block whose psycopg errors become dshpy errors (``what`` says what was being done)."""
    try:
        yield
    except psycopg.Error as error:
        raise_translated(error, what)


def connect(conninfo: str, **kwargs: Any) -> psycopg.Connection[Any]:
    """One autocommit connection outside the pool (schema setup, LISTEN), errors translated."""
    try:
        return psycopg.Connection.connect(conninfo, autocommit=True, **kwargs)
    except psycopg.OperationalError as error:
        raise StoreUnavailableError(f"cannot connect to PostgreSQL: {_one_line(error)}") from error
    except psycopg.Error as error:
        raise_translated(error, "cannot connect")


IDLE_CHECK_S = 2.0
"""A pooled connection that has not answered for this long is pinged before it is handed out."""

Connection = psycopg.Connection[Any]


class StorePool:
    """A store's connections: a psycopg pool of autocommit connections (transactions are explicit).

    A connection the server dropped while it sat in the pool (restart,
    ``pg_terminate_backend``, a firewall timeout) must not fail the next request, but
    pinging on every checkout would cost a round trip per flush (10-20% of the append
    rate with many writers) for a connection that answered a moment ago. So a
    connection is pinged only when it has been quiet for :data:`IDLE_CHECK_S` or when
    another one just failed (a restart drops them all); a failed ping sweeps every
    idle connection at once (``ConnectionPool.check``) instead of letting the pool
    discover them one checkout at a time, with its back-off sleep after each.
    """

    def __init__(self, options: PostgresOptions) -> None:
        self._pool: psycopg_pool.ConnectionPool[Connection] = psycopg_pool.ConnectionPool(
            options.conninfo,
            min_size=options.pool_min,
            max_size=options.pool_max,
            kwargs={"autocommit": True},
            name=f"dshpy-{options.schema}",
            open=False,
            num_workers=1,
        )
        self._answered: weakref.WeakKeyDictionary[Connection, float] = weakref.WeakKeyDictionary()
        with translated("cannot open the connection pool"):
            self._pool.open(wait=False)

    def _checkout(self) -> Connection:
        conn = self._pool.getconn()
        answered = self._answered.get(conn)
        if answered is not None and time.monotonic() - answered <= IDLE_CHECK_S:
            return conn
        try:
            conn.execute("")
        except psycopg.Error:
            self._pool.putconn(conn)  # broken: the pool closes it and opens a replacement
            self._pool.check()
            conn = self._pool.getconn()
        return conn

    @contextmanager
    def connection(self, what: str) -> Iterator[Connection]:
        """A live connection for one request; psycopg errors leave as dshpy errors (``what`` names the request)."""
        try:
            conn = self._checkout()
        except psycopg.Error as error:  # pool timeouts and a closed pool are psycopg errors too
            raise_translated(error, what)
        try:
            yield conn
        except psycopg.Error as error:
            if isinstance(error, psycopg.OperationalError):
                self._answered.clear()  # if one connection broke, trust none until it answers again
            raise_translated(error, what)
        else:
            self._answered[conn] = time.monotonic()
        finally:
            self._pool.putconn(conn)

    def wait(self, timeout: float = 30.0) -> None:
        """Block until the pool holds its minimum number of connections."""
        with translated("fill the connection pool"):
            self._pool.wait(timeout)

    def close(self) -> None:
        self._pool.close()
