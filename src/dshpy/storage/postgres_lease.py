"""PostgreSQL's single-writer lease: a session-level advisory lock on a connection of its own.

Why an advisory lock and not a lease row with an expiry: the lock lives exactly as
long as the server backend that holds it. When the holder's process dies, its kernel
closes the socket and the server ends the backend and drops the lock at once; a
holder that is alive keeps it for as long as it likes, with no heartbeat thread and no
clocks to trust. A lease row would need a heartbeat and would keep a crashed writer's
session blocked until its expiry (a trade of blocked-after-crash time against
heartbeat traffic), and "expired" would only be a guess that the holder is gone.

The price is one extra connection per live session, held outside the pool for the
session's lifetime (8 live writers = 8 more server connections), and it needs a
session-pooling path to the server (PgBouncer in *transaction* mode would hand the
lock's backend to someone else). When a holder's *host* vanishes without closing its
socket (power loss, a partition), the server notices through TCP keepalives; the lease
connection sets them to about two minutes, which bounds how long such a session stays
busy. ``idle_session_timeout`` is switched off on it, so a server that reaps idle
sessions does not take the lease away.

The lock key is a stable 64-bit hash of the schema and session id, so two stores on
different schemas never share one. The holder is named through the lease
connection's ``application_name`` (``dshpy-lease pid=… host=…``), which other
clients can look up in ``pg_stat_activity`` by the lock's row in ``pg_locks``.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import select
import threading
from typing import Any

import psycopg

from dshpy.errors import SessionBusyError, StoreError
from dshpy.storage.lease import busy_error, this_holder
from dshpy.storage.postgres_connect import connect, raise_translated

__all__ = ["AdvisoryLease", "holder_of", "lease_key"]

_KEEPALIVE_SETTINGS = ("tcp_keepalives_idle", "60"), ("tcp_keepalives_interval", "10"), ("tcp_keepalives_count", "6")
"""Server-side keepalives of the lease connection: a vanished holder host is detected in about two minutes."""

_HOLDER = re.compile(r"dshpy-lease pid=(\d+) host=(\S*)")

_FIND_HOLDER = """
    SELECT a.application_name, l.pid FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid
    WHERE l.locktype = 'advisory' AND l.granted AND l.classid = %s AND l.objid = %s AND l.objsubid = 1
      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
    LIMIT 1"""


def lease_key(schema: str, session_id: str) -> int:
    """The advisory lock key of a session: the first 8 bytes of a SHA-256, as a signed bigint."""
    digest = hashlib.sha256(f"dshpy-lease\0{schema}\0{session_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def holder_of(conn: psycopg.Connection[Any], key: int, session_id: str) -> SessionBusyError | None:
    """The busy error naming whoever holds lock ``key`` now, or ``None`` if nobody does (one query).

    Asked on a pooled connection before a lease connection is opened, it spares a writer
    that retries while the session is busy a new server connection per try.
    """
    unsigned = key & 0xFFFF_FFFF_FFFF_FFFF
    row = conn.execute(_FIND_HOLDER, (unsigned >> 32, unsigned & 0xFFFF_FFFF)).fetchone()
    if row is None:
        return None
    name, backend = row
    match = _HOLDER.fullmatch(name or "")
    if match is None:
        return busy_error(session_id, None, None, detail=f" (PostgreSQL backend pid {backend})")
    return busy_error(session_id, int(match[1]), match[2])


def _application_name() -> str:
    pid, host = this_holder()
    return f"dshpy-lease pid={pid} host={host}"[:63]  # NAMEDATALEN - 1: longer names are cut by the server


class AdvisoryLease:
    """A held ``pg_try_advisory_lock`` on a dedicated autocommit connection."""

    def __init__(self, conninfo: str, schema: str, session_id: str) -> None:
        self._conninfo = conninfo
        self._schema = schema
        self.session_id = session_id
        self.key = lease_key(schema, session_id)
        self._mutex = threading.Lock()
        self._pid = os.getpid()
        self._released = False
        self._conn: psycopg.Connection[Any] | None = self._take()

    def _take(self) -> psycopg.Connection[Any]:
        """A new connection holding the lock, or SessionBusyError naming the holder."""
        conn = connect(self._conninfo, application_name=_application_name())
        try:
            settings = [*_KEEPALIVE_SETTINGS]  # ignored on a Unix socket, harmless there
            if conn.info.server_version >= 140000:  # idle_session_timeout is new in PostgreSQL 14
                settings.append(("idle_session_timeout", "0"))
            configure = "".join(", set_config(%s, %s, false)" for _ in settings)
            params = [self.key, *(part for setting in settings for part in setting)]
            row = conn.execute(f"SELECT pg_try_advisory_lock(%s){configure}", params).fetchone()  # one round trip
            if row is None or not row[0]:
                raise self._busy(conn)
        except BaseException as error:
            conn.close()
            if isinstance(error, psycopg.Error):
                raise_translated(error, f'session "{self.session_id}": cannot take its writer lease')
            raise
        return conn

    def _busy(self, conn: psycopg.Connection[Any]) -> SessionBusyError:
        busy = holder_of(conn, self.key, self.session_id)
        if busy is None:  # released just now: say so rather than guess
            return busy_error(self.session_id, None, None, detail=" (its lease was being released; try again)")
        return busy

    def check(self) -> None:
        """Before a write: make sure the lock's connection is still alive, and take the lock again if it is not.

        A dead connection means the server dropped the lock (a restart, a terminated
        backend). Costs no round trip while the connection is quiet: the server only
        sends on an idle connection when it is closing it.
        """
        with self._mutex:
            if self._released:
                raise StoreError(f'session "{self.session_id}": the writer was closed')
            conn = self._conn
            if conn is not None:
                if not conn.closed and not conn.broken and not _has_input(conn):
                    return
                with contextlib.suppress(psycopg.Error):
                    conn.execute("SELECT 1")
                    return  # it was only a notice
                with contextlib.suppress(psycopg.Error):
                    conn.close()
                self._conn = None
            # Anyone may have taken the session meanwhile; the conditional append still refuses to interleave.
            self._conn = self._take()

    def release(self) -> None:
        with self._mutex:
            conn, self._conn = self._conn, None
            self._released = True
        if conn is None or os.getpid() != self._pid:
            return  # in a forked child the socket is its parent's: saying anything on it would end the parent's lease
        with contextlib.suppress(psycopg.Error):  # closing the connection drops the lock anyway
            conn.execute("SELECT pg_advisory_unlock(%s)", (self.key,))
        with contextlib.suppress(psycopg.Error):
            conn.close()

    def __del__(self) -> None:  # a dropped, unclosed session must not keep its session leased
        with contextlib.suppress(Exception):
            self.release()


def _has_input(conn: psycopg.Connection[Any]) -> bool:
    """Whether the server sent something on an idle connection (an error before it hangs up, or EOF)."""
    try:
        readable, _, _ = select.select([conn.fileno()], [], [], 0)
    except (OSError, ValueError, psycopg.Error):
        return True
    return bool(readable)
