"""``read``, ``write`` and ``edit``: the file tools, in dsh's shapes.

``read`` answers as dsh's does (an OpenCode-style envelope: ``<path>``, ``<type>``,
numbered lines, then a footer saying where the file ends or how to go on) with the
window in ``meta`` (``{path, offset, lines, totalLines}``). It reads anywhere: the
sandbox bounds what the agent may change, not what it may see.

``write`` and ``edit`` change files only where the sandbox allows
(:meth:`Workspace.gate`). ``edit`` replaces literal text and refuses what it cannot
do exactly: an ``old_string`` that is missing (``FS_EDIT_NOT_FOUND``) or appears
more than once without ``replace_all`` (``FS_AMBIGUOUS_EDIT``), which would
otherwise change a place the model did not mean. Files are read strictly as UTF-8:
a binary file is refused (``FS_NOT_TEXT``), never mangled.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass, field
from typing import Any, Literal

from ..tools import Tool, ToolContext, ToolOutput
from . import schemas
from .workspace import Grant, Workspace, fs_error

__all__ = ["MAX_LINE_CHARS", "READ_BYTE_CAP", "READ_DEFAULT_LIMIT", "file_tools"]

READ_DEFAULT_LIMIT = 2000
MAX_LINE_CHARS = 2000
READ_BYTE_CAP = 50 * 1024
"""Text ``read`` returns at most per call (the footer says where to continue)."""
_SNIFF = 8192

Mode = Literal["workspace-write", "danger-full-access"]


@dataclass
class _Window:
    offset: int
    lines: list[dict[str, Any]] = field(default_factory=list)
    total: int = 0
    capped: bool = False


def _read_window(path: str, offset: int, limit: int) -> _Window | None:
    """The lines ``offset``.. (at most ``limit``, within the byte cap) and the total; ``None``: not UTF-8 text."""
    window = _Window(offset)
    used = 0
    with open(path, "rb") as handle:
        if b"\0" in handle.read(_SNIFF):
            return None
        handle.seek(0)
        for raw in handle:
            window.total += 1
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                return None
            if window.total < offset or window.capped or len(window.lines) >= limit:
                continue
            text = text.removesuffix("\n").removesuffix("\r")
            if len(text) > MAX_LINE_CHARS:
                text = text[:MAX_LINE_CHARS] + "… (line truncated)"
            size = len(text.encode()) + 8
            if used + size > READ_BYTE_CAP and window.lines:
                window.capped = True
                continue
            used += size
            window.lines.append({"number": window.total, "text": text})
    return window


def _render(path: str, window: _Window) -> str:
    end = window.lines[-1]["number"] if window.lines else max(0, window.offset - 1)
    if window.capped:
        footer = f"(Output capped. Showing lines {window.offset}-{end}. Use offset={end + 1} to continue.)"
    elif end < window.total:
        footer = f"(Showing lines {window.offset}-{end} of {window.total}. Use offset={end + 1} to continue.)"
    else:
        footer = f"(End of file - total {window.total} lines)"
    body = "\n".join(f"{line['number']}: {line['text']}" for line in window.lines)
    body = f"{body}\n\n{footer}" if window.lines else footer
    return f"<path>{path}</path>\n<type>file</type>\n<content>\n{body}\n</content>"


def _missing(tool: str, path: str) -> ToolOutput | None:
    if not os.path.lexists(path):
        return fs_error(f'{tool}: no such file "{path}"', "FS_NOT_FOUND")
    if os.path.isdir(path):
        return fs_error(f'{tool}: "{path}" is a directory (list it with glob)', "FS_NOT_REGULAR_FILE")
    if not os.path.isfile(path):
        return fs_error(f'{tool}: "{path}" is not a regular file', "FS_NOT_REGULAR_FILE")
    return None


def _read_text(path: str) -> str | None:
    """The whole file as text; ``None`` when it is not UTF-8 text."""
    with open(path, "rb") as handle:
        data = handle.read()
    if b"\0" in data[:_SNIFF]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _write_text(path: str, content: str) -> bool:
    """Write ``content``; True when the file was created. An existing file keeps its mode."""
    created = not os.path.exists(path)
    parent = os.path.dirname(path)
    if parent:
        os.makedirs(parent, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="") as handle:
        handle.write(content)
    return created


def _io_error(tool: str, path: str, error: OSError) -> ToolOutput:
    return fs_error(f'{tool}: cannot access "{path}": {error.strerror or error}', "FS_IO_ERROR")


async def _may_change(
    workspace: Workspace,
    context: ToolContext,
    tool: str,
    path: str,
    sandbox_permissions: str | None,
    justification: str | None,
) -> ToolOutput | None:
    """``None`` when ``tool`` may change ``path`` (asking when the call escalates), else the refusal."""
    grant = await workspace.gate(
        context,
        tool=tool,
        path=path,
        detail=path,
        refused=f'"{path}" is outside the writable workspace "{workspace.cwd(context)}"',
        sandbox_permissions=sandbox_permissions,
        justification=justification,
    )
    return None if isinstance(grant, Grant) else grant


def file_tools(workspace: Workspace) -> list[Tool]:
    """``read``, ``write`` and ``edit`` working in ``workspace``."""

    async def read(
        context: ToolContext, file_path: str, offset: int | None = None, limit: int | None = None
    ) -> ToolOutput:
        path = workspace.resolve(context, file_path)
        start = 1 if offset is None else offset
        count = READ_DEFAULT_LIMIT if limit is None else limit
        if start < 1 or count < 1:
            return fs_error("read: offset and limit must be positive (offset is 1-based)", "FS_INVALID_ARGUMENT")
        problem = _missing("read", path)
        if problem is not None:
            return problem
        try:
            window = await asyncio.to_thread(_read_window, path, start, count)
        except OSError as error:
            return _io_error("read", path, error)
        if window is None:
            return fs_error(f'read: "{path}" is not a UTF-8 text file', "FS_NOT_TEXT")
        if start > window.total and not (window.total == 0 and start == 1):
            return fs_error(f'offset {start} is out of range for "{path}" ({window.total} lines)', "FS_NOT_FOUND")
        meta = {"path": path, "offset": start, "lines": window.lines, "totalLines": window.total}
        return ToolOutput(_render(path, window), meta=meta)

    async def write(
        context: ToolContext,
        file_path: str,
        content: str,
        sandbox_permissions: Mode | None = None,
        justification: str | None = None,
    ) -> ToolOutput:
        path = workspace.resolve(context, file_path)
        if os.path.isdir(path):
            return fs_error(f'write: "{path}" is a directory', "FS_NOT_REGULAR_FILE")
        refused = await _may_change(workspace, context, "write", path, sandbox_permissions, justification)
        if refused is not None:
            return refused
        try:
            created = await asyncio.to_thread(_write_text, path, content)
        except OSError as error:
            return _io_error("write", path, error)
        lines = content.count("\n") + (0 if content.endswith("\n") or not content else 1)
        verb = "Created" if created else "Replaced"
        meta = {"path": path, "created": created, "bytes": len(content.encode())}
        return ToolOutput(f"{verb} {path} ({lines} lines, {meta['bytes']} bytes).", meta=meta)

    async def edit(
        context: ToolContext,
        file_path: str,
        old_string: str,
        new_string: str,
        replace_all: bool = False,
        sandbox_permissions: Mode | None = None,
        justification: str | None = None,
    ) -> ToolOutput:
        path = workspace.resolve(context, file_path)
        if not old_string:
            return fs_error("edit: old_string is empty; use write to create a file", "FS_INVALID_ARGUMENT")
        if old_string == new_string:
            return fs_error("edit: old_string and new_string are the same; nothing to change", "FS_INVALID_ARGUMENT")
        problem = _missing("edit", path)
        if problem is not None:
            return problem
        try:
            text = await asyncio.to_thread(_read_text, path)
        except OSError as error:
            return _io_error("edit", path, error)
        if text is None:
            return fs_error(f'edit: "{path}" is not a UTF-8 text file', "FS_NOT_TEXT")
        count = text.count(old_string)
        if count == 0:
            return fs_error(
                f'edit: old_string not found in "{path}" (it must match exactly, whitespace included; read the '
                "file again)",
                "FS_EDIT_NOT_FOUND",
            )
        if count > 1 and not replace_all:
            return fs_error(
                f'edit: old_string appears {count} times in "{path}"; include more surrounding text to make it '
                "unique, or set replace_all",
                "FS_AMBIGUOUS_EDIT",
            )
        refused = await _may_change(workspace, context, "edit", path, sandbox_permissions, justification)
        if refused is not None:
            return refused
        updated = text.replace(old_string, new_string) if replace_all else text.replace(old_string, new_string, 1)
        try:
            await asyncio.to_thread(_write_text, path, updated)
        except OSError as error:
            return _io_error("edit", path, error)
        replaced = count if replace_all else 1
        return ToolOutput(
            f"Edited {path}: replaced {replaced} occurrence{'s' if replaced != 1 else ''}.",
            meta={"path": path, "replacements": replaced},
        )

    return [
        schemas.dsh_tool(read, schemas.READ),
        schemas.dsh_tool(write, schemas.WRITE),
        schemas.dsh_tool(edit, schemas.EDIT),
    ]
