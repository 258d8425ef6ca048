"""A schema v6 session database put back the way dshpy wrote it up to schema v5, for the tests of older upgrades."""

from __future__ import annotations

import sqlite3

from dshpy.storage.sqlite import SCHEMA_MIGRATIONS
from dshpy.storage.sqlite_bodies import EventBodies


def events_as_v5(raw: sqlite3.Connection) -> None:
    """Plain JSON bodies in v1's ``WITHOUT ROWID`` table (with v3's checksum column), and no dictionaries."""
    bodies = EventBodies()
    bodies.load(raw)
    rows = raw.execute("SELECT session_id, seq, type, time, body, crc FROM events").fetchall()
    raw.execute("DROP TABLE events")
    raw.execute(SCHEMA_MIGRATIONS[0][1])
    raw.execute("ALTER TABLE events ADD COLUMN crc INTEGER NOT NULL DEFAULT 0")
    raw.executemany(
        "INSERT INTO events (session_id, seq, type, time, body, crc) VALUES (?, ?, ?, ?, ?, ?)",
        [(sid, seq, kind, time, bodies.decode(body), crc) for sid, seq, kind, time, body, crc in rows],
    )
    raw.execute("DROP TABLE body_dictionaries")
