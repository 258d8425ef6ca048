"""Each flush span says how long the backend's durable step took and how many bytes it wrote, per backend.

SQLite times its ``COMMIT`` (the WAL fsync), JSONL the ``fsync`` of the log,
PostgreSQL the autocommit ``append_events`` statement; the memory backend has no
durable step, so its spans carry neither number.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from otel_support import Recorded, run_turn

import dshpy
from dshpy.core.events import encode_event
from dshpy.testing.fake_model import Reply
from dshpy.testing.postgres import SKIP_REASON, drop_schema, scratch_schema, store_url, test_dsn

FSYNC = "dshpy.store.flush.fsync_ms"
BYTES = "dshpy.store.flush.bytes"


def flushed(otel: Recorded, url: str) -> tuple[dshpy.Session, list]:
    """One agent turn on a new session of ``url``; the session and its flush spans."""
    store = dshpy.open_store(url)
    try:
        session = store.create()
        run_turn(session, [Reply.text("stored")])
        session.close()
    finally:
        store.close()
    spans = otel.spans("dshpy.store.flush")
    assert spans and all(span.attributes["session.id"] == session.id for span in spans)
    return session, spans


def assert_fsync_inside_the_span(spans: list) -> None:
    for span in spans:
        fsync = span.attributes[FSYNC]
        assert isinstance(fsync, float) and fsync > 0
        assert span.end_time is not None and span.start_time is not None
        assert fsync <= (span.end_time - span.start_time) / 1e6  # a part of the flush, never more than all of it


def test_sqlite_flush_spans_carry_the_commit_time_and_the_rows_bytes(otel: Recorded, tmp_path: Path) -> None:
    session, spans = flushed(otel, f"sqlite:///{tmp_path}/s.db")
    assert_fsync_inside_the_span(spans)
    raw = sqlite3.connect(tmp_path / "s.db")  # the bodies as stored (schema v6 compresses the larger ones)
    (stored,) = raw.execute("SELECT sum(length(body)) FROM events WHERE session_id = ?", (session.id,)).fetchone()
    raw.close()
    assert sum(span.attributes[BYTES] for span in spans) == stored


@pytest.mark.parametrize("compressed", [False, True])
def test_jsonl_flush_spans_carry_the_fsync_time_and_the_bytes_appended(
    otel: Recorded, tmp_path: Path, compressed: bool
) -> None:
    url = f"jsonl:///{tmp_path}/logs?compression={'zstd' if compressed else 'none'}"
    store = dshpy.open_store(url)
    session = store.create()  # publishes the log with its header
    (log,) = [path for path in (tmp_path / "logs").rglob("session.v4.jsonl*") if path.is_file()]
    created = log.stat().st_size
    run_turn(session, [Reply.text("stored")])
    session.close()
    store.close()
    spans = otel.spans("dshpy.store.flush")
    assert_fsync_inside_the_span(spans)
    assert sum(span.attributes[BYTES] for span in spans) == log.stat().st_size - created  # every byte appended


def test_memory_flush_spans_have_no_durable_step(otel: Recorded) -> None:
    _session, spans = flushed(otel, "memory:")
    assert all(FSYNC not in span.attributes and BYTES not in span.attributes for span in spans)
    assert all(span.attributes["dshpy.store.backend"] == "memory" for span in spans)


@pytest.fixture
def postgres_url() -> Iterator[str]:
    dsn = test_dsn()
    if dsn is None:
        pytest.skip(SKIP_REASON)
    schema = scratch_schema("dshpy_otel_flush")
    try:
        yield store_url(dsn, schema)
    finally:
        drop_schema(dsn, schema)


def test_postgresql_flush_spans_carry_the_append_statement_time(otel: Recorded, postgres_url: str) -> None:
    session, spans = flushed(otel, postgres_url)
    assert all(span.attributes["dshpy.store.backend"] == "postgresql" for span in spans)
    assert_fsync_inside_the_span(spans)
    assert sum(span.attributes[BYTES] for span in spans) == sum(
        len(encode_event(event, seq_ranges=False)) for event in session.events
    )


def test_with_telemetry_off_a_backend_reports_to_nobody(tmp_path: Path) -> None:
    """No block open: the backends' reports go nowhere, and a block opened later sees only its own write."""
    from dshpy.storage.flush_report import FlushReport

    store = dshpy.open_store(f"sqlite:///{tmp_path}/s.db")
    session = store.create()
    session.append("session/title", {"title": "t", "messageSeqs": [], "source": {"kind": "user"}})
    session.flush()  # reported to nobody
    with FlushReport() as outer, FlushReport() as inner:
        session.append("session/title", {"title": "u", "messageSeqs": [], "source": {"kind": "user"}})
        session.flush()
    assert inner.steps == 1 and inner.durable_ns > 0 and inner.written == len(encode_event(session.events[-1]))
    assert outer.steps == 0 and outer.written is None  # nested: the inner block collected
    session.close()
    store.close()
