"""Starting a server: ``dshpy serve`` (see :mod:`dshpy.cli.serve`) and the ``dshpy-runtime`` script.

``dshpy-runtime --profile NAME [--patch FILE]…`` is the command line dsh's official
Python SDK (``deepseek_harness``) launches as its runtime; it serves stdio with the
profile's settings. The SDK sets ``DSH_HOME``: when ``DSHPY_HOME`` is unset, the
runtime uses ``$DSH_HOME/dshpy`` as its home (config and default store), so each
SDK home gets its own sessions. A ``--patch`` (the SDK's ``patches=``) that sets the
``session-persistence-jsonl`` row's root and compression makes the runtime serve
that dsh session root (:mod:`~dshpy.server.dsh_patches`); ``--store`` wins over it.

Like dsh's runtime, ``dshpy-runtime`` writes the runtime-context snapshot and the
fallback ``session/title``, and on the Messages API (``deepseek-official``) sends
each session's log with its requests (``dsh_session_log``, see
:mod:`dshpy.agent.session_log`); ``DSHPY_SESSION_LOG_UPLOAD=0`` keeps the log home.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dshpy.errors import ConfigError
from dshpy.telemetry import TelemetrySwitch

from .limits import ServerLimits

if TYPE_CHECKING:
    from dshpy.agent.memory_tools import MemoryScope
    from dshpy.agent.permissions import Permissions
    from dshpy.sdk.profiles import Profile
    from dshpy.ui.data import UiData

    from .http import HttpServer
    from .methods import Runtime

__all__ = ["ServeOptions", "main", "run_server"]


@dataclass(frozen=True, slots=True)
class ServeOptions:
    """Everything ``dshpy serve`` and ``dshpy-runtime`` configure, with the command line's defaults.

    ``None`` means "not given": the profile's value is used, else the built-in
    default (``store_url``: the profile's store, else the default store under
    ``$DSHPY_HOME``). ``http`` chooses HTTP on ``host``:``port``; otherwise the server
    speaks stdio and the HTTP-only fields are ignored.
    """

    store_url: str | None = None
    profile: str = "sdk"
    limits: ServerLimits = field(default_factory=ServerLimits)
    model: str | None = None
    base_url: str | None = None
    max_tokens: int | None = None
    system: str | None = None
    sdk_semantics: bool = False
    """dsh's SDK runtime rules for dsh's methods (``dshpy-runtime``; :mod:`dshpy.server.sdk_gate`)."""
    max_steps: int = 25
    connect_timeout: float | None = None
    read_timeout: float | None = None
    total_timeout: float | None = None
    http: bool = False
    host: str = "127.0.0.1"
    port: int = 8765
    token: str | None = None
    max_request_bytes: int = 1 << 20
    allowed_origins: tuple[str, ...] = ()
    allow_http_shutdown: bool = False
    head_timeout: float = 10.0
    body_timeout: float = 30.0
    max_connections: int = 256
    max_streams: int = 64
    telemetry: TelemetrySwitch = field(default_factory=TelemetrySwitch)
    """``--otel`` and co.; unset, the profile's ``otel`` key and then ``$DSHPY_OTEL`` decide."""
    context_window: int | None = None
    auto_compact: bool | None = None
    """``None``: ``config.toml``'s ``[compaction] auto`` (default on)."""
    tools: str | None = None
    """Built-in tool set (``None``: the profile's ``tools``, else ``all``)."""
    permissions: str | None = None
    """Permission preset (``None``: the profile's, else ``$DSH_PERMISSION_MODE``, else ``workspace-write``)."""
    approval: str | None = None
    allow_unsandboxed_shell: bool | None = None
    memory: bool | None = None
    """``--memory``/``--no-memory``: the agents' memory tools; ``None``: the profile's ``memory``, else off."""
    memory_scope: str | None = None
    """``--memory-scope``: ``cwd`` or ``all`` (implies ``memory``); ``None``: the profile's, else ``cwd``."""
    vectors: str | None = None
    """``--vectors``: the file ``session.search``'s semantic vectors are kept in; ``None``: in memory."""
    ui: bool = True
    """HTTP: serve the web UI under ``/ui/`` as ``dshpy ui`` does (``--no-ui``: not)."""
    ui_cost: Callable[[Any], dict[str, Any] | None] | None = None
    """Prices a session's usage for the web UI (``dshpy serve`` passes the price table's estimate)."""

    def memory_tools_scope(self, profile_memory: bool | None, profile_scope: str | None) -> MemoryScope | None:
        """What the memory tools see, or ``None`` when they are off: the flags win over the profile, as for ``run``."""
        wanted = self.memory if self.memory is not None else bool(profile_memory) or self.memory_scope is not None
        if not wanted:
            return None
        return "all" if (self.memory_scope or profile_scope) == "all" else "cwd"


