"""``dshpy ui``: the local web UI over a store (see README "Web UI")."""

from __future__ import annotations

import asyncio
import sys
import webbrowser
from collections.abc import Callable
from typing import Any

import click

from .app import AppState, CliError, common_options, emit_json_line, pass_state
from .prices import PriceError, estimate_cost, load_prices

__all__ = ["ui"]


@click.command("ui")
@click.option("--host", default="127.0.0.1", show_default=True, help="Loopback address to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=8766, show_default=True, help="Port (0: any free one).")
@click.option("--token", envvar="DSHPY_TOKEN", metavar="TOKEN", help="Bearer token (default: a fresh random one).")
@click.option("--open", "open_browser", is_flag=True, help="Open the page in the default browser.")
@common_options
@pass_state
def ui(state: AppState, host: str, port: int, token: str | None, open_browser: bool) -> None:
    """Browse sessions in a web page: list, transcript, timeline, fork tree, usage; live while they are written.

    Prints the page's URL (the token is in its #fragment). The JSON-RPC endpoint is served on the same port.
    """
    from dshpy.ui.server import UiServer

    store = state.open_store(create=False)
    cost = ui_cost()
    try:
        server = UiServer(store, host=host, port=port, token=token, cost=cost)
    except ValueError as error:
        raise CliError(str(error)) from None

    def ready(started: UiServer) -> None:
        if state.json:
            emit_json_line({"url": started.url, "store": state.url})
        else:
            click.echo(started.url)
            click.echo(f"dshpy ui: serving {state.url} (Ctrl-C stops)", err=True)
        sys.stdout.flush()
        if open_browser:
            webbrowser.open(started.url)

    try:
        asyncio.run(server.serve(ready))
    except KeyboardInterrupt:
        pass
    except OSError as error:
        raise CliError(f"cannot serve: {error}") from None


def ui_cost() -> Callable[[Any], dict[str, Any]]:
    """The cost column of the web UI (``dshpy ui`` and ``serve --http``): the user's price table read once, up front,
    so a malformed table stops the command with its error instead of blanking every row later."""
    try:
        prices = load_prices()
    except PriceError as error:
        raise CliError(str(error)) from None

    def cost(usage: Any) -> dict[str, Any]:
        return estimate_cost(usage, prices)

    return cost
