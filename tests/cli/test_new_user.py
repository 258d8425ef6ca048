"""What a new user meets with ``run``, ``chat``, ``show`` and ``list`` (issue 18), through click's runner.

The model is :class:`FakeModelServer` over real HTTP; the store a real SQLite file.
"""

from __future__ import annotations

import io
import json
import re

import pytest

import dshpy
from dshpy.cli.live import LivePrinter
from dshpy.testing.fake_model import FakeModelServer, Reply, SilentPort


@pytest.fixture
def model(monkeypatch):
    with FakeModelServer(default=Reply.text("Default answer.")) as server:
        monkeypatch.setenv("DEEPSEEK_API_KEY", "test-key")
        monkeypatch.setenv("DEEPSEEK_BASE_URL", server.base_url)
        monkeypatch.delenv("DEEPSEEK_MODEL", raising=False)
        yield server


def stored(store_url, session_id):
    store = dshpy.open_store(store_url)
    try:
        return store.inspect(session_id)
    finally:
        store.close()


def session_id_of(result) -> str:
    line = next(line for line in result.stderr.splitlines() if line.startswith("session: "))
    return line.removeprefix("session: ")


def cut_then_ok() -> list[Reply]:
    return [Reply.deltas("This stream ", "will b", "reak off").cut(3), Reply.text("second try worked")]


# -- 1, 8, 13: a failed try's text, the retry note, the session id --------------------------------


def test_a_pipe_gets_only_the_answer_the_log_keeps(dshpy_cli, model, store_url):
    model.add(*cut_then_ok())
    result = dshpy_cli("run", "hello")
    assert result.stdout == "second try worked\n"
    assert "This stream" not in result.stdout
    assert result.stderr.splitlines()[0].startswith("session: session-")  # first, before any model call
    assert "(the model call failed)" not in result.stderr
    retries = [line for line in result.stderr.splitlines() if "retrying" in line]
    assert len(retries) == 1 and "the model call failed: " in retries[0] and "(1 of " in retries[0]
    session = stored(store_url, session_id_of(result))
    assert [e.type for e in session.events].count("assistant/attempt") == 1
    assert session.derive_messages()[-1].text == "second try worked"


def test_a_terminal_sees_the_partial_text_marked_discarded():
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    out, err = Terminal(), io.StringIO()
    printer = LivePrinter(out=out, err=err)
    session = dshpy.open_store("memory:").create()

    async def turn() -> None:
        with FakeModelServer() as server:
            server.add(*cut_then_ok())
            from dshpy.agent import Agent
            from dshpy.llm.client import ChatClient, ModelConfig
            from dshpy.llm.retry import RetryPolicy

            config = ModelConfig(api_key="k", base_url=server.base_url)
            async with ChatClient(config) as client:
                agent = Agent(session, client, retry=RetryPolicy(base_delay=0.001, jitter=0))
                await agent.run("hi", on_chunk=printer.on_chunk, on_event=printer.on_event)
        printer.end_line()

    import asyncio

    asyncio.run(turn())
    assert out.getvalue() == "This stream will b\nsecond try worked\n"  # live, as it streamed
    notes = err.getvalue().splitlines()
    assert notes[0].startswith("↑ discarded")  # right after the partial text, before the retry note
    assert "retrying (1 of" in notes[1]


# -- 3: refused runs write nothing -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("moves", "message"),
    [
        (["pause"], "is paused — `dshpy sessions resume {id}` first"),
        (["archive"], "is archived and read-only"),
    ],
)
def test_a_refused_run_writes_nothing(dshpy_cli, model, store_url, moves, message):
    session_id = session_id_of(dshpy_cli("run", "first"))
    for move in moves:
        dshpy_cli("sessions", move, session_id)
    before = [e.type for e in stored(store_url, session_id).events]
    result = dshpy_cli("run", "second", "--session", session_id, code=1)
    assert f"Error: session {session_id} {message.format(id=session_id)}" in result.stderr
    assert "end-seed" not in result.stderr and "refused" not in result.stderr
    assert [e.type for e in stored(store_url, session_id).events] == before
    assert len(model.requests) == 1


# -- 4, 5, 6: outcomes, failed, titles, first token ------------------------------------------------


