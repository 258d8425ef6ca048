"""PostgreSQL with a full disk: the store's tables live in a tablespace on a tiny tmpfs.

Needs root (to mount) and the server on this machine (a tablespace is a local
directory); otherwise it skips, saying why. The tablespace is the server's, so it is
named per test and dropped after it.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import urllib.parse
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

import dshpy
from dshpy.core.events import encode_event
from dshpy.testing.builders import TurnScript, user_message
from dshpy.testing.postgres import drop_schema, scratch_schema, store_url


@pytest.fixture
def tiny_tablespace(postgres_dsn: str) -> Iterator[str]:
    """A 2 MiB tablespace (name) on a tmpfs the server can write."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        pytest.skip("no local postgres user: the server is not on this machine")
    top = Path(tempfile.mkdtemp(prefix="dshpy-pgfull-"))
    top.chmod(0o755)  # the server process must reach the mount point
    mount = ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(top)]
    done = subprocess.run(mount, capture_output=True, check=False)
    if done.returncode != 0:
        top.rmdir()
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    location = top / "space"
    location.mkdir()
    shutil.chown(location, "postgres", "postgres")
    name = f"dshpy_full_{uuid.uuid4().hex[:10]}"
    try:
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            try:
                conn.execute(
                    sql.SQL("CREATE TABLESPACE {} LOCATION {}").format(sql.Identifier(name), sql.Literal(str(location)))
                )
            except psycopg.Error as error:
                pytest.skip(f"the PostgreSQL server cannot use a local tablespace: {error}")
        yield name
    finally:
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP TABLESPACE IF EXISTS {}").format(sql.Identifier(name)))
        subprocess.run(["umount", "-l", str(top)], check=False)
        top.rmdir()


def test_a_full_disk_is_a_store_full_error_and_the_failed_batch_leaves_nothing(postgres_dsn, tiny_tablespace):
    schema = scratch_schema()
    options = urllib.parse.quote(f"-c default_tablespace={tiny_tablespace}")
    url = f"{store_url(postgres_dsn, schema)}&options={options}"
    store = dshpy.open_store(url)
    try:
        session = store.create(session_id="big", cwd="/w")
        TurnScript(session).turn(steps=1)
        session.flush()

        def fill() -> None:
            for index in range(40):  # random text: PostgreSQL compresses what it stores out of line
                session.append("turn/start", {"turn": index + 2})
                session.append("user/message", user_message(os.urandom(60_000).hex()), surface_op="append")
                session.append("turn/end", {"turn": index + 2, "reason": {"kind": "completed"}})
                session.flush()

        with pytest.raises(dshpy.StoreFullError, match="disk is full"):
            fill()
        durable = store.stat("big").event_count
        stored = [encode_event(e, seq_ranges=False) for e in store.read("big")]
        assert len(stored) == durable
        assert [encode_event(e, seq_ranges=False) for e in session.events[:durable]] == stored
    finally:
        store.close()
        drop_schema(postgres_dsn, schema)
