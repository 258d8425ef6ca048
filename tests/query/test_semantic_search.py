"""Semantic and hybrid search: the local model, incremental embedding keyed by content, fusion, bad input."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

import dshpy
from dshpy.query import InvalidQueryError, SessionQuery
from dshpy.query.embedding import SemanticUnavailableError, require_numpy
from dshpy.query.semantic import reciprocal_rank_fusion
from dshpy.query.vector_store import VectorStore
from dshpy.testing.builders import user_message

pytest.importorskip("numpy", reason="semantic search needs the extra: pip install 'dshpy[semantic]'")
pytest.importorskip("static_model", reason="the local model needs the extra: pip install 'dshpy[semantic]'")

from dshpy.query.embedder_static import STATIC_MODEL_NAME, StaticModelEmbedder

PROMPTS = [
    "the database connection was refused on port 5432",
    "bake a sourdough bread with rye flour and a long proof",
    "parse_config raises KeyError when the section is missing",
]


class CountingEmbedder:
    """The local model, counting what it is asked to embed (to prove nothing is embedded twice)."""

    def __init__(self) -> None:
        self.inner = StaticModelEmbedder()
        self.texts: list[str] = []

    @property
    def name(self) -> str:
        return self.inner.name

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.texts.extend(texts)
        return self.inner.embed(texts)

    @property
    def documents(self) -> list[str]:
        """What was embedded for the index (queries left out)."""
        return [text for text in self.texts if text in PROMPTS]


@pytest.fixture(params=["memory", "sqlite", "jsonl"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dshpy.SessionStore]:
    url = {"memory": "memory://", "sqlite": f"sqlite:///{tmp_path / 's.db'}", "jsonl": f"jsonl:///{tmp_path / 'j'}"}
    opened = dshpy.open_store(url[request.param])
    yield opened
    opened.close()


def _say(store: dshpy.SessionStore, *texts: str) -> str:
    with store.create(cwd="/srv/app") as session:
        for text in texts:
            session.append("user/message", user_message(text), surface_op="append")
        return session.id


def test_semantic_search_finds_a_paraphrase_that_shares_no_word(store: dshpy.SessionStore) -> None:
    ids = [_say(store, text) for text in PROMPTS]
    query = SessionQuery(store)
    assert query.search("unable to connect to the postgres server").hits == []
    hits = query.search("unable to connect to the postgres server", mode="semantic").hits
    assert hits[0].session_id == ids[0]
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_hybrid_is_the_default_with_an_embedder_and_puts_exact_words_first(store: dshpy.SessionStore) -> None:
    ids = [_say(store, text) for text in PROMPTS]
    query = SessionQuery(store, embedder=StaticModelEmbedder())
    hits = query.search("KeyError").hits
    assert hits[0].session_id == ids[2]
    assert hits[0].snippet.marked().count("[KeyError]") == 1
    assert len(hits) == 3  # the semantic list ranks every event in scope


def test_nothing_is_embedded_twice_appends_are_caught_up_and_deletes_forgotten(store: dshpy.SessionStore) -> None:
    first = _say(store, PROMPTS[0], PROMPTS[1])
    embedder = CountingEmbedder()
    query = SessionQuery(store, embedder=embedder)
    query.search("database", mode="semantic")
    assert sorted(embedder.documents) == sorted(PROMPTS[:2])
    query.search("bread", mode="semantic")
    assert len(embedder.documents) == 2
    second = _say(store, PROMPTS[1], PROMPTS[2])  # one text already embedded elsewhere
    hits = query.search("missing config section", mode="semantic", limit=10).hits
    assert {(h.session_id, h.seq) for h in hits} >= {(second, 0), (second, 1), (first, 0), (first, 1)}
    assert sorted(embedder.documents) == sorted(PROMPTS)
    assert len(embedder.documents) == 3
    store.delete(first)
    hits = query.search("database connection", mode="semantic").hits
    assert {h.session_id for h in hits} == {second}


def test_appends_by_another_store_object_are_caught_up(tmp_path: Path) -> None:
    """The change check reads the session rows each search: a commit by another connection (another process's
    writer) is seen, whether it grows a session already embedded or adds one."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    with dshpy.open_store(url) as mine, dshpy.open_store(url) as theirs:
        first = _say(mine, PROMPTS[0])
        embedder = CountingEmbedder()
        query = SessionQuery(mine, embedder=embedder)
        assert {h.session_id for h in query.search("bread", mode="semantic").hits} == {first}
        with theirs.open(first) as session:
            session.append("user/message", user_message(PROMPTS[1]), surface_op="append")
        second = _say(theirs, PROMPTS[2])
        hits = query.search("missing config section", mode="semantic", limit=10).hits
        assert {(h.session_id, h.seq) for h in hits} == {(first, 0), (first, 1), (second, 0)}
        assert sorted(embedder.documents) == sorted(PROMPTS)