def _make_home(url: str, home: Path) -> None:
    """Create ``$DSHPY_HOME`` (0700, as the stores make their directories) when the store lives in it.

    The home holds the sessions and the config; created world-readable, it would expose
    what the stores write below it, and a store creates missing parents with the default mode.
    """
    from dshpy.storage.urls import parse_store_url

    parsed = parse_store_url(url)
    if parsed.scheme not in ("sqlite", "jsonl"):
        return
    home = home.absolute()
    if Path(os.path.abspath(parsed.location)).is_relative_to(home):
        home.mkdir(mode=0o700, parents=True, exist_ok=True)  # the mode applies to the home itself


UPLOAD_ENV = "DSHPY_SESSION_LOG_UPLOAD"


def _upload_enabled() -> bool:
    """``$DSHPY_SESSION_LOG_UPLOAD``: on unless ``0``/``false``/``no``/``off`` (dsh's plugin is on by default)."""
    raw = os.environ.get(UPLOAD_ENV, "").strip().lower()
    if raw in ("", "1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"{UPLOAD_ENV} must be 1 or 0, not {raw!r}")


def _tooling(options: ServeOptions, profile: Profile) -> tuple[tuple[str, ...], Permissions]:
    """The built-in tools and permissions: the options, else the profile, else all tools and dsh's defaults."""
    from dshpy.agent.builtin import ToolSetError, parse_tool_set
    from dshpy.agent.permissions import Permissions

    try:
        tools = parse_tool_set(options.tools or profile.tools or "all")
    except ToolSetError as error:
        raise ConfigError(f"tools: {error}") from None
    unsandboxed = options.allow_unsandboxed_shell
    permissions = Permissions.resolve(
        options.permissions or profile.permissions,
        options.approval or profile.approval,
        unsandboxed if unsandboxed is not None else profile.allow_unsandboxed_shell,
    )
    return tools, permissions


def _mount_ui(server: HttpServer, runtime: Runtime, options: ServeOptions) -> UiData:
    """Put the web UI in front of ``server``'s routes, behind its guard (token, Host, Origin), over its store."""
    from dshpy.ui.data import UiData
    from dshpy.ui.routes import mount_ui

    data = UiData(runtime.store, cost=options.ui_cost)
    server.app, stop_live = mount_ui(server.app, data, server.guard, runtime.streams)
    server.on_stop.append(stop_live)
    return data


def _ui_address(server: HttpServer, token: str | None) -> str:
    """The page's address to announce; a token the user chose is not printed, only where it goes."""
    from dshpy.ui.server import ui_url

    if token is None:
        return ui_url(server.host, server.port, "").removesuffix("#token=")
    return ui_url(server.host, server.port, "<token>") + " (your --token, in the #fragment)"


def run_server(options: ServeOptions, *, announce: bool = True) -> int:
    """Build the store and runtime from ``options`` and serve until shutdown/EOF. Returns an exit code."""
    from dshpy.llm.config import ModelConfig
    from dshpy.plugins import PluginHost, load_plugins
    from dshpy.sdk.model_settings import load_model_settings
    from dshpy.sdk.profiles import load_profile
    from dshpy.storage.urls import default_store_url, dshpy_home, open_store

    from .http import ConnectionLimits, HttpServer
    from .methods import Runtime, ServerSettings
    from .stdio import serve_stdio

    if options.vectors is not None and not Path(options.vectors).absolute().parent.is_dir():
        raise ValueError(f"--vectors {options.vectors}: its directory does not exist")
    profile = load_profile(options.profile)
    model_settings = load_model_settings()
    url = options.store_url or profile.store or default_store_url()
    _make_home(url, dshpy_home())
    auto = options.auto_compact if options.auto_compact is not None else model_settings.auto_compact
    tools, permissions = _tooling(options, profile)
    settings = ServerSettings(
        model=options.model or profile.model,
        base_url=options.base_url or profile.base_url,
        max_tokens=options.max_tokens or profile.max_tokens,
        system_prompt=options.system if options.system is not None else profile.system,
        max_steps=options.max_steps,
        timeouts=profile.timeouts(
            connect=options.connect_timeout, read=options.read_timeout, total=options.total_timeout
        ),
        context_window=options.context_window,
        auto_compact=auto,
        model_settings=model_settings,
        tools=tools,
        permissions=permissions,
        sdk_semantics=options.sdk_semantics,
        dsh_records=options.sdk_semantics,
        session_log_upload=options.sdk_semantics and _upload_enabled(),
        memory=options.memory_tools_scope(profile.memory, profile.memory_scope),
        vectors=options.vectors,
    )
    # Checked now (ModelConfigError), not at the first prompt: a malformed base URL is a
    # configuration mistake, and the server would otherwise start and only fail later.
    ModelConfig.from_env(base_url=settings.base_url, model=settings.model, timeouts=settings.timeouts)
    plugins = load_plugins()  # config.toml's [plugins] and the dshpy.plugins entry points: a PluginError now, not later
    log = logging.getLogger("dshpy.server")

    async def serve() -> None:
        store = open_store(url)
        runtime = Runtime(store, settings, limits=options.limits, plugins=PluginHost(store, plugins))
        try:
            if options.http:
                server = HttpServer(
                    runtime,
                    host=options.host,
                    port=options.port,
                    token=options.token,
                    max_request_bytes=options.max_request_bytes,
                    allowed_origins=options.allowed_origins,
                    allow_shutdown=options.allow_http_shutdown,
                    limits=ConnectionLimits(
                        head_timeout=options.head_timeout,
                        body_timeout=options.body_timeout,
                        max_connections=options.max_connections,
                    ),
                    max_streams=options.max_streams,
                )

                ui = _mount_ui(server, runtime, options) if options.ui else None

                def ready(started: HttpServer) -> None:
                    if ui is not None:
                        ui.warm()
                    if announce:
                        print(f"dshpy serving http://{started.host}:{started.port} (store {url})", file=sys.stderr)
                        if ui is not None:
                            print(f"dshpy web UI: {_ui_address(started, options.token)}", file=sys.stderr)
                        sys.stderr.flush()

                await server.serve(ready)
            else:
                log.info("dshpy serving stdio (store %s)", url)
                await serve_stdio(runtime, max_request_bytes=options.max_request_bytes)
        finally:
            store.close()

    try:
        with options.telemetry.running(profile.otel):  # flushed and shut down when the server stops
            asyncio.run(serve())
    except KeyboardInterrupt:
        return 130
    return 0


def main(argv: Sequence[str] | None = None) -> None:
    """``dshpy-runtime``: the runtime command line of dsh's official Python SDK, served by dshpy."""
    parser = argparse.ArgumentParser(prog="dshpy-runtime", description=main.__doc__)
    parser.add_argument("--profile", default="sdk", help="dshpy profile name (config.toml)")
    parser.add_argument(
        "--patch",
        action="append",
        default=[],
        metavar="FILE",
        help="dsh profile patch list: its session-persistence-jsonl root/compression become the store",
    )
    parser.add_argument("--store", default=None, help="store URL (default: the profile's, else the default store)")
    parser.add_argument(
        "--system-file",
        default=None,
        metavar="FILE",
        help="system prompt (default: a resumed session keeps its own, a new one gets dshpy's)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="dshpy-runtime: %(levelname)s %(message)s")
    if not os.environ.get("DSHPY_HOME") and os.environ.get("DSH_HOME", "").strip():
        os.environ["DSHPY_HOME"] = os.path.join(os.environ["DSH_HOME"], "dshpy")
    from .dsh_patches import store_from_patches
    from .dsh_permission_patches import PERMISSION_ROWS, permissions_from_patches

    try:
        patched = store_from_patches(args.patch)
        allowed = permissions_from_patches(args.patch)
        for path, entry in patched.ignored:
            if entry not in PERMISSION_ROWS:
                note = f"dshpy-runtime: note: ignoring entry {entry!r} of dsh patch {path} (a dsh plugin)"
                print(note, file=sys.stderr)
        system = None
        if args.system_file is not None:
            from dshpy.agent.system_prompt import read_system_file

            system = read_system_file(args.system_file)
        options = ServeOptions(
            store_url=args.store or patched.url,
            profile=args.profile,
            permissions=allowed.preset,
            approval=allowed.approval,
            system=system,
            sdk_semantics=True,
        )
        code = run_server(options)
    except ConfigError as error:  # a profile, the model route, a dsh patch, or telemetry's OTEL_* settings
        print(f"dshpy-runtime: {error}", file=sys.stderr)
        code = 2
    sys.exit(code)