def test_a_failed_run_is_failed_in_list_and_show(dshpy_cli, monkeypatch, store_url):
    with SilentPort() as port:
        url = port.base_url
    monkeypatch.setenv("DEEPSEEK_API_KEY", "test-key")
    monkeypatch.setenv("DEEPSEEK_BASE_URL", url)  # nothing listens there any more
    result = dshpy_cli("run", "hello there", "--connect-timeout", "1", code=1)
    session_id = session_id_of(result)
    listed = json.loads(dshpy_cli("sessions", "list", "--json").stdout)
    assert (listed[0]["lifecycle"], listed[0]["lastTurn"]) == ("failed", "error")
    shown = dshpy_cli("sessions", "show", session_id).stdout
    assert re.search(r"turn 1: ✗ error: cannot reach the model server", shown)
    document = json.loads(dshpy_cli("sessions", "show", session_id, "--json").stdout)
    assert document["turns"][0]["outcome"] == "error"
    assert (document["title"], document["titleSource"]) == ("hello there", "prompt")
    stats = json.loads(dshpy_cli("sessions", "stats", session_id, "--json").stdout)
    assert stats["title"] == document["title"]
    assert stats["stats"]["ttftCount"] == 0  # calls that never connected have no first token
    assert stats["lifecycle"]["state"] == "failed"


def test_an_aborted_turn_is_marked_in_show_and_list(dshpy_cli, model, store_url):
    store = dshpy.open_store(store_url)
    session = store.create(session_id="cancelled")
    from dshpy.testing.builders import TurnScript

    TurnScript(session).turn("do it")
    session.append("turn/start", {"turn": 2})
    session.append("turn/end", {"turn": 2, "reason": {"kind": "aborted", "reason": {"kind": "user"}}})
    session.flush()
    session.close()
    store.close()
    shown = dshpy_cli("sessions", "show", "cancelled").stdout
    assert "turn 1: ✓ completed" in shown and "turn 2: ⊘ aborted: by user" in shown
    listed = dshpy_cli("sessions", "list").stdout
    assert "active · aborted" in listed


def test_show_of_a_crashed_session_shows_its_closing(dshpy_cli, store):
    from cli_support import build_session

    build_session(store, "crashed", turns=1, open_turn=True)
    shown = dshpy_cli("sessions", "show", "crashed").stdout
    assert "are shown below but not stored" not in shown
    assert "turn 2: ⚠ interrupted (not stored: `repair` appends it)" in shown
    assert "would close it, with 1 closing event not stored yet." in " ".join(shown.split())


# -- 9, 10, 12 -------------------------------------------------------------------------------------


def test_an_answer_cut_at_the_token_limit_says_so_and_exits_3(dshpy_cli, model):
    model.add(Reply.length("Half an ans"))
    result = dshpy_cli("run", "long please", code=3)
    assert result.stdout == "Half an ans\n"
    assert "cut at the token limit" in result.stderr


def test_the_prompt_comes_from_stdin(dshpy_cli, model):
    dshpy_cli("run", "-", stdin="piped question\n")
    dshpy_cli("run", stdin="also piped")
    assert [r["messages"][-1]["content"] for r in model.requests] == ["piped question\n", "also piped"]
    assert "the prompt is empty" in dshpy_cli("run", "  ", code=1).stderr
    assert "the prompt is empty" in dshpy_cli("run", "-", stdin="", code=1).stderr
    assert len(model.requests) == 2


def test_chat_json_is_refused(dshpy_cli, model, db_path):
    result = dshpy_cli("chat", "--json", stdin="hi\n", code=1)
    assert "chat has no --json output" in result.stderr
    assert not model.requests and not db_path.exists()


def test_a_memory_store_warns_that_the_session_is_gone_after(runner, model):
    from cli_support import run_cli

    result = run_cli(runner, ["--store", "memory:", "run", "hi"])
    assert "gone when dshpy exits" in result.stderr


# -- 7 ---------------------------------------------------------------------------------------------


def test_an_unparsable_base_url_is_one_line_and_writes_nothing(dshpy_cli, monkeypatch, db_path):
    monkeypatch.setenv("DEEPSEEK_API_KEY", "test-key")
    result = dshpy_cli("run", "hi", "--base-url", "http://[::1", code=1)
    assert result.stderr.startswith("Error: malformed model base URL 'http://[::1'") and result.stderr.count("\n") == 1
    assert not db_path.exists()


def test_an_unreachable_server_is_named(dshpy_cli, monkeypatch):
    with SilentPort() as port:
        url = port.base_url
    monkeypatch.setenv("DEEPSEEK_API_KEY", "test-key")
    result = dshpy_cli("run", "hi", "--base-url", url, "--connect-timeout", "1", code=1)
    assert f"Error: cannot reach the model server at {url}" in result.stderr
