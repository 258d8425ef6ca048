"""The UI over PostgreSQL: the same views, and the live stream woken by LISTEN/NOTIFY (skips without a server)."""

from __future__ import annotations

import http.client
import json
import threading
import time

from ui_support import Running, start_ui, stop_ui

import dshpy
from dshpy.testing.builders import TurnScript
from dshpy.testing.showcase import build_showcase


def test_views_and_live_stream_over_postgres(postgres_url: str) -> None:
    store = dshpy.open_store(postgres_url)
    showcase = build_showcase(store)
    server, loop, thread = start_ui(store)
    session = store.create(cwd="/srv/pg-live")
    try:
        running = Running(server, store, showcase, "")
        listed = running.json("/ui/api/sessions")["sessions"]
        parent = next(row for row in listed if row["id"] == showcase.session_id)
        assert [child["id"] for child in parent["children"]] == [showcase.fork_id]
        items = running.json(f"/ui/api/sessions/{showcase.session_id}/transcript")["items"]
        assert [item["kind"] for item in items] == ["message", "checkpoint", "message"]
        TurnScript(session).turn("before")
        session.flush()
        start = len(session.events)
        connection = http.client.HTTPConnection("127.0.0.1", running.port, timeout=30)
        connection.request(
            "GET",
            f"/ui/api/sessions/{session.id}/live?from={start}",
            headers={"Authorization": f"Bearer {running.token}"},
        )
        response = connection.getresponse()
        assert response.status == 200 and response.readline() == b"event: ready\n"
        writer = threading.Thread(target=lambda: (time.sleep(0.3), TurnScript(session).turn("live"), session.flush()))
        writer.start()
        writer.join(20)
        expected = len(session.events) - start
        seqs: list[int] = []
        deadline = time.monotonic() + 20
        while len(seqs) < expected and time.monotonic() < deadline:
            line = response.readline()
            if line.startswith(b"data: ") and line.strip() != b"data: {}":
                seqs.append(json.loads(line[6:])["seq"])
        connection.close()
        assert seqs == list(range(start, start + expected))
    finally:
        session.close()
        stop_ui(server, loop, thread)
        store.close()
