"""``dshpy sessions search --semantic|--hybrid [--vectors FILE]``: ranking by meaning on the command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dshpy.testing.builders import user_message

pytest.importorskip("numpy", reason="semantic search needs the extra: pip install 'dshpy[semantic]'")
pytest.importorskip("static_model", reason="the local model needs the extra: pip install 'dshpy[semantic]'")

PROMPTS = {
    "db": "the database connection was refused on port 5432",
    "bread": "bake a sourdough bread with rye flour and a long proof",
    "config": "parse_config raises KeyError when the section is missing",
}


@pytest.fixture
def sessions(store):
    for session_id, text in PROMPTS.items():
        with store.create(session_id=session_id, cwd="/srv/app") as session:
            session.append("user/message", user_message(text), surface_op="append")
    return store


def _found(dshpy_cli, *args: str) -> list[str]:
    page = json.loads(dshpy_cli("sessions", "search", *args, "--json").stdout)
    return [hit["sessionId"] for hit in page["hits"]]


def test_semantic_finds_a_paraphrase_that_full_text_search_does_not(sessions, dshpy_cli):
    paraphrase = "unable to connect to the postgres server"
    assert _found(dshpy_cli, paraphrase) == []
    assert _found(dshpy_cli, paraphrase, "--semantic")[0] == "db"

    out = dshpy_cli("sessions", "search", paraphrase, "--semantic").stdout
    assert "the database connection was refused on port 5432" in out.splitlines()[1]


def test_hybrid_puts_the_exact_words_first_and_narrows_like_full_text(sessions, dshpy_cli):
    hits = _found(dshpy_cli, "KeyError", "--hybrid")
    assert hits[0] == "config" and sorted(hits) == ["bread", "config", "db"]
    assert _found(dshpy_cli, "KeyError", "--hybrid", "--session", "bread") == ["bread"]
    assert _found(dshpy_cli, "KeyError", "--hybrid", "--cwd", "/elsewhere") == []
    assert _found(dshpy_cli, "KeyError", "--hybrid", "--type", "assistant/message") == []


def test_vectors_file_is_reused_and_catches_up(sessions, dshpy_cli, tmp_path):
    vectors = tmp_path / "vectors.sqlite"
    assert _found(dshpy_cli, "bread", "--semantic", "--vectors", str(vectors))[0] == "bread"
    import sqlite3

    def chunks() -> int:
        with sqlite3.connect(vectors) as db:
            return int(db.execute("SELECT count(*) FROM chunks").fetchone()[0])

    assert chunks() == 3
    with sessions.create(session_id="later", cwd="/srv/app") as session:
        session.append("user/message", user_message("kneading dough for a rye loaf"), surface_op="append")
    assert "later" in _found(dshpy_cli, "bread", "--semantic", "--vectors", str(vectors))
    assert chunks() == 4


def test_bad_mode_requests_are_refused_clearly(sessions, dshpy_cli, tmp_path):
    result = dshpy_cli("sessions", "search", "bread", "--vectors", str(tmp_path / "v.sqlite"), code=1)
    assert "--vectors needs --semantic or --hybrid" in result.stderr
    result = dshpy_cli("sessions", "search", "", "--semantic", code=1)
    assert "SESSION_QUERY_INVALID_QUERY" in result.stderr


def test_without_the_extra_the_command_names_the_install_command(sessions, store_url, tmp_path: Path):
    """A real process in which numpy cannot be imported, as on an install without ``dshpy[semantic]``."""
    code = (
        "import sys; sys.modules['numpy'] = None\n"
        "from dshpy.cli import main\n"
        f"sys.argv = ['dshpy', '--store', {store_url!r}, 'sessions', 'search', 'bread', '--semantic']\n"
        "main()\n"
    )
    env = {**os.environ, "DSHPY_HOME": str(tmp_path / "home")}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60, check=False
    )
    assert done.returncode == 1, done.stderr
    assert "pip install 'dshpy[semantic]'" in done.stderr
    assert "SESSION_QUERY_SEMANTIC_UNAVAILABLE" in done.stderr
    assert "Traceback" not in done.stderr
