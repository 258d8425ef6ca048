"""JSON-RPC replies carrying lone UTF-16 surrogates are answered, escaped as ``JSON.stringify`` escapes them."""

from __future__ import annotations

import select
from pathlib import Path

from server_support import StdioServer, stdio_server

import dshpy
from dshpy.core.json import loads
from dshpy.testing.builders import TurnScript

NAME = "report-\udcff.txt"


def reply_line(server: StdioServer) -> bytes:
    """The next frame's raw line; a server that never answers fails the test instead of hanging it."""
    stdout = server.process.stdout
    assert stdout is not None
    ready, _, _ = select.select([stdout], [], [], 20)
    assert ready, "no reply within 20 s"
    return stdout.readline()


def test_session_get_and_events_answer_with_lone_surrogates_escaped(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    with dshpy.open_store(f"sqlite:///{home / 'sessions.db'}") as store:
        session = store.create(session_id="odd", cwd="/srv/\udcff")
        TurnScript(session).turn(f"open {NAME}", steps=1)
        session.close()

    with stdio_server(home) as server:
        server.write(b'{"jsonrpc":"2.0","id":1,"method":"session.events","params":{"sessionId":"odd"}}\n')
        raw = reply_line(server)
        assert b'"text":"open report-\\udcff.txt"' in raw  # the exact escape, on the wire
        events = loads(raw)["result"]["events"]
        texts = [e["data"]["content"][0]["text"] for e in events if e["type"] == "user/message"]
        assert texts == [f"open {NAME}"]

        server.write(b'{"jsonrpc":"2.0","id":2,"method":"session.get","params":{"sessionId":"odd"}}\n')
        reply = loads(reply_line(server))
        assert "error" not in reply, reply
        assert reply["result"]["cwd"] == "/srv/\udcff"

        # A request may carry the same escapes (a JavaScript client writes them): parsed, not a -32700.
        server.write(b'{"jsonrpc":"2.0","id":3,"method":"session.get","params":{"sessionId":"odd\\udcff"}}\n')
        reply = loads(reply_line(server))
        assert reply["id"] == 3 and reply["error"]["code"] == -32602
