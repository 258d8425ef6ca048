"""The built-in tool and permission flags of ``dshpy run`` and ``dshpy chat``, and the approval prompt.

``--tools`` picks the built-in tools (``all`` by default, ``read``, ``none``, or
names such as ``read,grep,bash``); ``--permissions`` the preset (default: the
profile's ``permissions``, else ``$DSH_PERMISSION_MODE``, else ``workspace-write``);
``--approval`` the policy (default: the preset's); ``--allow-unsandboxed-shell``
runs shell commands unconfined when bubblewrap is missing instead of refusing them.

When the model asks to widen the sandbox for one operation, :func:`terminal_approver`
asks the user on the terminal (``Allow once? [y/N]``); without a terminal nobody
can answer, and the request fails closed (``unavailable``).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import click

from dshpy.agent.builtin import ToolSetError, builtin_tools, parse_tool_set
from dshpy.agent.permissions import (
    APPROVAL_POLICIES,
    PERMISSION_PRESETS,
    ApprovalOutcome,
    ApprovalRequest,
    Approver,
    PermissionConfigError,
    Permissions,
)
from dshpy.agent.tools import Tool
from dshpy.sdk.profiles import Profile

from .app import CliError

__all__ = ["ToolFlags", "terminal_approver", "tool_options"]

F = TypeVar("F", bound=Callable[..., Any])
_NAMES = ("tools", "permissions", "approval", "allow_unsandboxed_shell")


@dataclass(frozen=True, slots=True)
class ToolFlags:
    """The four flags as given (``None``: not given, the profile or the environment decides)."""

    tools: str | None = None
    permissions: str | None = None
    approval: str | None = None
    allow_unsandboxed_shell: bool | None = None

    def permissions_for(self, profile: Profile) -> Permissions:
        """The flags, else the profile's keys, else ``$DSH_PERMISSION_MODE`` and the defaults."""
        try:
            return Permissions.resolve(
                self.permissions or profile.permissions,
                self.approval or profile.approval,
                self.allow_unsandboxed_shell
                if self.allow_unsandboxed_shell is not None
                else profile.allow_unsandboxed_shell,
            )
        except PermissionConfigError as error:
            raise CliError(str(error)) from None

    def names(self, profile: Profile) -> tuple[str, ...]:
        try:
            return parse_tool_set(self.tools or profile.tools or "all")
        except ToolSetError as error:
            raise CliError(f"--tools: {error}") from None

    def build(self, profile: Profile, approver: Approver | None) -> tuple[list[Tool], Permissions]:
        """The built-in tools to give the agent and the permissions they run under."""
        names = self.names(profile)
        permissions = self.permissions_for(profile)
        return builtin_tools(names, permissions=permissions, approver=approver) if names else [], permissions


def _fold(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    flags = ctx.meta.setdefault("dshpy.tools", {})
    flags[param.name] = value
    if len(flags) == len(_NAMES):
        ctx.params["tooling"] = ToolFlags(**flags)
    return None


def tool_options(func: F) -> F:
    """Add ``--tools``, ``--permissions``, ``--approval``, ``--allow-unsandboxed-shell``, passed on as ``tooling``."""
    options = [
        click.option(
            "--tools",
            metavar="SET",
            expose_value=False,
            callback=_fold,
            help="Built-in tools: all (default), read (read, glob, grep, todo_write), none, or comma-separated "
            "names (read,write,edit,glob,grep,bash,todo_write); default: the profile's tools.",
        ),
        click.option(
            "--permissions",
            type=click.Choice(PERMISSION_PRESETS),
            expose_value=False,
            callback=_fold,
            help="What the tools may change (default: the profile's, else $DSH_PERMISSION_MODE, else "
            "workspace-write: files under the working directory).",
        ),
        click.option(
            "--approval",
            type=click.Choice(APPROVAL_POLICIES),
            expose_value=False,
            callback=_fold,
            help="Whether the model may ask you to widen the sandbox for one operation (default: the preset's; "
            "never for danger-full-access).",
        ),
        click.option(
            "--allow-unsandboxed-shell/--no-allow-unsandboxed-shell",
            default=None,
            expose_value=False,
            callback=_fold,
            help="Run shell commands unconfined when bubblewrap (bwrap) is missing, instead of refusing them "
            "(default: the profile's, else $DSHPY_ALLOW_UNSANDBOXED_SHELL).",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


async def _read_line(prompt: str) -> str:
    """One line typed on the terminal, read on the event loop ("" at end of input).

    Waiting on the loop (not in a thread) lets a cancelled turn — Ctrl-C in ``chat`` —
    stop waiting at once, so the next line typed goes to the REPL, not to a stale prompt.
    """
    loop = asyncio.get_running_loop()
    sys.stderr.write(prompt)
    sys.stderr.flush()
    answer: asyncio.Future[str] = loop.create_future()

    def ready() -> None:
        if not answer.done():
            answer.set_result(sys.stdin.readline())

    fd = sys.stdin.fileno()
    try:
        loop.add_reader(fd, ready)
    except (NotImplementedError, ValueError, OSError):  # no selectable stdin here: a worker thread reads it
        return await asyncio.to_thread(sys.stdin.readline)
    try:
        return await answer
    finally:
        loop.remove_reader(fd)


async def _ask(request: ApprovalRequest) -> ApprovalOutcome:
    click.echo(file=sys.stderr)
    click.secho(f"{request.tool_name} asks for {request.mode} access:", bold=True, err=True)
    click.echo(f"  {request.detail}", err=True)
    if request.reason:
        click.echo(f"  reason: {request.reason}", err=True)
    answer = await _read_line("Allow once? [y/N] ")
    return "allowed-once" if answer.strip().lower() in ("y", "yes") else "rejected"


def terminal_approver(*, interactive: bool | None = None) -> Approver:
    """Ask on the terminal, one request at a time; ``unavailable`` when stdin or stderr is not a terminal."""
    lock = asyncio.Lock()
    tty = interactive if interactive is not None else (sys.stdin.isatty() and sys.stderr.isatty())

    async def approve(request: ApprovalRequest) -> ApprovalOutcome:
        if not tty:
            return "unavailable"
        async with lock:
            return await _ask(request)

    return approve