def test_a_fork_inherits_its_prefix_vectors_without_embedding_them_again(store: dshpy.SessionStore) -> None:
    parent = _say(store, PROMPTS[0], PROMPTS[1])
    with store.fork(parent) as child:
        child.append("user/message", user_message(PROMPTS[2]), surface_op="append")
        child_id = child.id
    embedder = CountingEmbedder()
    hits = SessionQuery(store, embedder=embedder).search("refused connection", mode="semantic", limit=10).hits
    assert sorted(embedder.documents) == sorted(PROMPTS)
    assert {h.session_id for h in hits} == {parent, child_id}


def test_filters_and_types_narrow_semantic_hits(store: dshpy.SessionStore) -> None:
    ids = [_say(store, text) for text in PROMPTS]
    query = SessionQuery(store, embedder=StaticModelEmbedder())
    assert {h.session_id for h in query.search("bread", session_id=ids[1], mode="semantic").hits} == {ids[1]}
    assert query.search("bread", types=["assistant/message"], mode="hybrid").hits == []
    assert query.search("bread", filters={"cwd": "/elsewhere"}, mode="semantic").hits == []


def test_semantic_pages_follow_their_cursor(store: dshpy.SessionStore) -> None:
    for text in PROMPTS:
        _say(store, text)
    query = SessionQuery(store, embedder=StaticModelEmbedder())
    first = query.search("database", mode="semantic", limit=2)
    assert len(first.hits) == 2 and first.next_cursor is not None
    rest = query.search("database", mode="semantic", limit=2, cursor=first.next_cursor)
    assert len(rest.hits) == 1 and rest.next_cursor is None
    with pytest.raises(InvalidQueryError):
        query.search("database", mode="hybrid", limit=2, cursor=first.next_cursor)  # another request's cursor


def test_vectors_in_a_file_are_reused_by_the_next_process(tmp_path: Path) -> None:
    store = dshpy.open_store(f"sqlite:///{tmp_path / 's.db'}")
    for text in PROMPTS:
        _say(store, text)
    path = tmp_path / "vectors.sqlite"
    SessionQuery(store, embedder=StaticModelEmbedder(), vectors=VectorStore(path)).search("x", mode="semantic")
    embedder = CountingEmbedder()
    again = SessionQuery(store, embedder=embedder, vectors=VectorStore(path))
    assert len(again.search("bread", mode="semantic").hits) == 3
    assert embedder.texts == ["bread"]  # only the query
    assert again.semantic.vectors.count() == (3, 3)
    store.close()


def test_background_sync_embeds_before_the_first_search(store: dshpy.SessionStore) -> None:
    _say(store, *PROMPTS)
    embedder = CountingEmbedder()
    query = SessionQuery(store, embedder=embedder)
    query.semantic.sync_in_background().join(timeout=30)
    assert len(embedder.texts) == 3
    query.search("bread", mode="hybrid")
    assert len(embedder.texts) == 4


def test_the_local_model_is_deterministic_and_offline() -> None:
    embedder = StaticModelEmbedder()
    assert embedder.name == STATIC_MODEL_NAME
    one, two = embedder.embed(["hello world", "hello world"])
    assert one == two and len(one) == 64
    assert embedder.embed([]) == []


def test_bad_input_is_refused_clearly(store: dshpy.SessionStore) -> None:
    query = SessionQuery(store)
    with pytest.raises(InvalidQueryError, match="mode must be one of fts, semantic, hybrid"):
        query.search("x", mode="vector")
    with pytest.raises(InvalidQueryError):
        query.search("", mode="semantic")
    with pytest.raises(InvalidQueryError):
        query.search("a\x00b", mode="hybrid")


def test_without_the_extra_the_error_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "numpy", None)
    with pytest.raises(SemanticUnavailableError, match=r"pip install 'dshpy\[semantic\]'") as caught:
        require_numpy()
    assert caught.value.code == "SESSION_QUERY_SEMANTIC_UNAVAILABLE"
    store = dshpy.open_store("memory://")
    with pytest.raises(SemanticUnavailableError, match=r"pip install 'dshpy\[semantic\]'"):
        SessionQuery(store).search("anything", mode="semantic")


def test_without_the_model_package_the_error_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "static_model", None)
    with pytest.raises(SemanticUnavailableError, match=r"pip install 'dshpy\[semantic\]'"):
        StaticModelEmbedder()


def test_core_dshpy_does_not_import_the_extra() -> None:
    code = "import sys, dshpy, dshpy.query; print('numpy' in sys.modules, 'static_model' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_reciprocal_rank_fusion_rewards_agreement() -> None:
    fused = reciprocal_rank_fusion(["a", "b", "c"], ["c", "a", "d"])
    assert [item for item, _ in fused] == ["a", "c", "b", "d"]
    assert fused[0][1] == pytest.approx(1 / 61 + 1 / 62)
