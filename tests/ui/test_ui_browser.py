"""The web UI in a real headless Chromium (Debian's ``chromium``, driven by Playwright).

Skipped, saying why, when Playwright or the browser is missing (``.ci/run`` installs
both). Screenshots of each view go to the test's tmp dir; with ``DSHPY_UI_SCREENSHOTS=DIR``
they are also written to DIR (that is how ``docs/screenshots/`` is refreshed).
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ui_support import HOSTILE, Running, page_url

from dshpy.testing.builders import TurnScript
from dshpy.testing.fake_model import FakeModelServer, Reply
from dshpy.testing.showcase import SUMMARY, TOOL_ERROR

playwright_api = pytest.importorskip(
    "playwright.sync_api", reason="Playwright is not installed (pip install playwright)"
)
CHROMIUM = os.environ.get("DSHPY_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
if CHROMIUM is None:
    pytest.skip("no chromium on PATH (apt-get install chromium, or set DSHPY_CHROMIUM)", allow_module_level=True)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with playwright_api.sync_playwright() as driver:
        launched = driver.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh page that fails the test on any dialog (alert, confirm) or uncaught script error."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    opened = context.new_page()
    problems: list[str] = []
    opened.on("dialog", lambda dialog: (problems.append(f"dialog: {dialog.message}"), dialog.dismiss()))
    opened.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    yield opened
    context.close()
    assert problems == []


def shoot(page: Any, tmp_path: Path, name: str) -> None:
    path = tmp_path / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    target = os.environ.get("DSHPY_UI_SCREENSHOTS")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(target) / f"{name}.png")


def open_session(page: Any, running: Running, session_id: str, tab: str = "transcript") -> None:
    page.goto(page_url(running))
    page.wait_for_selector("body[data-ready=list]")
    page.evaluate("tab => { location.hash = tab; }", f"#/s/{session_id}/{tab}")
    page.wait_for_selector(f"body[data-ready={tab}]")


def test_list_shows_sessions_with_forks_nested_and_hostile_text_as_text(
    page: Any, running: Running, tmp_path: Path
) -> None:
    page.goto(page_url(running))
    page.wait_for_selector("body[data-ready=list]")
    rows = page.locator("table.sessions tbody tr")
    depths = {row.get_attribute("data-session"): row.get_attribute("data-depth") for row in rows.all()}
    assert depths[running.showcase.session_id] == "0"
    assert depths[running.showcase.fork_id] == "1"
    hostile = page.locator(f"tr[data-session='{running.hostile_id}'] td.title-cell a")
    assert HOSTILE.startswith(hostile.inner_text().rstrip("…"))  # the title projection shortens long prompts
    assert hostile.inner_text().startswith("<script>")
    assert page.locator("table.sessions img, table.sessions script, table.sessions b").count() == 0
    shoot(page, tmp_path, "list")
    page.fill("input[name=title]", "config.toml")
    page.click("button[type=submit]")
    page.wait_for_function("() => document.querySelectorAll('table.sessions tbody tr').length === 2")


def test_session_views_show_tools_retry_compaction_timeline_and_forks(
    page: Any, running: Running, tmp_path: Path
) -> None:
    sid = running.showcase.session_id
    open_session(page, running, sid)
    checkpoint = page.locator(".msg.checkpoint")
    assert SUMMARY in checkpoint.inner_text()
    assert not page.locator(".shadowed-list").is_visible()  # collapsed until asked
    page.click("details.shadowed > summary")
    page.click("details.reasoning > summary")
    tool = page.locator(".tool.error")
    assert tool.locator(".name").inner_text() == "read_file"
    assert tool.locator(".result").inner_text() == TOOL_ERROR
    assert tool.locator(".result").evaluate("e => getComputedStyle(e).color") == "rgb(198, 40, 40)"
    assert page.locator("[data-result-of]").count() == 0  # the result sits under its call, not alone
    assert "not part of the history" in page.locator(".aside.attempt").text_content()
    assert "HTTP_503" in page.locator(".aside.retry").inner_text()
    assert page.locator(".msg.checkpoint strong").inner_text() == "8080"  # markdown rendered, safely
    shoot(page, tmp_path, "transcript")

    page.click("[data-tab=timeline]")
    page.wait_for_selector("body[data-ready=timeline]")
    assert page.locator("table.timeline tr").count() == 26
    page.locator("tr[data-seq='10'] summary").click()
    assert '"assistant/attempt"' in page.locator("tr[data-seq='10'] pre").inner_text()
    shoot(page, tmp_path, "timeline")
    page.check("#visible-only")
    page.wait_for_function("() => document.querySelectorAll('table.timeline tr').length === 3")
    seqs = page.locator("table.timeline tr").evaluate_all("rows => rows.map(r => r.dataset.seq)")
    assert seqs == ["2", "19", "24"]

    page.click("[data-tab=forks]")
    page.wait_for_selector("body[data-ready=forks]")
    fork = page.locator(f".node[data-session='{running.showcase.fork_id}']")
    assert f"forked at seq {running.showcase.fork_boundary}" in fork.inner_text()
    shoot(page, tmp_path, "forks")

    page.click("[data-tab=usage]")
    page.wait_for_selector("body[data-ready=usage]")
    assert page.locator("#tokens-chart svg g.bar").count() == 2  # one bar per turn
    first_turn = page.locator("#tokens-chart svg g.bar").first
    assert first_turn.locator("rect").count() == 4  # input, cached, output, reasoning
    assert page.locator("#steps-chart svg g.bar").count() == 3
    shoot(page, tmp_path, "usage")


def test_hostile_message_renders_as_text_and_runs_nothing(page: Any, running: Running) -> None:
    open_session(page, running, running.hostile_id)
    user = page.locator(".msg.user .md")
    assert user.inner_text() == HOSTILE
    assert page.locator(".transcript img, .transcript script, .transcript b").count() == 0
    assert page.locator("h1").inner_text().startswith("<script>window.__xss = 1</script><img")
    assert page.evaluate("() => window.__xss === undefined")


def test_live_session_view_receives_a_new_turn(page: Any, running: Running, tmp_path: Path) -> None:
    session = running.store.create(cwd="/srv/live")
    TurnScript(session).turn("first question")
    session.flush()
    try:
        open_session(page, running, session.id)
        page.wait_for_selector("#status.live")
        assert "first question" in page.locator(".transcript").inner_text()

        def write() -> None:
            time.sleep(0.2)
            TurnScript(session).turn("a question asked while you watched")
            session.flush()

        writer = threading.Thread(target=write)
        writer.start()
        page.wait_for_function(
            "() => document.querySelector('.transcript').innerText.includes('a question asked while you watched')",
            timeout=20_000,
        )
        writer.join(10)
        assert page.locator("#event-count").inner_text() == str(len(session.events))
        shoot(page, tmp_path, "live")
    finally:
        session.close()


def test_a_streaming_answer_grows_in_the_view_and_gives_way_to_the_committed_message(
    page: Any, running: Running, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with running.store.create(cwd="/srv/stream") as session:
        TurnScript(session).turn("an earlier question")
    with FakeModelServer([Reply.deltas("Streaming ", "answer <b>", "arrives ", "piece by piece.").paused(3)]) as model:
        monkeypatch.setenv("DEEPSEEK_API_KEY", "test-key")  # the UI server's runtime makes its model client now
        monkeypatch.setenv("DEEPSEEK_BASE_URL", model.base_url)
        open_session(page, running, session.id)
        page.wait_for_selector("#status.live")
        answers: list[Any] = []
        params = {"sessionId": session.id, "text": "What streams?"}
        frame = {"jsonrpc": "2.0", "id": 1, "method": "session.send", "params": params}

        def send() -> None:  # answers when the turn has ended
            answers.append(
                running.request(
                    "/rpc", method="POST", body=json.dumps(frame).encode(), headers={"Content-Type": "application/json"}
                )
            )

        sender = threading.Thread(target=send)
        sender.start()
        try:
            # the model holds the rest of its answer until released: what shows now can only be the stream
            page.wait_for_function(
                "() => { const d = document.querySelector('#draft .draft-text');"
                " return d !== null && d.textContent === 'Streaming answer <b>'; }",
                timeout=20_000,
            )
            # the prompt was flushed before the model was called: the transcript reloads with it, the draft stays
            page.wait_for_function(
                "() => [...document.querySelectorAll('.msg.user')].some((m) => m.innerText.includes('What streams?'))"
                " && document.querySelector('#draft .draft-text').textContent === 'Streaming answer <b>'",
                timeout=20_000,
            )
            assert answers == [] and sender.is_alive()
            stored = running.store.read(session.id)
            assert not [e for e in stored if e.type == "assistant/message" and e.data["turn"] == 2]
            assert page.locator("#draft b").count() == 0  # streamed text is text too
            shoot(page, tmp_path, "streaming")
            # a view opened mid-answer gets the answer so far: the timeline's last row, marked as not logged
            page.evaluate("tab => { location.hash = tab; }", f"#/s/{session.id}/timeline")
            page.wait_for_function(
                "() => { const d = document.querySelector('tr#draft .draft-text');"
                " return d !== null && d.textContent === 'Streaming answer <b>'; }",
                timeout=20_000,
            )
            assert "not logged yet" in page.locator("tr#draft").inner_text()
            shoot(page, tmp_path, "streaming-timeline")
        finally:
            model.release()
            sender.join(30)
        (status, _headers, body), = answers
        assert status == 200 and json.loads(body)["result"]["content"] == "Streaming answer <b>arrives piece by piece."
        stored = running.store.read(session.id)
        (message,) = [e for e in stored if e.type == "assistant/message" and e.data["turn"] == 2]
        page.wait_for_function(  # the committed event's row replaces the draft row
            f"() => document.querySelector('#draft') === null"
            f" && document.querySelector(\"tr[data-seq='{message.seq}'][data-type='assistant/message']\") !== null",
            timeout=20_000,
        )
        page.evaluate("tab => { location.hash = tab; }", f"#/s/{session.id}/transcript")
        page.wait_for_selector("body[data-ready=transcript]")
        page.wait_for_function(
            "() => document.querySelector('#draft') === null && [...document.querySelectorAll('.msg.assistant')]"
            ".some((m) => m.innerText.includes('Streaming answer <b>arrives piece by piece.'))",
            timeout=20_000,
        )
    assert page.locator(".msg.assistant", has_text="arrives piece by piece.").count() == 1


def test_fork_button_forks_through_json_rpc_and_opens_the_child(page: Any, running: Running) -> None:
    sid = running.showcase.session_id
    before = set(running.store.stat(sid).forks)
    open_session(page, running, sid, "timeline")
    page.locator("tr[data-seq='15'] button.fork").click()
    page.wait_for_selector("body[data-ready=forks]")
    page.wait_for_function(f"() => !location.hash.includes('{sid}')")
    (child,) = set(running.store.stat(sid).forks) - before
    assert page.url.endswith(f"#/s/{child}/forks")
    assert "forked at seq 15" in page.locator(".node.here").inner_text()
    assert running.store.stat(child).parent_session == sid
