"""``dshpy run`` and ``dshpy chat``: talk to a model through the agent loop, recording a session.

Both need an API key (``DEEPSEEK_API_KEY``; ``DEEPSEEK_BASE_URL`` points them at any
OpenAI-compatible server). Without ``--session`` they start a new session in the
store (``--store``); with it they reopen one (repairing a crashed turn) and continue
its turn numbering. The system prompt of a continued session is kept unless
``--system`` gives a new one (which then replaces it in the log).

The model settings come from the flags, then the profile (``--profile``, in
``$DSHPY_HOME/config.toml``: ``model``, ``base_url``, ``*_timeout``), then the
``DEEPSEEK_*`` environment, then the defaults; they are checked before the session
is opened, so a malformed base URL is an error message, not a retried request. The
context window is ``--context-window``, else ``config.toml``'s ``[models."NAME"]
context_window``, else the model's default; the agent compacts the history when it
fills up unless ``--no-auto-compact`` (or ``[compaction] auto = false``).

``run`` answers one prompt (``-``, or no prompt with stdin a pipe, reads it from
stdin): the answer streams to stdout, notes (the session id first, tool calls,
retries) go to stderr, ``--json`` prints one result object instead. Exit 0 when the
turn completed, 1 when it failed, 3 when the answer was cut at the token limit, 130
when it was interrupted with Ctrl-C. A session that is paused, completed or archived
is refused before anything is written.

``--otel`` (or the profile's ``otel``, or ``DSHPY_OTEL=1``) records the turns as
OpenTelemetry traces and metrics (README "Telemetry"); they are flushed before the
command exits.

``chat`` is a REPL on stdin: each line is a prompt, except ``/history``, ``/stats``
(tokens, and how full the context is), ``/compact`` (dsh's: condense the history
now, logged as ``command/run`` / ``command/done``), ``/fork [SEQ]`` (continue in a
fork of the session, at SEQ or its end), ``/help`` and ``/exit``. Ctrl-C while the
model answers cancels that turn (logged ``aborted``, the streamed text kept as an
interrupted message) and returns to the prompt.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field, replace
from typing import IO, Any, TypeVar

import click

from dshpy.agent import Agent, TurnResult
from dshpy.agent.compact_command import run_compact_command
from dshpy.agent.loop import DEFAULT_MAX_STEPS
from dshpy.agent.memory_tools import memory_tools
from dshpy.agent.permissions import Permissions, record_permissions
from dshpy.agent.system_prompt import system_prompt_for
from dshpy.agent.tools import Tool
from dshpy.core.ids import check_session_id
from dshpy.errors import DshError
from dshpy.llm.client import API_KEY_HINT, ModelConfig, ModelConfigError
from dshpy.llm.protocol import ModelClient, make_client
from dshpy.log.session import Session
from dshpy.plugins import PluginError, PluginHost, load_plugins
from dshpy.projections.commands import turn_refusal
from dshpy.sdk.model_settings import ModelSettings, load_model_settings
from dshpy.sdk.profiles import ProfileError, load_profile
from dshpy.storage.contract import SessionStore
from dshpy.telemetry import TelemetrySwitch

from . import render
from .app import AppState, CliError, common_options, describe_error, emit_json, pass_state
from .live import LivePrinter
from .model_options import compaction_options, model_timeout_options
from .route_options import chosen_provider, route_options, system_file_text
from .telemetry_options import telemetry_options, telemetry_running
from .tool_options import ToolFlags, terminal_approver, tool_options

__all__ = ["chat", "run"]

EXIT_INTERRUPTED = 130
EXIT_TRUNCATED = 3
"""``run``: the answer was cut at the token limit (``finish_reason: length``; the turn ends ``max-tokens``)."""
T = TypeVar("T")


def _optional_session_id(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    return None if value is None else check_session_id(value)


@dataclass(frozen=True)
class _Options:
    model: str | None
    base_url: str | None
    system: str | None
    max_steps: int
    max_tokens: int | None
    profile: str = "default"
    timeouts: tuple[float | None, float | None, float | None] = (None, None, None)
    """The ``--connect-timeout``, ``--read-timeout`` and ``--total-timeout`` flags."""
    memory: bool | None = None
    """``--memory`` / ``--no-memory`` (``None``: the profile's ``memory``, else off)."""
    memory_scope: str | None = None
    """``--memory-scope`` (``None``: the profile's ``memory_scope``, else ``cwd``)."""
    context_window: int | None = None
    auto_compact: bool | None = None
    """The ``--context-window`` and ``--auto-compact/--no-auto-compact`` flags (``None``: the config file's)."""
    tooling: ToolFlags = field(default_factory=ToolFlags)
    """``--tools``, ``--permissions``, ``--approval``, ``--allow-unsandboxed-shell``."""

    def agent_tools(self, store: SessionStore) -> tuple[list[Tool], Permissions | None]:
        """The built-in tools (asking approvals on the terminal) then the memory tools, and the permissions."""
        try:
            profile = load_profile(self.profile)
        except ProfileError as error:
            raise CliError(str(error)) from None
        builtin, permissions = self.tooling.build(profile, terminal_approver())
        return [*builtin, *self.memory_tools(store)], permissions if builtin else None

    def memory_tools(self, store: SessionStore) -> list[Tool]:
        """The memory tools when the flags or the profile turn them on (the flag wins), else none."""
        try:
            profile = load_profile(self.profile)
        except ProfileError as error:
            raise CliError(str(error)) from None
        scope = self.memory_scope or profile.memory_scope
        wanted = self.memory if self.memory is not None else (profile.memory or self.memory_scope is not None)
        if not wanted:
            return []
        return memory_tools(store, scope="all" if scope == "all" else "cwd")

    def telemetry(self, switch: TelemetrySwitch) -> contextlib.AbstractContextManager[None]:
        """Telemetry for the command: the flags, else the profile's ``otel``, else ``$DSHPY_OTEL``."""
        try:
            configured = load_profile(self.profile).otel
        except ProfileError as error:
            raise CliError(str(error)) from None
        return telemetry_running(switch, configured)

    def config(self) -> ModelConfig:
        connect, read, total = self.timeouts
        try:
            profile = load_profile(self.profile)
            config = ModelConfig.from_env(
                base_url=self.base_url or profile.base_url,
                model=self.model or profile.model,
                timeouts=profile.timeouts(connect=connect, read=read, total=total),
                provider=chosen_provider(),
            )
            config = replace(config, context_window=self.settings().context_window(config.model, self.context_window))
        except (ProfileError, ModelConfigError) as error:
            raise CliError(str(error)) from None
        if not config.api_key:
            raise CliError(f"no API key: {API_KEY_HINT}")
        return config

    def settings(self) -> ModelSettings:
        return load_model_settings()

    def auto(self) -> bool:
        """Whether the agent compacts on its own: the flag, else ``[compaction] auto``, else yes."""
        return self.auto_compact if self.auto_compact is not None else self.settings().auto_compact


def _agent_options(func: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.option(
            "--session",
            "session_id",
            metavar="ID",
            callback=_optional_session_id,
            help="Continue this session (default: start a new one).",
        ),
        click.option("--model", help="Model name (default: $DEEPSEEK_MODEL, else deepseek-chat)."),
        click.option(
            "--base-url",
            metavar="URL",
            help="OpenAI-compatible API base URL (default: $DEEPSEEK_BASE_URL, else https://api.deepseek.com).",
        ),
        click.option(
            "--system", metavar="TEXT", help="System prompt (default: keep the session's; new ones: dshpy's default)."
        ),
        click.option(
            "--max-steps",
            type=click.IntRange(min=1),
            default=DEFAULT_MAX_STEPS,
            show_default=True,
            help="Model calls allowed per turn.",
        ),
        click.option("--max-tokens", type=click.IntRange(min=1), help="Token limit of each answer."),
        click.option("--reasoning", is_flag=True, help="Show the model's reasoning (dimmed, on stderr)."),
        click.option(
            "--memory/--no-memory",
            default=None,
            help="Let the model search and read earlier sessions (session_search, session_read); default: the "
            "profile's memory, else off.",
        ),
        click.option(
            "--memory-scope",
            type=click.Choice(["cwd", "all"]),
            help="What the memory tools see: sessions of the same working directory (cwd, default) or all "
            "(implies --memory).",
        ),
        click.option(
            "--profile",
            default="default",
            show_default=True,
            help="Profile in $DSHPY_HOME/config.toml for the model settings the flags leave unset.",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return tool_options(route_options(telemetry_options(compaction_options(model_timeout_options(func)))))


def _open_session(state: AppState, store: SessionStore, session_id: str | None) -> Session:
    """The session to run in, refused (and closed) before anything is written if it cannot start a turn."""
    session = store.open(session_id) if session_id is not None else store.create(cwd=os.getcwd())
    refusal = turn_refusal(session)
    if refusal is not None:
        session.close()
        raise CliError(_refusal_text(session.id, refusal.state, str(refusal)))
    if store.url.startswith("memory:"):
        click.secho(
            "warning: the store is memory:, so this session is gone when dshpy exits "
            "(pass --store sqlite:///sessions.db or set DSHPY_STORE to keep it)",
            fg="yellow",
            err=True,
        )
    return session


def _refusal_text(session_id: str, state: str, message: str) -> str:
    """The lifecycle's refusal of a turn, worded with the command that gets past it."""
    if state == "paused":
        return f"session {session_id} is paused — `dshpy sessions resume {session_id}` first"
    if state == "archived":
        return f"session {session_id} is archived and read-only"
    return f"{message}: `dshpy sessions fork {session_id}` continues it in a new session"


def _prompt_text(prompt: str | None) -> str:
    """PROMPT, or stdin for ``-`` (and for no PROMPT when stdin is not a terminal); never empty."""
    stdin: IO[str] = sys.stdin
    if prompt == "-" or (prompt is None and not stdin.isatty()):
        prompt = stdin.read()
    if prompt is None:
        raise click.UsageError("missing PROMPT: pass it as an argument, or `-` to read it from stdin")
    if not prompt.strip():
        raise CliError("the prompt is empty: there is nothing to send")
    return prompt


def _system_prompt(session: Session, options: _Options) -> str:
    """``--system``, else ``--system-file``, else the profile's ``system``, else the session's own, else dshpy's."""
    explicit = options.system if options.system is not None else system_file_text()
    if explicit is None:
        try:
            explicit = load_profile(options.profile).system
        except ProfileError as error:
            raise CliError(str(error)) from None
    return system_prompt_for(session, explicit)


def _plugin_host(store: SessionStore) -> PluginHost:
    """The plugins of ``config.toml``'s ``[plugins]`` and the ``dshpy.plugins`` entry points, applied to ``store``."""
    try:
        return PluginHost(store, load_plugins())
    except PluginError as error:
        raise CliError(str(error)) from None


def _make_agent(
    session: Session,
    client: ModelClient,
    options: _Options,
    tools: Sequence[Tool] = (),
    permissions: Permissions | None = None,
    plugins: PluginHost | None = None,
) -> Agent:
    agent = Agent(
        session,
        client,
        system_prompt=_system_prompt(session, options),
        tools=tools,
        max_steps=options.max_steps,
        max_tokens=options.max_tokens,
        auto_compact=options.auto(),
    )
    if permissions is not None:  # dsh's permission/preset, sandbox/mode, approval/policy (when they change)
        record_permissions(session, permissions)
    if plugins is not None:
        plugins.attach(agent)
    return agent


def _result_json(result: TurnResult) -> dict[str, Any]:
    return {
        "sessionId": result.session_id,
        "turn": result.turn,
        "reason": result.reason,
        "text": result.text,
        "steps": result.steps,
        "usage": result.usage,
    }


# -- run ------------------------------------------------------------------------------------


@click.command("run")
@click.argument("prompt", required=False)
@_agent_options
@common_options
@pass_state
def run(
    state: AppState,
    prompt: str | None,
    session_id: str | None,
    model: str | None,
    base_url: str | None,
    system: str | None,
    max_steps: int,
    max_tokens: int | None,
    reasoning: bool,
    memory: bool | None,
    memory_scope: str | None,
    profile: str,
    connect_timeout: float | None,
    read_timeout: float | None,
    total_timeout: float | None,
    telemetry: TelemetrySwitch,
    context_window: int | None,
    auto_compact: bool | None,
    tooling: ToolFlags,
) -> None:
    """Answer PROMPT in a session: the answer streams to stdout, the session id and notes go to stderr.

    PROMPT `-` (or no PROMPT with stdin a pipe) reads the prompt from stdin. Exit 0 when
    the turn completed, 1 when it failed, 3 when the answer was cut at the token limit,
    130 after Ctrl-C.
    """
    prompt = _prompt_text(prompt)
    timeouts = (connect_timeout, read_timeout, total_timeout)
    options = _Options(
        model,
        base_url,
        system,
        max_steps,
        max_tokens,
        profile,
        timeouts,
        memory,
        memory_scope,
        context_window,
        auto_compact,
        tooling,
    )
    config = options.config()
    with options.telemetry(telemetry):
        _run(state, prompt, session_id, options, config, reasoning)


def _run(
    state: AppState, prompt: str, session_id: str | None, options: _Options, config: ModelConfig, reasoning: bool
) -> None:
    store = state.open_store(create=True)
    tools, permissions = options.agent_tools(store)
    plugins = _plugin_host(store)
    session = _open_session(state, store, session_id)
    click.echo(f"session: {render.shown_id(session.id)}", err=True)  # first, so a killed run still named its session
    printer = LivePrinter(reasoning=reasoning)

    async def turn() -> TurnResult:
        client = make_client(config)
        try:
            agent = _make_agent(session, client, options, tools, permissions, plugins)
            try:
                if state.json:
                    return await agent.run(prompt)
                return await agent.run(prompt, on_chunk=printer.on_chunk, on_event=printer.on_event)
            finally:
                await agent.aclose()  # background jobs end with the command (job/settled, cause teardown)
        finally:
            await client.close()

    try:
        try:
            result = asyncio.run(turn())
        except KeyboardInterrupt:
            printer.note(f"interrupted: the turn was logged as aborted (session {session.id})")
            raise click.exceptions.Exit(EXIT_INTERRUPTED) from None
    finally:
        session.close()
    if state.json:
        emit_json(_result_json(result))
    else:
        printer.end_line()
    if result.kind == "error":
        error = result.error or {}
        raise CliError(str(error.get("message", "the turn failed")))
    if result.kind == "blocked":
        raise CliError(f"the turn was blocked: {result.blocked_reason}")
    if result.kind == "max-tokens":
        click.secho("warning: the answer was cut at the token limit (--max-tokens raises it)", fg="yellow", err=True)
        raise click.exceptions.Exit(EXIT_TRUNCATED)


# -- chat -----------------------------------------------------------------------------------

_HELP = "commands: /history  /stats  /compact  /fork [SEQ]  /help  /exit   (Ctrl-C cancels a running answer)"


class _Repl:
    """The chat loop's state: one session, one agent, one event loop for the whole conversation."""

    def __init__(
        self,
        state: AppState,
        store: SessionStore,
        session: Session,
        options: _Options,
        runner: asyncio.Runner,
        client: ModelClient,
        reasoning: bool,
    ) -> None:
        self.state = state
        self.store = store
        self.session = session
        self.options = options
        self.runner = runner
        self.client = client
        self.printer = LivePrinter(reasoning=reasoning)
        self.tools, self.permissions = options.agent_tools(store)
        self.plugins = _plugin_host(store)
        self.agent = _make_agent(session, client, options, self.tools, self.permissions, self.plugins)

    def call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return self.runner.run(coroutine)

    async def _turn(self, text: str) -> TurnResult:
        loop = asyncio.get_running_loop()
        handled = True
        try:
            loop.add_signal_handler(signal.SIGINT, self.agent.cancel)
        except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, or no signals here
            handled = False
        try:
            return await self.agent.run(text, on_chunk=self.printer.on_chunk, on_event=self.printer.on_event)
        finally:
            if handled:
                loop.remove_signal_handler(signal.SIGINT)

    def prompt(self, text: str) -> None:
        refusal = turn_refusal(self.session)
        if refusal is not None:  # nothing is written for a turn the lifecycle refuses
            click.echo(f"Error: {_refusal_text(self.session.id, refusal.state, str(refusal))} (or /fork)", err=True)
            return
        result = self.call(self._turn(text))
        self.printer.end_line()
        if result.kind == "aborted":
            self.printer.note(f"cancelled (turn {result.turn} logged as aborted)")
        elif result.kind == "error":
            error = result.error or {}
            click.echo(f"Error: {error.get('message', 'the turn failed')}", err=True)
        elif result.kind == "max-tokens":
            self.printer.note("(the answer was cut at the token limit)")

    def command(self, line: str) -> bool:
        """Run a slash command; False when the REPL should end."""
        name, _, argument = line.partition(" ")
        argument = argument.strip()
        if name in ("/exit", "/quit"):
            return False
        if name == "/help":
            click.echo(_HELP)
        elif name == "/history":
            render.transcript(self.state.out, self.session)
        elif name == "/stats":
            self.stats()
        elif name == "/compact":
            self.compact(line[len(name) :])
        elif name == "/fork":
            self.fork(argument)
        else:
            click.echo(f"unknown command {name}; {_HELP}", err=True)
        return True

    def stats(self) -> None:
        session = self.session
        turns = session.next_turn - 1
        counted = (
            render.plural(len(session), "event"),
            render.plural(turns, "turn"),
            render.plural(len(session.derive_messages()), "message"),
        )
        line = f"session {session.id}: {', '.join(counted)}"
        try:
            from dshpy.projections import USAGE, state_of
        except ImportError:  # pragma: no cover - projections ship with dshpy; stay useful without them
            click.echo(line)
            return
        usage = state_of(session, USAGE)
        tokens = usage.total
        click.echo(line)
        click.echo(
            f"tokens: {tokens.input_tokens} input, {tokens.cache_read_tokens} cached input, "
            f"{tokens.output_tokens} output ({tokens.reasoning_tokens} reasoning); "
            f"{render.plural(usage.messages, 'model answer')}, "
            f"{render.plural(usage.failed_attempts, 'failed attempt')}, "
            f"{render.plural(usage.summaries, 'compaction summary', 'compaction summaries')}"
        )
        click.echo(f"context: {render.context_text(self.agent.compaction.usage().to_dict())}")

    def compact(self, args: str) -> None:
        """dsh's ``/compact``: logged as ``command/run`` / ``command/done``; its outcome printed as dsh words it."""
        try:
            outcome = self.call(run_compact_command(self.session, self.agent.compaction, args))
        except DshError as error:
            click.echo(f"Error: {describe_error(error).message}", err=True)
            return
        if outcome.ok:
            click.echo(outcome.text)
            click.echo(f"context: {render.context_text(self.agent.compaction.usage().to_dict())}")
        else:
            click.echo(f"Error: {outcome.text}", err=True)

    def fork(self, argument: str) -> None:
        boundary: int | None = None
        if argument:
            try:
                boundary = int(argument)
            except ValueError:
                click.echo(f"Error: /fork takes a seq number, not {argument!r}", err=True)
                return
        try:
            child = self.store.fork(self.session.id, boundary)
        except DshError as error:
            click.echo(f"Error: {describe_error(error).message}", err=True)
            return
        parent = self.session
        system = self.agent.system_prompt
        parent.close()
        self.session = child
        self.agent = _make_agent(child, self.client, self.options, self.tools, self.permissions, self.plugins)
        self.agent.system_prompt = system
        at = child.inherited_event_count - 1
        click.echo(f"forked {parent.id} at seq {at}: now in {child.id}")


@click.command("chat")
@_agent_options
@common_options
@pass_state
def chat(
    state: AppState,
    session_id: str | None,
    model: str | None,
    base_url: str | None,
    system: str | None,
    max_steps: int,
    max_tokens: int | None,
    reasoning: bool,
    memory: bool | None,
    memory_scope: str | None,
    profile: str,
    connect_timeout: float | None,
    read_timeout: float | None,
    total_timeout: float | None,
    telemetry: TelemetrySwitch,
    context_window: int | None,
    auto_compact: bool | None,
    tooling: ToolFlags,
) -> None:
    """Chat with a model in a session: one prompt per line (/help lists the commands)."""
    timeouts = (connect_timeout, read_timeout, total_timeout)
    options = _Options(
        model,
        base_url,
        system,
        max_steps,
        max_tokens,
        profile,
        timeouts,
        memory,
        memory_scope,
        context_window,
        auto_compact,
        tooling,
    )
    config = options.config()
    with options.telemetry(telemetry):
        _chat(state, session_id, options, config, reasoning)


def _chat(state: AppState, session_id: str | None, options: _Options, config: ModelConfig, reasoning: bool) -> None:
    if state.json:
        raise CliError("chat has no --json output; use `dshpy run --json` (one JSON result per prompt)")
    store = state.open_store(create=True)
    session = _open_session(state, store, session_id)
    with asyncio.Runner() as runner:
        client = make_client(config)
        repl = _Repl(state, store, session, options, runner, client, reasoning)
        click.secho(f"session {session.id} · {config.model}\n{_HELP}", dim=True, err=True)
        try:
            while True:
                try:
                    line = input("you> ")
                except EOFError:
                    click.echo()
                    break
                except KeyboardInterrupt:
                    click.echo("\n(/exit or Ctrl-D to leave)", err=True)
                    continue
                line = line.strip()
                if not line:
                    continue
                if line.startswith("/"):
                    if not repl.command(line):
                        break
                    continue
                try:
                    repl.prompt(line)
                except KeyboardInterrupt:  # Ctrl-C outside the turn's own handler: the turn is already closed
                    repl.printer.note("cancelled")
                except DshError as error:
                    raise describe_error(error) from None
        finally:
            runner.run(repl.agent.aclose())  # background jobs end with the chat (job/settled, cause teardown)
            runner.run(client.close())
            repl.session.close()
    click.echo(f"session: {render.shown_id(repl.session.id)}", err=True)
