"""``dshpy sessions search`` and ``dshpy index status|rebuild``: the query service's search on the command line.

Thin over :class:`~dshpy.query.SessionQuery`: the command checks nothing the service
checks itself, so a bad query, filter, limit or cursor is refused with the same
``SESSION_QUERY_*`` code on the command line as over JSON-RPC (exit 1, one line on
stderr, the code in it). ``--json`` prints the page's ``to_dict()``, the very shape
``session.search`` answers with.
"""

from __future__ import annotations

import re
import sqlite3
import time
from typing import TYPE_CHECKING, Any

import click
from rich.table import Table
from rich.text import Text

from dshpy.core.ids import check_session_id
from dshpy.query import SearchHit, SearchIndexStatus, SearchPage, SessionQuery

from . import render
from .app import AppState, CliError, common_options, emit_json, pass_state

if TYPE_CHECKING:
    from dshpy.query.vector_store import VectorStore

__all__ = ["hits_table", "index", "search", "since_option_value"]

_RELATIVE = re.compile(r"^\s*(\d+)\s*([smhdw])\s*$")
_UNIT_MS = {"s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}


def since_option_value(value: str | None, *, now_ms: int | None = None) -> int | str | None:
    """``--since``: a span back from now (``90m``, ``2h``, ``7d``, ``1w``) as epoch ms, or an ISO-8601 time as given.

    People type spans; scripts pass times. An ISO string is left for the service to
    check, so a local time without a zone is refused with the same message everywhere.
    """
    if value is None:
        return None
    relative = _RELATIVE.match(value)
    if relative is None:
        return value
    now = int(time.time() * 1000) if now_ms is None else now_ms
    return now - int(relative.group(1)) * _UNIT_MS[relative.group(2)]


def _session_option(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    return None if value is None else check_session_id(value)


def _marked(hit: SearchHit) -> Text:
    """The snippet with its matches in bold yellow, one line, control characters escaped."""
    snippet = hit.snippet
    text = Text("…" if snippet.truncated_start else "")
    position = 0
    for start, end in snippet.highlights:
        text.append(render.clean(snippet.text[position:start]))
        text.append(render.clean(snippet.text[start:end]), style="bold yellow")
        position = end
    text.append(render.clean(snippet.text[position:]))
    if snippet.truncated_end:
        text.append("…")
    return text


def hits_table(page: SearchPage) -> Table:
    """Hits best first: where to read each (session, seq), its type and time, and the highlighted snippet."""
    table = Table(box=None, header_style="bold", pad_edge=False, expand=False)
    table.add_column("session", no_wrap=True, style="cyan")
    table.add_column("seq", justify="right", no_wrap=True)
    table.add_column("type", no_wrap=True, style="dim")
    table.add_column("time", no_wrap=True, min_width=16)
    table.add_column("snippet", ratio=1, min_width=20)
    for hit in page.hits:
        table.add_row(hit.session_id, str(hit.seq), hit.type, render.format_time(hit.time), _marked(hit))
    return table


def _vector_store(path: str | None) -> VectorStore | None:
    """The ``--vectors`` file (its SQLite table needs no numpy to open), or ``None``: vectors in memory."""
    if path is None:
        return None
    from dshpy.query.vector_store import VectorStore

    try:
        return VectorStore(path)
    except sqlite3.Error as error:
        raise CliError(f"cannot use {path} for vectors: {error}") from None


@click.command("search")
@click.argument("query_text", metavar="QUERY")
@click.option("--session", "session_id", metavar="ID", callback=_session_option, help="Search this session only.")
@click.option("--cwd", "cwds", metavar="DIR", multiple=True, help="Only sessions started in DIR (repeatable).")
@click.option("--type", "types", metavar="TYPE", multiple=True, help="Only events of TYPE, e.g. tool/result.")
@click.option("--since", metavar="TIME", help="Only events since TIME: a span back (2h, 7d) or ISO-8601 with a zone.")
@click.option("--until", metavar="TIME", help="Only events until TIME (same forms as --since).")
@click.option("--limit", type=int, help="Hits per page (1-100, default 20).")
@click.option("--cursor", metavar="CURSOR", help="Continue after a page (its nextCursor).")
@click.option("--operators", is_flag=True, help='Read "phrases", prefix*, -word / NOT word and OR in QUERY.')
@click.option("--semantic", "mode", flag_value="semantic", help="Rank by meaning (needs dshpy[semantic]).")
@click.option("--hybrid", "mode", flag_value="hybrid", help="Fuse word and meaning rankings (needs dshpy[semantic]).")
@click.option(
    "--vectors",
    metavar="FILE",
    type=click.Path(dir_okay=False),
    help="With --semantic/--hybrid: keep the embeddings in FILE, so the next search embeds only what is new.",
)
@common_options
@pass_state
def search(
    state: AppState,
    query_text: str,
    session_id: str | None,
    cwds: tuple[str, ...],
    types: tuple[str, ...],
    since: str | None,
    until: str | None,
    limit: int | None,
    cursor: str | None,
    operators: bool,
    mode: str | None,
    vectors: str | None,
) -> None:
    """Find events by their words, best match first, with the matches highlighted.

    QUERY is one literal phrase (its words in order) unless --operators. --semantic ranks
    by meaning with the local model, --hybrid fuses both rankings; both embed the events
    not embedded yet first (all of them without --vectors). Read a hit in context with
    `dshpy sessions log ID --from SEQ`.
    """
    if vectors is not None and mode is None:
        raise CliError("--vectors needs --semantic or --hybrid")
    filters: dict[str, Any] = {"cwd": list(cwds)} if cwds else {}
    query = SessionQuery(state.open_store(create=False), vectors=_vector_store(vectors))
    page = query.search(
        query_text,
        filters=filters,
        session_id=session_id,
        types=list(types) or None,
        since=since_option_value(since),
        until=since_option_value(until),
        operators=operators,
        limit=limit,
        cursor=cursor,
        mode=mode or "fts",
    )
    if state.json:
        emit_json(page.to_dict())
        return
    if page.hits:
        state.print_table(hits_table(page))
    else:
        state.out.print(Text(f"no matches for {query_text!r}", style="dim"))
    if page.next_cursor is not None:
        click.echo(f"more: --cursor {page.next_cursor}", err=True)


@click.group()
def index() -> None:
    """The store's full-text search index."""


def _print_status(state: AppState, status: SearchIndexStatus) -> None:
    if state.json:
        emit_json(status.to_dict())
        return
    rows = [
        ("kind", status.kind),
        ("documents", "—" if status.documents is None else str(status.documents)),
        ("generation", str(status.generation)),
        ("pending", str(status.pending)),
    ]
    if status.location is not None:
        rows.append(("location", status.location))
    table = Table(box=None, show_header=False, pad_edge=False)
    table.add_column(style="bold")
    table.add_column()
    for name, value in rows:
        table.add_row(name, value)
    state.out.print(table)


@index.command("status")
@common_options
@pass_state
def index_status(state: AppState) -> None:
    """What the index holds: its kind (scan: none, every search reads the logs), events indexed, pending sessions."""
    _print_status(state, SessionQuery(state.open_store(create=False)).index_status())


@index.command("rebuild")
@common_options
@pass_state
def index_rebuild(state: AppState) -> None:
    """Index every stored event again from the logs (open search cursors become stale)."""
    query = SessionQuery(state.open_store(create=False))
    started = time.perf_counter()
    status = query.rebuild_index()
    if not state.json:
        state.err.print(Text(f"rebuilt in {time.perf_counter() - started:.2f} s", style="dim"))
    _print_status(state, status)
