"""The built-in tools an agent needs to work in a repository, with dsh's names and schemas.

========== ==========================================================================
tool       what it does
========== ==========================================================================
read       a text file's lines (``offset`` / ``limit``), numbered
write      create or replace a file (where the sandbox allows)
edit       replace exact text in a file; refuses a missing or ambiguous match
glob       files whose path matches a pattern, newest first
grep       lines matching a regular expression (ripgrep when installed)
bash       a shell command: sandboxed, timed, output capped to head and tail; or a background job
job_output a background job's new output and status (``job_list``, ``job_kill`` beside it)
todo_write the task list, logged as ``todo/write``
========== ==========================================================================

``bash`` offers ``run_in_background`` only when ``job_output`` is in the set too (the
``all`` set has all three job tools): a background command must be collectable.

:func:`builtin_tools` builds a set of them over one :class:`Workspace` (the
permissions they run under and the approver that answers escalations). Tool sets by
name (:data:`TOOL_SETS`): ``all``, ``read`` (``read``, ``glob``, ``grep``,
``todo_write``), ``none``; or a comma-separated list of tool names.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from dshpy.errors import ConfigError

from ..permissions import Approver, Permissions
from ..tools import Tool
from .files import file_tools
from .job_tools import job_tools
from .schemas import SCHEMAS
from .search import search_tools
from .shell import DEFAULT_MAX_OUTPUT, MAX_TIMEOUT_MS, shell_tool
from .todos import todo_tool
from .workspace import Workspace, current_cwd

__all__ = [
    "BUILTIN_TOOL_NAMES",
    "JOB_TOOL_NAMES",
    "TOOL_SETS",
    "ToolSetError",
    "Workspace",
    "builtin_tools",
    "current_cwd",
    "parse_tool_set",
]

BUILTIN_TOOL_NAMES: tuple[str, ...] = (
    "read",
    "write",
    "edit",
    "glob",
    "grep",
    "bash",
    "job_output",
    "job_list",
    "job_kill",
    "todo_write",
)
JOB_TOOL_NAMES: tuple[str, ...] = ("job_output", "job_list", "job_kill")
TOOL_SETS: dict[str, tuple[str, ...]] = {
    "all": BUILTIN_TOOL_NAMES,
    "read": ("read", "glob", "grep", "todo_write"),
    "none": (),
}


class ToolSetError(ConfigError):
    """A tool set that names no known set or tool."""


def parse_tool_set(value: str | Sequence[str]) -> tuple[str, ...]:
    """Tool names for a set name (``all``, ``read``, ``none``) or a comma-separated list of tool names."""
    if isinstance(value, str):
        if value.strip() in TOOL_SETS:
            return TOOL_SETS[value.strip()]
        names = [name.strip() for name in value.split(",") if name.strip()]
    else:
        names = [str(name).strip() for name in value]
    unknown = [name for name in names if name not in BUILTIN_TOOL_NAMES]
    if unknown or not names:
        raise ToolSetError(
            f"unknown tool set {value!r}: use {', '.join(TOOL_SETS)} or a comma-separated list of "
            f"{', '.join(BUILTIN_TOOL_NAMES)}"
        )
    return tuple(dict.fromkeys(names))


def builtin_tools(
    tools: str | Sequence[str] = "all",
    *,
    permissions: Permissions | None = None,
    approver: Approver | None = None,
    root: str | os.PathLike[str] | None = None,
    ripgrep: str | bool | None = True,
    bwrap: str | bool | None = True,
    max_output: int = DEFAULT_MAX_OUTPUT,
    max_timeout_ms: int = MAX_TIMEOUT_MS,
) -> list[Tool]:
    """The built-in tools named by ``tools``, in the order of :data:`BUILTIN_TOOL_NAMES`.

    ``permissions`` defaults to :meth:`Permissions.resolve` (``$DSH_PERMISSION_MODE``,
    else ``workspace-write``); ``approver`` answers escalations (none: they fail
    closed as ``unavailable``); ``root`` fixes the workspace (default: the calling
    session's working directory). ``ripgrep`` / ``bwrap``: True finds the program on
    PATH, a path names it, None does without.
    """
    wanted = parse_tool_set(tools)
    workspace = Workspace(permissions or Permissions.resolve(), approver, root=root)
    made: dict[str, Tool] = {}
    if {"read", "write", "edit"} & set(wanted):
        made.update((tool.name, tool) for tool in file_tools(workspace))
    if {"glob", "grep"} & set(wanted):
        made.update((tool.name, tool) for tool in search_tools(workspace, ripgrep=ripgrep))
    if "bash" in wanted:
        made["bash"] = shell_tool(
            workspace,
            bwrap=bwrap,
            max_output=max_output,
            max_timeout_ms=max_timeout_ms,
            background="job_output" in wanted,
        )
    if set(JOB_TOOL_NAMES) & set(wanted):
        made.update((tool.name, tool) for tool in job_tools())
    if "todo_write" in wanted:
        made["todo_write"] = todo_tool()
    assert set(SCHEMAS) == set(BUILTIN_TOOL_NAMES)
    return [made[name] for name in BUILTIN_TOOL_NAMES if name in wanted]
