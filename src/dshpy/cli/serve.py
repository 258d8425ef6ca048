"""``dshpy serve``: the JSON-RPC server over stdio (default) or HTTP (see README "Server")."""

from __future__ import annotations

import logging
import sys

import click

from dshpy.telemetry import TelemetrySwitch

from .app import AppState, CliError, common_options, pass_state
from .model_options import compaction_options, model_timeout_options
from .telemetry_options import telemetry_options
from .tool_options import ToolFlags, tool_options

__all__ = ["serve"]


@click.command("serve")
@click.option("--stdio", "transport", flag_value="stdio", default=True, help="Newline-delimited JSON-RPC (default).")
@click.option("--http", "transport", flag_value="http", help="JSON-RPC over HTTP POST + Server-Sent Events.")
@click.option("--host", default="127.0.0.1", show_default=True, help="HTTP bind address (non-loopback needs a token).")
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True, help="HTTP port (0: any).")
@click.option("--token", envvar="DSHPY_TOKEN", metavar="TOKEN", help="Bearer token required on HTTP ($DSHPY_TOKEN).")
@click.option("--profile", default="sdk", show_default=True, help="Profile in $DSHPY_HOME/config.toml.")
@click.option("--model", help="Model name (default: the profile's, $DEEPSEEK_MODEL, else deepseek-chat).")
@click.option("--base-url", metavar="URL", help="OpenAI-compatible API base URL (default: $DEEPSEEK_BASE_URL).")
@click.option("--system", metavar="TEXT", help="System prompt for new turns (default: keep each session's).")
@click.option(
    "--max-live-sessions",
    type=click.IntRange(min=1),
    default=64,
    show_default=True,
    help="Sessions held open at once; the least recently used idle one is closed (it reopens on demand).",
)
@click.option(
    "--idle-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=600.0,
    show_default=True,
    help="Seconds after which an idle session is closed.",
)
@click.option(
    "--max-queued-prompts",
    type=click.IntRange(min=1),
    default=16,
    show_default=True,
    help="Prompts waiting behind a session's running turn; more are refused (JSON-RPC error -32007).",
)
@click.option(
    "--max-queued-bytes",
    type=click.IntRange(min=1),
    default=16 << 20,
    show_default=True,
    help="Bytes of prompt text waiting in all sessions together; more are refused (-32007).",
)
@click.option("--max-steps", type=click.IntRange(min=1), default=25, show_default=True, help="Model calls per turn.")
@click.option("--max-tokens", type=click.IntRange(min=1), help="Token limit of each answer.")
@model_timeout_options
@compaction_options
@click.option(
    "--max-request-bytes", type=click.IntRange(min=1024), default=1 << 20, show_default=True, help="Frame size limit."
)
@click.option(
    "--allowed-origin",
    "allowed_origins",
    multiple=True,
    metavar="ORIGIN",
    help="HTTP: a browser origin (scheme://host[:port]) allowed besides the server's own; repeatable.",
)
@click.option("--allow-http-shutdown", is_flag=True, help="HTTP: accept the shutdown method (refused by default).")
@click.option(
    "--ui/--no-ui",
    default=True,
    show_default=True,
    help="HTTP: serve the web UI under /ui/ (as dshpy ui does, behind the same token, Host and Origin checks).",
)
@click.option(
    "--head-timeout",
    type=click.FloatRange(min=0.1),
    default=10.0,
    show_default=True,
    help="HTTP: seconds a client has to send a request's line and headers.",
)
@click.option(
    "--body-timeout",
    type=click.FloatRange(min=0.1),
    default=30.0,
    show_default=True,
    help="HTTP: seconds a client has to send a request's body.",
)
@click.option(
    "--max-connections",
    type=click.IntRange(min=1),
    default=256,
    show_default=True,
    help="HTTP: open connections at most (idle ones are dropped first).",
)
@click.option(
    "--max-streams", type=click.IntRange(min=1), default=64, show_default=True, help="HTTP: /events streams at most."
)
@click.option(
    "--memory/--no-memory",
    default=None,
    help="Give the agents the session_search and session_read tools over the store (default: the profile's "
    "memory, else off).",
)
@click.option(
    "--memory-scope",
    type=click.Choice(["cwd", "all"]),
    help="What the memory tools see: sessions of the session's working directory (cwd, default) or all "
    "(implies --memory).",
)
@click.option(
    "--vectors",
    metavar="FILE",
    type=click.Path(dir_okay=False),
    help="Keep session.search's semantic vectors in FILE (default: in memory while the server runs).",
)
@click.option("-v", "--verbose", is_flag=True, help="Log requests and turns on stderr.")
@telemetry_options
@tool_options
@common_options
@pass_state
def serve(
    state: AppState,
    transport: str,
    host: str,
    port: int,
    token: str | None,
    profile: str,
    model: str | None,
    base_url: str | None,
    system: str | None,
    max_live_sessions: int,
    idle_timeout: float,
    max_queued_prompts: int,
    max_queued_bytes: int,
    max_steps: int,
    max_tokens: int | None,
    connect_timeout: float | None,
    read_timeout: float | None,
    total_timeout: float | None,
    context_window: int | None,
    auto_compact: bool | None,
    max_request_bytes: int,
    allowed_origins: tuple[str, ...],
    allow_http_shutdown: bool,
    ui: bool,
    head_timeout: float,
    body_timeout: float,
    max_connections: int,
    max_streams: int,
    memory: bool | None,
    memory_scope: str | None,
    vectors: str | None,
    verbose: bool,
    telemetry: TelemetrySwitch,
    tooling: ToolFlags,
) -> None:
    """Serve sessions over JSON-RPC: dsh's SDK protocol plus dshpy's session.* methods.

    Over HTTP, one token is one trusted principal: whoever holds it may read any session and change the server's
    model settings. Browser pages from other origins are refused, and shutdown is refused unless
    --allow-http-shutdown. The web UI is served under /ui/ on the same port (--no-ui: not).
    """
    from dshpy.sdk.profiles import ProfileError
    from dshpy.server.http import InsecureBindError
    from dshpy.server.limits import ServerLimits
    from dshpy.server.main import ServeOptions, run_server

    logging.basicConfig(
        stream=sys.stderr, level=logging.INFO if verbose else logging.WARNING, format="dshpy serve: %(message)s"
    )
    cost = None
    if transport == "http" and ui:
        from .ui import ui_cost

        cost = ui_cost()

    options = ServeOptions(
        store_url=state.store_url,
        profile=profile,
        limits=ServerLimits(
            max_live_sessions=max_live_sessions,
            idle_seconds=idle_timeout,
            max_queued_prompts=max_queued_prompts,
            max_queued_bytes=max_queued_bytes,
        ),
        model=model,
        base_url=base_url,
        max_tokens=max_tokens,
        system=system,
        max_steps=max_steps,
        connect_timeout=connect_timeout,
        read_timeout=read_timeout,
        total_timeout=total_timeout,
        http=transport == "http",
        host=host,
        port=port,
        token=token or None,
        max_request_bytes=max_request_bytes,
        allowed_origins=allowed_origins,
        allow_http_shutdown=allow_http_shutdown,
        head_timeout=head_timeout,
        body_timeout=body_timeout,
        max_connections=max_connections,
        max_streams=max_streams,
        telemetry=telemetry,
        context_window=context_window,
        auto_compact=auto_compact,
        tools=tooling.tools,
        permissions=tooling.permissions,
        approval=tooling.approval,
        allow_unsandboxed_shell=tooling.allow_unsandboxed_shell,
        memory=memory,
        memory_scope=memory_scope,
        vectors=vectors,
        ui=ui,
        ui_cost=cost,
    )
    try:
        code = run_server(options)
    except (ProfileError, InsecureBindError, ValueError) as error:  # ValueError: limits, ModelConfigError, OTEL_*
        raise CliError(str(error)) from None
    except OSError as error:
        raise CliError(f"cannot serve: {error}") from None
    if code:
        raise click.exceptions.Exit(code)
