"""A model chosen by ``initialize`` while a turn runs is used from the next turn on (real stdio server)."""

from __future__ import annotations

from pathlib import Path

from server_support import stdio_server

from dshpy.testing.fake_model import FakeModelServer, Reply


def _prompt(server, request_id, session_id, text):
    blocks = [{"type": "text", "text": text}]
    return server.call(request_id, "session/prompt", {"sessionId": session_id, "contentBlocks": blocks})


def test_a_model_changed_during_a_turn_is_used_once_the_turn_ends(tmp_path: Path) -> None:
    model = FakeModelServer([Reply.hang(), Reply.text("from the new model")])
    with model, stdio_server(tmp_path, model.base_url) as server:
        assert server.call(1, "initialize", {"cwd": ".", "model": "model-a"})["result"]["serverInfo"]
        assert "messageId" in _prompt(server, 2, "s", "first")["result"]
        model.wait_for_requests(1)
        # the turn is running: the client in use is kept, the choice is remembered
        assert "result" in server.call(3, "initialize", {"cwd": ".", "model": "model-b"})
        server.call(4, "session.cancel", {"sessionId": "s"})
        server.call(5, "session/wait", {"sessionId": "s"})
        assert "messageId" in _prompt(server, 6, "s", "second")["result"]
        server.call(7, "session/wait", {"sessionId": "s"})
        sent = [request["model"] for request in model.requests]
    assert sent == ["model-a", "model-b"]
