"""``dshpy sessions list`` with filters or a cursor: the query service's paged listing.

Without any of ``--cwd``, ``--state``, ``--since``, ``--parent`` or ``--cursor`` the
command lists as it always has (newest activity first, ``--json`` an array); with one
of them it pages :meth:`~dshpy.query.SessionQuery.list` (newest created first) and
``--json`` prints the page, ``{"sessions": […], "nextCursor": …}``, so a script can
follow the cursor. The table is the same in both modes.
"""

from __future__ import annotations

from typing import Any

import click
from rich.text import Text

from dshpy.query import SessionPage, SessionQuery
from dshpy.query import SessionSummary as QuerySummary

from . import render
from .app import AppState, emit_json
from .search import since_option_value
from .summary import SessionSummary, preview

__all__ = ["list_filters", "print_filtered_listing"]


def list_filters(
    cwds: tuple[str, ...], states: tuple[str, ...], since: str | None, parents: tuple[str, ...]
) -> dict[str, Any]:
    """The ``SessionFilter`` mapping of the options given (an empty mapping: none was)."""
    filters: dict[str, Any] = {}
    if cwds:
        filters["cwd"] = list(cwds)
    if states:
        filters["state"] = list(states)
    if since is not None:
        filters["created_from"] = since_option_value(since)
    if parents:
        filters["parent"] = list(parents)
    return filters


def _row(summary: QuerySummary) -> SessionSummary:
    """A query summary as a ``sessions list`` row (the query does not say where a title came from)."""
    title = preview(summary.title) if summary.title else None
    return SessionSummary(summary.info, summary.turns or 0, title, None, summary.state, error=summary.error)


def print_filtered_listing(
    state: AppState, filters: dict[str, Any], *, limit: int | None, cursor: str | None
) -> SessionPage:
    """Print one page of the filtered listing (table, or the page as JSON) and return it."""
    page = SessionQuery(state.open_store(create=False)).list(filters, limit=limit, cursor=cursor)
    if state.json:
        emit_json(page.to_dict())
        return page
    if page.sessions:
        state.print_table(render.sessions_table([_row(s) for s in page.sessions], state.terminal_width))
    else:
        state.out.print(Text(f"no matching sessions in {state.url}", style="dim"))
    if page.next_cursor is not None:
        click.echo(f"more: --cursor {page.next_cursor}", err=True)
    return page
