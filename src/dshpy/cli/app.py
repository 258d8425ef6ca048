"""The root ``dshpy`` group: shared options, the store a command works on, and error mapping.

Every command accepts ``--store URL`` and ``--json``, either before the command name
(``dshpy --store … sessions list``) or after it (``dshpy sessions list --store …``);
the one given last wins, then ``$DSHPY_STORE``, then the embedded default.

Exit codes are part of the interface: ``0`` success, ``1`` a user error (bad id, not
found, refused fork, conflict, existing id, missing store, bad usage), ``2`` data
this build cannot trust or read (:class:`~dshpy.CorruptSessionError`,
:class:`~dshpy.FormatVersionError`). Expected failures print one line on stderr,
never a traceback.
"""

from __future__ import annotations

import importlib
import sqlite3
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import IO, Any, TypeVar

import click
from rich.console import Console, RenderableType
from rich.measure import Measurement

from dshpy.core.json import dumps, dumps_indented
from dshpy.errors import (
    ConflictError,
    CorruptSessionError,
    DshError,
    ForkError,
    FormatVersionError,
)
from dshpy.query.errors import QueryError
from dshpy.storage.contract import SessionStore
from dshpy.storage.urls import (
    check_relative_reading,
    default_store_url,
    open_store,
    parse_store_url,
    store_location,
)

__all__ = [
    "EXIT_DATA",
    "EXIT_OK",
    "EXIT_USER",
    "AppState",
    "CliError",
    "DataError",
    "cli",
    "common_options",
    "emit_json",
    "emit_json_line",
    "main",
    "pass_state",
]

EXIT_OK = 0
EXIT_USER = 1
"""A request this store refused or could not match: bad id, not found, fork refused, conflict, usage."""
EXIT_DATA = 2
"""Stored or imported data is damaged, or written in a format this build cannot read."""

_MAX_PIPE_WIDTH = 1_000
"""Widest a table gets when stdout is a pipe or file (it is then printed unclipped, for grep and cut)."""


class CliError(DshError, click.ClickException):
    """A user error, reported as ``Error: <one line>`` on stderr; exit 1."""

    exit_code = EXIT_USER

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(message.split()))


class DataError(CliError):
    """Damaged data, or a format this build cannot read; exit 2."""

    exit_code = EXIT_DATA


class _UsageError(DshError, click.UsageError):
    """A click usage error shown as click shows it, but exiting 1: exit 2 is reserved for bad data."""

    exit_code = EXIT_USER

    def __init__(self, original: click.UsageError) -> None:
        super().__init__(original.message, original.ctx)
        self.original = original

    def show(self, file: IO[Any] | None = None) -> None:
        self.original.show(file)


_API_WORDING = {
    "pass close_open_turn=True": "pass --close-open-turn",
    "pass detach_forks=True": "pass --detach-forks",
}
"""Hints in library messages that name a keyword argument, reworded for the command line."""


def describe_error(error: DshError) -> CliError:
    """The one-line message and exit code of a dshpy error."""
    if isinstance(error, CliError):  # already worded for the command line, with its exit code
        return error
    message = str(error)
    for api, option in _API_WORDING.items():
        message = message.replace(api, option)
    if isinstance(error, CorruptSessionError | FormatVersionError):
        return DataError(message)
    if isinstance(error, ForkError):
        return CliError(f"fork refused ({error.code}): {message}")
    if isinstance(error, ConflictError):
        return CliError(f"conflict: {message}")
    if isinstance(error, QueryError):
        return CliError(f"{message} ({error.code})")
    return CliError(message)


@contextmanager
def translate_errors() -> Iterator[None]:
    """Turn expected failures into :class:`CliError`; usage errors exit 1, not click's 2."""
    try:
        yield
    except _UsageError:
        raise
    except click.UsageError as error:
        raise _UsageError(error) from None
    except DshError as error:
        raise describe_error(error) from None
    except sqlite3.OperationalError as error:  # e.g. "database is locked" outside a wrapped write
        raise CliError(f"store error: {error}") from None
    except sqlite3.DatabaseError as error:
        raise DataError(f"store is damaged: {error}") from None


