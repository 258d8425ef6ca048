"""What a new user meets with ``run``, ``chat``, ``show`` and ``list`` (issue 18), through click's runner.

The model is :class:`FakeModelServer` over real HTTP; the store a real SQLite file.
"""

from __future__ import annotations

import io
import json
import re

import pytest
from cli_support import model_environment, session_id_of, stored

import dshpy
from dshpy.cli.live import LivePrinter
from dshpy.testing.fake_model import FakeModelServer, Reply, SilentPort


@pytest.fixture
def model(monkeypatch):
    with FakeModelServer(default=Reply.text("Default answer.")) as server:
        model_environment(monkeypatch, server)
        yield server


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


def test_ctrl_c_in_run_is_shown_aborted_with_the_partial_answer_marked(dshpy_cli, model, store_url):
    import signal
    import threading

    model.add(Reply.deltas("Partial ", "answer ", "that never ends", chunk_delay=0.5))

    def interrupt() -> None:
        model.wait_for_requests(1)
        threading.Timer(1.3, signal.raise_signal, (signal.SIGINT,)).start()  # after "Partial ", before the end

    threading.Thread(target=interrupt).start()
    result = dshpy_cli("run", "go on", code=130)
    session_id = session_id_of(result)
    shown = dshpy_cli("sessions", "show", session_id).stdout
    assert "(cut off: its turn was stopped while it streamed)" in shown
    assert "turn 1: ⊘ aborted: by user" in shown


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


# -- 10, 11, 14: options and wording ---------------------------------------------------------------


def test_log_refuses_a_type_that_matches_nothing(dshpy_cli, store):
    from cli_support import build_session

    build_session(store, "demo", turns=1)
    refused = dshpy_cli("sessions", "log", "demo", "--type", "nonsense", code=1)
    assert "'nonsense' is not an event type; known types: " in refused.stderr and "turn/start" in refused.stderr
    assert dshpy_cli("sessions", "log", "demo", "--type", "turn/*").stdout.count("turn/") == 2
    assert dshpy_cli("sessions", "log", "demo", "--type", "plugin:me/x").stdout == ""


def test_delete_says_forks_block_it_before_asking(dshpy_cli, store):
    from cli_support import build_session

    build_session(store, "demo", turns=1)
    store.fork("demo", child_id="kid").close()
    refused = dshpy_cli("sessions", "delete", "demo", stdin="y\n", code=1)
    assert "Delete session" not in refused.stderr  # no question whose "yes" would then be refused
    assert "kid" in refused.stderr and "--detach-forks" in refused.stderr
    assert store.exists("demo")


def test_a_three_slash_url_meaning_an_absolute_path_is_refused_with_the_four_slash_form(runner, tmp_path, monkeypatch):
    from cli_support import run_cli

    monkeypatch.chdir(tmp_path)  # no ./tmp here, while /tmp exists
    result = run_cli(runner, ["--store", "jsonl:///tmp/x", "sessions", "list"], code=1)
    assert "names the relative path 'tmp/x'" in result.stderr and "write jsonl:////tmp/x" in result.stderr
    assert not (tmp_path / "tmp").exists()
    plain = run_cli(runner, ["--store", "sqlite:///here.db", "sessions", "import", "-"], code=2, stdin="{}")
    assert "relative path" not in plain.stderr  # a plain name is never refused
    (tmp_path / "data").mkdir()
    under_data = run_cli(runner, ["--store", "jsonl:///data/s", "sessions", "list"], code=1).stderr
    assert "no store at data/s" in under_data  # an existing first directory: the relative reading stands


def test_wording_of_forks_and_existing_ids(dshpy_cli, store, tmp_path):
    from cli_support import build_session

    build_session(store, "restored", turns=1)
    past = dshpy_cli("sessions", "fork", "restored", "--at", "999", code=1)
    assert 'fork boundary 999 is past the end of session "restored" (last seq:' in past.stderr
    exported = tmp_path / "restored.json"
    dshpy_cli("sessions", "export", "restored", "-o", str(exported))
    exists = dshpy_cli("sessions", "import", str(exported), code=1)
    assert exists.stderr == 'Error: session "restored" already exists\n'


def test_list_keeps_turns_state_and_title_at_80_columns(store, store_url):
    from cli_support import build_session, make_runner, run_cli
    from rich.console import Console

    from dshpy.cli.app import AppState

    build_session(store, "session-" + "a" * 32, turns=3, prompt="explain the append-only log in three lines")
    console = Console(width=80, force_terminal=True, no_color=True, highlight=False, record=True, file=io.StringIO())
    run_cli(make_runner(), ["--store", store_url, "sessions", "list"], obj=AppState(out_console=console))
    lines = console.export_text().splitlines()
    assert all(len(line) <= 80 for line in lines)
    assert lines[0].split() == ["id", "date", "cwd", "turns", "state", "title"]
    row = lines[1].split()
    assert row[0] == "session-" + "a" * 32 and "3" in row and "active" in row
    assert "explain" in lines[1]


def test_a_wide_list_never_cuts_the_state(store, store_url):
    """Above the narrow layout rich shares the width out; the title gives way, never the lifecycle state."""
    from cli_support import build_session, make_runner, run_cli
    from rich.console import Console

    from dshpy.cli.app import AppState

    for index in range(2):
        build_session(store, f"session-{index:032x}", turns=1, prompt="what is an append-only log? one line please")
    console = Console(width=140, force_terminal=True, no_color=True, highlight=False, record=True, file=io.StringIO())
    run_cli(make_runner(), ["--store", store_url, "sessions", "list"], obj=AppState(out_console=console))
    lines = console.export_text().splitlines()
    assert all(len(line) <= 140 for line in lines)
    assert "events" in lines[0].split() and "state" in lines[0].split()
    for line in lines[1:]:
        assert "active" in line.split(), line
