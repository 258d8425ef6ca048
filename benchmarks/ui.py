"""First paint of the web UI in a real browser: a 100k-event session's view and a 10k-session list.

    python benchmarks/ui.py [--dir DIR] [--events N] [--sessions N] [--runs N] [--postgres URL]

Builds two SQLite stores in DIR (kept, and reused when they exist: building 10k
sessions takes a minute or more): one session of about N events (whole tool turns),
and N small sessions (with ``--postgres``, the same N sessions in that store too).
Serves them with ``dshpy ui``'s server on loopback and opens each view in headless
Chromium (Debian's, driven by Playwright) in a fresh browser context.
Times are from the navigation's start, read from the page's own Performance API:
``paint`` is the browser's first-contentful-paint, ``head`` when the session header
was drawn, ``ready`` when the view's data was drawn (the transcript's last page, the
list's first page); the slowest JSON request of the load is shown beside them.
``cold`` is the first load on a freshly started server (nothing cached), ``warm`` the
median of the loads after it.
Goal: ready < 1 s.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import dshpy
from dshpy.testing.builders import TurnScript
from dshpy.testing.showcase import build_long_session
from dshpy.ui import UiServer


def _long_store(directory: Path, events: int) -> tuple[str, str]:
    url = f"sqlite:///{directory / f'long-{events}.db'}"
    store = dshpy.open_store(url)
    try:
        found = store.list()
        if found:
            return url, found[0].id
        started = time.perf_counter()
        session_id = build_long_session(store, events=events)
        print(f"built a {events}-event session in {time.perf_counter() - started:.1f} s", file=sys.stderr)
        return url, session_id
    finally:
        store.close()


def _many_store(directory: Path, sessions: int, url: str | None = None) -> str:
    url = url or f"sqlite:///{directory / f'many-{sessions}.db'}"
    store = dshpy.open_store(url)
    try:
        have = len(store.list())
        started = time.perf_counter()
        for number in range(have, sessions):
            session = store.create(cwd=f"/srv/project-{number % 7}")
            TurnScript(session).turn(f"task {number}: list the files")
            session.flush()
            session.close()
        if have < sessions:
            print(f"built {sessions - have} sessions in {time.perf_counter() - started:.1f} s", file=sys.stderr)
        return url
    finally:
        store.close()


class _Serving:
    """A UiServer on a free loopback port, in a background event loop."""

    def __init__(self, url: str) -> None:
        self.store = dshpy.open_store(url)
        self.server = UiServer(self.store, port=0)
        self.loop = asyncio.new_event_loop()
        started = threading.Event()

        def run() -> None:
            self.loop.run_until_complete(self.server.start())
            started.set()
            self.loop.run_until_complete(self.server.http.runtime.closed.wait())

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        started.wait(60)

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.server.stop(), self.loop).result(60)
        self.thread.join(60)
        self.store.close()


_MARKS = """() => {
  const mark = (name) => { const m = performance.getEntriesByName(name); return m.length ? m[0].startTime : null; };
  const paint = performance.getEntriesByName("first-contentful-paint");
  const api = performance.getEntriesByType("resource")
    .filter((r) => r.name.includes("/api/") && !r.name.includes("/live"));
  const slowest = api.length ? Math.max(...api.map((r) => r.responseEnd - r.startTime)) : null;
  return {
    paint: paint.length ? paint[0].startTime : null, head: mark("dshpy-head"), ready: mark("dshpy-ready"), api: slowest
  };
}"""


def _load(browser: Any, serving: _Serving, route: str, ready: str) -> dict[str, float | None]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    token = serving.server.token
    context.add_init_script(f"sessionStorage.setItem('dshpy-ui-token', {token!r});")
    page = context.new_page()
    page.goto(f"http://127.0.0.1:{serving.server.http.port}/ui/#{route}")
    page.wait_for_selector(f"body[data-ready={ready}]", timeout=120_000)
    marks: dict[str, float | None] = page.evaluate(_MARKS)
    context.close()
    return marks


def _measure(browser: Any, url: str, route: str, ready: str, runs: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    serving = _Serving(url)
    try:
        cold = _load(browser, serving, route, ready)
        time.sleep(0.5)
        warm = [_load(browser, serving, route, ready) for _ in range(runs)]
    finally:
        serving.close()
    return cold, warm


def _ms(value: Any) -> str:
    return "   –  " if value is None else f"{value:6.0f}"


def _median(values: list[Any]) -> float | None:
    known = [value for value in values if value is not None]
    return statistics.median(known) if known else None


def _report(name: str, cold: dict[str, Any], warm: list[dict[str, Any]]) -> None:
    median = {key: _median([run[key] for run in warm]) for key in ("paint", "head", "ready", "api")}
    for label, row in (("cold", cold), ("warm", median)):
        print(
            f"{name if label == 'cold' else '':<34} {label}: paint {_ms(row['paint'])} head {_ms(row['head'])} "
            f"ready {_ms(row['ready'])} ms  (slowest API call {_ms(row['api'])} ms)"
            + (f"  median of {len(warm)}" if label == "warm" else "")
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--dir", type=Path, default=None, help="where the stores are built/reused (default: a temp dir)"
    )
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5, help="warm loads per view")
    parser.add_argument(
        "--postgres",
        metavar="URL",
        help="also list N sessions kept in this PostgreSQL store (built there once, e.g. ?schema=dshpy_ui_bench)",
    )
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    chromium = os.environ.get("DSHPY_CHROMIUM") or shutil.which("chromium")
    if chromium is None:
        sys.exit("needs Debian's chromium (apt-get install chromium) or DSHPY_CHROMIUM")
    temporary = None
    if args.dir is None:
        temporary = tempfile.TemporaryDirectory(prefix="dshpy-ui-bench-")
        args.dir = Path(temporary.name)
    args.dir.mkdir(parents=True, exist_ok=True)
    long_url, long_id = _long_store(args.dir, args.events)
    many_url = _many_store(args.dir, args.sessions)
    postgres_url = _many_store(args.dir, args.sessions, args.postgres) if args.postgres else None
    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu"])
        try:
            cold, warm = _measure(browser, long_url, f"/s/{long_id}", "transcript", args.runs)
            _report(f"session view, {args.events} events", cold, warm)
            cold, warm = _measure(browser, many_url, "/", "list", args.runs)
            _report(f"session list, {args.sessions} sessions", cold, warm)
            if postgres_url is not None:
                cold, warm = _measure(browser, postgres_url, "/", "list", args.runs)
                _report(f"session list, {args.sessions} on PostgreSQL", cold, warm)
        finally:
            browser.close()
    if temporary is not None:
        temporary.cleanup()


if __name__ == "__main__":
    main()
