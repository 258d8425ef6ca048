"""The OpenAI-compatible embedder against a scripted ``/embeddings`` server on loopback."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

import dshpy
from dshpy.query import SessionQuery
from dshpy.query.embedder_http import OpenAIEmbedder
from dshpy.query.embedding import SemanticUnavailableError
from dshpy.testing.builders import user_message

_VOCABULARY = ["database", "connection", "refused", "bread", "flour", "config"]


def _vector(text: str) -> list[float]:
    """A bag-of-words vector over a tiny vocabulary: enough to rank by shared meaning-words."""
    words = text.lower().split()
    return [float(sum(word.startswith(term) for word in words)) + 0.01 for term in _VOCABULARY]


class _Server:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.status = 200
        self.reverse = False
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), **body})
                texts = body["input"]
                items = [{"object": "embedding", "index": i, "embedding": _vector(t)} for i, t in enumerate(texts)]
                if server.reverse:
                    items.reverse()
                payload = json.dumps({"object": "list", "data": items, "model": body["model"]}).encode()
                self.send_response(server.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)


@pytest.fixture
def server() -> Iterator[_Server]:
    scripted = _Server()
    scripted.thread.start()
    yield scripted
    scripted.httpd.shutdown()
    scripted.httpd.server_close()


def test_vectors_come_back_in_order_in_batches_with_the_key(server: _Server) -> None:
    server.reverse = True
    embedder = OpenAIEmbedder("text-embedding-3-small", base_url=server.url, api_key="sk-test", batch_size=2)
    texts = ["database refused", "bread flour", "config", "connection"]
    assert embedder.embed(texts) == [_vector(t) for t in texts]
    assert [len(r["input"]) for r in server.requests] == [2, 2]
    assert {r["path"] for r in server.requests} == {"/v1/embeddings"}
    assert {r["auth"] for r in server.requests} == {"Bearer sk-test"}
    assert {r["model"] for r in server.requests} == {"text-embedding-3-small"}
    assert embedder.name.endswith("#text-embedding-3-small")
    embedder.close()


def test_semantic_search_through_the_endpoint(server: _Server) -> None:
    pytest.importorskip("numpy", reason="semantic search needs the extra: pip install 'dshpy[semantic]'")
    store = dshpy.open_store("memory://")
    ids = []
    for text in ["the database connection was refused", "bread needs flour", "config is missing"]:
        with store.create() as session:
            session.append("user/message", user_message(text), surface_op="append")
            ids.append(session.id)
    query = SessionQuery(store, embedder=OpenAIEmbedder("m", base_url=server.url))
    assert query.search("flour for bread", mode="semantic").hits[0].session_id == ids[1]
    assert query.search("refused", mode="hybrid").hits[0].session_id == ids[0]


def test_a_failing_endpoint_is_a_clear_error(server: _Server) -> None:
    server.status = 500
    with pytest.raises(SemanticUnavailableError, match="answered 500"):
        OpenAIEmbedder("m", base_url=server.url).embed(["x"])
    with pytest.raises(SemanticUnavailableError, match="failed"):
        OpenAIEmbedder("m", base_url="http://127.0.0.1:9/v1", timeout=2).embed(["x"])
    with pytest.raises(ValueError, match="batch_size"):
        OpenAIEmbedder("m", batch_size=0)