class DshpyGroup(click.Group):
    """A group whose commands (and their argument parsing) go through :func:`translate_errors`.

    Commands with heavy imports (the agent's model client) can be registered lazily
    (:meth:`add_lazy_command`): their module is imported only when the command runs or
    help lists it, so ``dshpy sessions list`` does not pay for it at startup.
    """

    def add_lazy_command(self, name: str, target: str) -> None:
        """Register ``target`` (``"package.module:attribute"``, a click command) as ``name``, imported on first use."""
        lazy: dict[str, str] = self.__dict__.setdefault("_lazy_commands", {})
        lazy[name] = target

    def list_commands(self, ctx: click.Context) -> list[str]:
        lazy: dict[str, str] = self.__dict__.get("_lazy_commands", {})
        return sorted({*super().list_commands(ctx), *lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        lazy: dict[str, str] = self.__dict__.get("_lazy_commands", {})
        if cmd_name in lazy and cmd_name not in self.commands:
            module_name, _, attribute = lazy[cmd_name].partition(":")
            command = getattr(importlib.import_module(module_name), attribute)
            self.add_command(command, cmd_name)
        return super().get_command(ctx, cmd_name)

    def make_context(
        self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any
    ) -> click.Context:
        with translate_errors():
            return super().make_context(info_name, args, parent, **extra)

    def invoke(self, ctx: click.Context) -> Any:
        with translate_errors():
            return super().invoke(ctx)


@dataclass
class AppState:
    """What the shared options collected, and the store opened from them (once, closed on exit).

    Tests (and embedders) may pass ``AppState(store=…)`` as the context ``obj`` to run
    commands against a store they already hold (it is then never closed by the CLI), and
    consoles to capture rich output.
    """

    store_url: str | None = None
    json: bool = False
    store: SessionStore | None = None
    out_console: Console | None = field(default=None, repr=False)
    err_console: Console | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        if self.store is not None and self.store_url is None:
            return self.store.url
        return self.store_url or default_store_url()

    def open_store(self, *, create: bool) -> SessionStore:
        """The store to work on. Unless ``create``, a file store that does not exist yet is an error
        (reading or changing existing sessions must not leave an empty database behind)."""
        if self.store is not None:
            return self.store
        url = self.url
        check_relative_reading(parse_store_url(url))  # before "no store at tmp/x" could mislead
        if not create:
            location = store_location(parse_store_url(url))
            if location is not None and not location.exists():
                raise CliError(
                    f"no store at {location} ({url}); nothing has been stored there yet — "
                    "pass --store URL or set DSHPY_STORE"
                )
        store = open_store(url)
        self.store = store
        click.get_current_context().find_root().call_on_close(store.close)
        return store

    @property
    def out(self) -> Console:
        """Rich console on stdout (no auto-highlighting: data is shown as it is)."""
        if self.out_console is None:
            console = Console(highlight=False)
            console.size = console.size  # measured once: rich would ask the terminal again on every print
            self.out_console = console
        return self.out_console

    @property
    def terminal_width(self) -> int | None:
        """The terminal's width in columns, or ``None`` when stdout is a pipe or file (no limit)."""
        console = self.out
        return console.width if console.is_terminal else None

    def print_table(self, table: RenderableType) -> None:
        """Print a table (or anything holding one) at the terminal's width, or unclipped when stdout is not a
        terminal."""
        console = self.out
        if not console.is_terminal:
            wide = Console(highlight=False, width=_MAX_PIPE_WIDTH, no_color=True, file=console.file)
            wide.width = Measurement.get(wide, wide.options, table).maximum
            console = wide
        console.print(table)

    @property
    def err(self) -> Console:
        """Rich console on stderr: progress bars and notes, never data."""
        if self.err_console is None:
            self.err_console = Console(stderr=True, highlight=False)
        return self.err_console


pass_state = click.make_pass_decorator(AppState, ensure=True)


def _set_store(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value is not None:
        ctx.ensure_object(AppState).store_url = value


def _set_json(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value:
        ctx.ensure_object(AppState).json = True


_STORE_HELP = (
    "Store URL: sqlite:///relative.db, sqlite:////absolute.db, jsonl:////abs/dir, "
    "postgresql://user@host/db?schema=NAME, memory:, "
    "dsh: (dsh's own $DSH_HOME/sessions) (default: $DSHPY_STORE, else $DSHPY_HOME/sessions.db)."
)
_JSON_HELP = "Print a machine-readable JSON result instead of rich text."

F = TypeVar("F", bound=Callable[..., Any])


def common_options(func: F) -> F:
    """``--store`` and ``--json``, accepted on every command as well as on the root."""
    func = click.option("--json", "json_output", is_flag=True, expose_value=False, callback=_set_json, help=_JSON_HELP)(
        func
    )
    func = click.option("--store", metavar="URL", expose_value=False, callback=_set_store, help=_STORE_HELP)(func)
    return func


def emit_json(value: Any) -> None:
    """Write one JSON document (indented) to stdout."""
    click.echo(dumps_indented(value).decode())


def emit_json_line(value: Any) -> None:
    """Write one compact JSON object and a newline to stdout."""
    click.echo(dumps(value))


@click.group(cls=DshpyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--store", metavar="URL", envvar="DSHPY_STORE", expose_value=False, callback=_set_store, help=_STORE_HELP)
@click.option("--json", "json_output", is_flag=True, expose_value=False, callback=_set_json, help=_JSON_HELP)
@click.version_option(package_name="dshpy", prog_name="dshpy")
@click.pass_context
def cli(ctx: click.Context) -> None:
    """dshpy: an agent that talks to a model and keeps every session as an append-only event log
    (DeepSeek Harness's format), plus the tools to inspect, search and manage those sessions.

    \b
    Start here:
      dshpy run "PROMPT"    answer one prompt; session id on stderr
      dshpy chat            a conversation at the prompt (/help)
      dshpy serve --stdio   JSON-RPC for programs (or --http)
      dshpy sessions list   what is stored; then sessions show ID

    \b
    The model: DEEPSEEK_API_KEY (required), DEEPSEEK_BASE_URL
    (any OpenAI-compatible server; default https://api.deepseek.com),
    DEEPSEEK_MODEL (default deepseek-chat). The store: --store URL,
    else $DSHPY_STORE, else $DSHPY_HOME/sessions.db (~/.dshpy).

    Exit codes: 0 ok, 1 user error (bad id, not found, refused, conflict, missing store)
    or a failed turn, 2 corrupt or unsupported data, 3 (run) an answer cut at the token
    limit, 130 interrupted.
    """
    escape_unencodable_output()
    ctx.ensure_object(AppState)


def escape_unencodable_output() -> None:
    """Write what stdout and stderr cannot encode as backslash escapes instead of failing.

    Event data may hold lone UTF-16 surrogates (a file name that is not UTF-8, half an
    emoji cut by a model stream), which no UTF-8 stream can write; printed, they read
    ``\\udcff``, the very escape the log holds. Without this, one such string would
    stop ``sessions log`` or ``run`` with a ``UnicodeEncodeError``.
    """
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            with suppress(ValueError, OSError):  # a closed or unusual stream keeps its settings
                reconfigure(errors="backslashreplace")


def main() -> None:
    """Console-script entry point (``dshpy``); :mod:`dshpy.cli` has registered every command group."""
    cli.main(prog_name="dshpy")
