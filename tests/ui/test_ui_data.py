"""The UI's data layer on a real SQLite file: a long log's last transcript page folded from its tail alone
must equal the same page from the whole log's fold, with and without a compaction reaching back past the tail."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ui_support import Running, start_ui, stop_ui

import dshpy
from dshpy.compaction.engine import compact
from dshpy.testing.builders import TurnScript
from dshpy.testing.showcase import build_long_session
from dshpy.ui import UiData
from dshpy.ui.folds import TAIL_WINDOW


def _full_tail(data: UiData, session_id: str, limit: int) -> list[dict]:
    items = data.folds.fold(session_id).items  # the reference: every event folded
    return items[-limit:]


def test_tail_page_from_the_window_equals_the_full_fold(tmp_path: Path) -> None:
    store = dshpy.open_store(f"sqlite:///{tmp_path / 's.db'}")
    session_id = build_long_session(store, events=TAIL_WINDOW + 600)
    fast = UiData(store).transcript(session_id, {"limit": "40"})
    assert fast["hasEarlier"] is True and fast["hasLater"] is False
    assert fast["items"] == _full_tail(UiData(store), session_id, 40)
    # a page before the first one continues exactly where it began
    reference = UiData(store)
    earlier = reference.transcript(session_id, {"before": str(fast["items"][0]["at"]), "limit": "40"})
    assert earlier["items"] == reference.folds.fold(session_id).items[-80:-40]
    store.close()


def test_tail_page_after_a_compaction_that_reaches_past_the_window(tmp_path: Path) -> None:
    store = dshpy.open_store(f"sqlite:///{tmp_path / 's.db'}")
    session_id = build_long_session(store, events=TAIL_WINDOW + 600)
    session = store.open(session_id)
    compact(session, lambda _request: "everything so far, condensed")
    TurnScript(session).turn("after the compaction")
    session.flush()
    session.close()
    fast = UiData(store).transcript(session_id, {"limit": "5"})
    assert fast["items"] == _full_tail(UiData(store), session_id, 5)
    kinds = [item["kind"] for item in fast["items"]]
    assert "checkpoint" in kinds
    checkpoint = next(item for item in fast["items"] if item["kind"] == "checkpoint")
    assert checkpoint["replaces"][0] < 10 and len(checkpoint["shadowed"]) > 100
    store.close()


def test_a_live_fold_extends_without_refolding_and_refolds_after_a_replacement(tmp_path: Path) -> None:
    store = dshpy.open_store(f"sqlite:///{tmp_path / 's.db'}")
    session = store.create()
    TurnScript(session).turn("one")
    session.flush()
    data = UiData(store)
    first = data.folds.fold(session.id)
    for _ in range(4):
        TurnScript(session).turn("another question " * 20, steps=3)
    session.flush()
    second = data.folds.fold(session.id)
    assert second is not first and second.items[: len(first.items)] == first.items
    assert second.items == UiData(store).folds.fold(session.id).items
    compact(session, lambda _request: "condensed")
    session.flush()
    third = data.folds.fold(session.id)
    assert third.items == UiData(store).folds.fold(session.id).items
    assert any(item["kind"] == "checkpoint" for item in third.items)
    session.close()
    store.close()


def test_a_damaged_log_does_not_break_the_list_and_its_views_answer_422(tmp_path: Path) -> None:
    store = dshpy.open_store(f"jsonl:///{tmp_path / 'root'}?compression=none")
    session = store.create(cwd="/srv/damaged")
    for _ in range(3):
        TurnScript(session).turn("a turn")
    session.flush()
    session.close()
    (log,) = (tmp_path / "root").rglob("session.v4.jsonl")
    lines = log.read_bytes().split(b"\n")
    lines[5] = b'{"type": "user/mess'  # torn in the middle of committed turns: corruption, not a tail to repair
    original = b"\n".join(lines)
    log.write_bytes(original)
    server, loop, thread = start_ui(store)
    try:
        running = Running(server, store, None, "")  # type: ignore[arg-type]
        rows = running.json("/ui/api/sessions")["sessions"]  # the store's listing may leave it out, never fails
        assert all(row["error"] for row in rows if row["id"] == session.id)
        for view in ("transcript", "events", "usage"):
            status, _headers, body = running.request(f"/ui/api/sessions/{session.id}/{view}")
            assert status == 422, (view, body)
            assert json.loads(body)["error"]
    finally:
        stop_ui(server, loop, thread)
        store.close()
    assert log.read_bytes() == original  # looking never repairs or rewrites


def _pages(data: UiData, params: dict[str, str]) -> list[list[dict]]:
    pages, cursor = [], None
    while True:
        page = data.sessions({**params, **({"cursor": cursor} if cursor else {})})
        pages.append(page["sessions"])
        cursor = page["nextCursor"]
        if cursor is None:
            return pages


def test_pages_cut_by_the_store_equal_pages_cut_from_the_whole_listing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = dshpy.open_store(f"sqlite:///{tmp_path / 's.db'}")
    roots = []
    for number in range(7):
        with store.create(cwd=f"/srv/p{number % 2}") as session:
            TurnScript(session).turn(f"root {number}")
        roots.append(session.id)
    with store.fork(roots[2]) as child:
        TurnScript(child).turn("a fork")
    with store.fork(roots[2]) as sibling:
        pass
    with store.fork(child.id) as grandchild:
        pass
    paged = UiData(store)
    assert paged.listing.paged
    whole = UiData(store)
    monkeypatch.setattr(type(whole.listing), "paged", property(lambda listing: listing is not whole.listing))
    assert not whole.listing.paged
    for params in ({"limit": "3"}, {"limit": "2", "cwd": "/srv/p0"}, {"limit": "50"}):
        assert _pages(paged, params) == _pages(whole, params)
    first = paged.sessions({"limit": "50"})["sessions"]
    forked = next(row for row in first if row["id"] == roots[2])
    assert [row["id"] for row in forked["children"]] == [child.id, sibling.id]
    assert [row["id"] for row in forked["children"][0]["children"]] == [grandchild.id]
    for session_id in (roots[2], child.id, grandchild.id):
        assert paged.session(session_id)["lineage"] == whole.session(session_id)["lineage"]
    with store.create(cwd="/srv/new") as late:  # no kept listing to go stale: it shows on the next request
        pass
    assert paged.sessions({"limit": "1"})["sessions"][0]["id"] == late.id
    store.close()


def test_rows_and_views_tell_the_last_turns_outcome_from_projections(tmp_path: Path) -> None:
    store = dshpy.open_store(f"sqlite:///{tmp_path / 's.db'}")
    with store.create(cwd="/srv/done") as done:
        TurnScript(done).turn("fine")
    with store.create(cwd="/srv/long") as long:  # a last turn of many steps
        TurnScript(long).turn("many steps", steps=40)
    open_turn = store.create(cwd="/srv/open")
    TurnScript(open_turn).turn("first")
    open_turn.append("turn/start", {"turn": 2})
    open_turn.flush()
    with store.create(cwd="/srv/failed") as failed:
        TurnScript(failed).turn("boom")
        failed.append("turn/start", {"turn": 2})
        failed.append("turn/end", {"turn": 2, "reason": {"kind": "error", "error": {"code": "X", "message": "x"}}})
    empty = store.create(cwd="/srv/empty")
    empty.close()
    data = UiData(store)
    rows = {row["id"]: row["lastOutcome"] for row in data.sessions({})["sessions"]}
    expected = {done.id: "completed", long.id: "completed", open_turn.id: "running", failed.id: "error", empty.id: None}
    assert rows == expected
    assert {sid: data.session(sid)["lastOutcome"] for sid in expected} == expected
    open_turn.close()
    store.close()
