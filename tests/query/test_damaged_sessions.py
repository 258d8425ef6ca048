"""A damaged session does not hide the others: listings name it, searches skip or still find what is intact."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import dshpy
from dshpy.query import SessionQuery
from dshpy.testing.builders import TurnScript


def test_a_session_that_lost_rows_is_listed_with_its_error(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = dshpy.open_store(f"sqlite:///{path}")
    with store.create() as good:
        TurnScript(good).turn("healthy session")
    with store.create() as bad:
        TurnScript(bad).turn("doomed session")
    store.close()
    raw = sqlite3.connect(path)
    raw.execute("DELETE FROM events WHERE session_id = ? AND seq = (SELECT max(seq) FROM events)", (bad.id,))
    raw.commit()
    raw.close()
    store = dshpy.open_store(f"sqlite:///{path}")
    query = SessionQuery(store)
    listed = {summary.id: summary for summary in query.list().sessions}
    assert listed[good.id].error is None and listed[good.id].title == "healthy session"
    error = listed[bad.id].error
    assert error is not None and "damaged" in error and bad.id in error
    assert [hit.session_id for hit in query.search("healthy session").hits] == [good.id]
    store.close()
