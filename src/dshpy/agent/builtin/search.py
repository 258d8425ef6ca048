"""``glob`` and ``grep``: finding files by name and lines by content.

``glob`` walks the tree itself (hidden and git-ignored files included, as dsh's
does): a pattern without ``/`` matches the file name at any depth, one with ``/``
the path relative to the search directory; ``**`` crosses directories, ``*`` and
``?`` do not, ``[…]`` and ``{a,b}`` work as in shells. Results are the most recently
modified first, at most :data:`GLOB_LIMIT`.

``grep`` runs ripgrep when it is on ``PATH`` (``rg``: fast, respects ``.gitignore``,
skips hidden and binary files) and otherwise a Python search with the same
output that skips hidden entries and binary files but reads no ignore files;
its regular expressions are Python's (close to ripgrep's for everyday patterns).
Matches are grouped by file, at most :data:`GREP_LIMIT`.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
from collections.abc import Iterator
from typing import Any

from ..tools import Tool, ToolContext, ToolOutput
from . import schemas
from .workspace import Workspace, fs_error

__all__ = ["GLOB_LIMIT", "GREP_LIMIT", "glob_regex", "search_tools"]

GLOB_LIMIT = 100
GREP_LIMIT = 250
_LINE_CHARS = 500
_SNIFF = 8192


def _braces(pattern: str) -> list[str]:
    """Expand the first ``{a,b}`` group (recursively): ``*.{js,ts}`` → ``*.js``, ``*.ts``."""
    start = pattern.find("{")
    if start < 0:
        return [pattern]
    depth = 0
    for end in range(start, len(pattern)):
        if pattern[end] == "{":
            depth += 1
        elif pattern[end] == "}":
            depth -= 1
            if depth == 0:
                options, parts, level, current = pattern[start + 1 : end], [], 0, ""
                for char in options:
                    if char == "," and level == 0:
                        parts.append(current)
                        current = ""
                        continue
                    level += char == "{"
                    level -= char == "}"
                    current += char
                parts.append(current)
                head, tail = pattern[:start], pattern[end + 1 :]
                return [expanded for part in parts for expanded in _braces(head + part + tail)]
    return [pattern]


def _translate(pattern: str) -> str:
    out: list[str] = []
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if pattern.startswith("**/", index):
            out.append("(?:.*/)?")
            index += 3
            continue
        if pattern.startswith("**", index):
            out.append(".*")
            index += 2
            continue
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[":
            end = pattern.find("]", index + 2)
            if end < 0:
                out.append(re.escape(char))
            else:
                body = pattern[index + 1 : end]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append(f"[{body}]")
                index = end
        else:
            out.append(re.escape(char))
        index += 1
    return "".join(out)


def glob_regex(pattern: str) -> re.Pattern[str]:
    """A compiled regex for a glob pattern matched against ``/``-separated relative paths."""
    return re.compile("|".join(f"(?:{_translate(part)})" for part in _braces(pattern)) + r"\Z", re.DOTALL)


def _walk_files(root: str, *, hidden: bool) -> Iterator[str]:
    for directory, dirs, files in os.walk(root):
        if not hidden:
            dirs[:] = [d for d in dirs if not d.startswith(".")]
        dirs.sort()
        for name in sorted(files):
            if not hidden and name.startswith("."):
                continue
            yield os.path.join(directory, name)


def _glob(root: str, pattern: str) -> tuple[list[str], int]:
    anchored = "/" in pattern
    regex = glob_regex(pattern.lstrip("/"))
    found: list[tuple[float, str]] = []
    for path in _walk_files(root, hidden=True):
        relative = os.path.relpath(path, root).replace(os.sep, "/")
        subject = relative if anchored else relative.rsplit("/", 1)[-1]
        if regex.match(subject):
            try:
                mtime = os.stat(path).st_mtime
            except OSError:
                continue
            found.append((mtime, path))
    found.sort(key=lambda item: (-item[0], item[1]))
    return [path for _mtime, path in found[:GLOB_LIMIT]], len(found)


def _is_text(path: str) -> bool:
    try:
        with open(path, "rb") as handle:
            return b"\0" not in handle.read(_SNIFF)
    except OSError:
        return False


def _python_grep(root: str, regex: re.Pattern[str], include: re.Pattern[str] | None) -> tuple[list[Any], int]:
    paths = [root] if os.path.isfile(root) else _walk_files(root, hidden=False)
    matches: list[tuple[str, int, str]] = []
    total = 0
    for path in paths:
        if include is not None and not include.match(os.path.basename(path)):
            continue
        if not _is_text(path):
            continue
        try:
            with open(path, encoding="utf-8", errors="replace", newline="") as handle:
                for number, line in enumerate(handle, start=1):
                    if regex.search(line):
                        total += 1
                        if len(matches) < GREP_LIMIT:
                            matches.append((path, number, line.rstrip("\r\n")))
        except OSError:
            continue
    return matches, total


async def _ripgrep(rg: str, root: str, pattern: str, include: str | None) -> tuple[list[Any], int] | str:
    argv = [rg, "--line-number", "--with-filename", "--no-heading", "--null", "--color", "never"]
    argv += ["--max-columns", str(_LINE_CHARS * 4)]
    if include:
        argv += ["--glob", include]
    argv += ["--regexp", pattern, "--", root]
    process = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, stdin=asyncio.subprocess.DEVNULL
    )
    matches: list[tuple[str, int, str]] = []
    total = 0
    assert process.stdout is not None and process.stderr is not None
    try:
        async for raw in process.stdout:
            path, _, rest = raw.decode("utf-8", "replace").rstrip("\r\n").partition("\0")
            number, _, text = rest.partition(":")
            if not number.isdigit():
                continue
            total += 1
            if len(matches) < GREP_LIMIT:
                matches.append((path, int(number), text))
        errors = (await process.stderr.read()).decode("utf-8", "replace").strip()
        code = await process.wait()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    if code == 2 and not matches:
        return errors or "ripgrep failed"
    return matches, total


def _grep_text(matches: list[tuple[str, int, str]], total: int, pattern: str) -> str:
    if not matches:
        return f"No matches for {pattern!r}."
    lines = [
        f"Found {total} match{'es' if total != 1 else ''}"
        + (f" (showing {len(matches)})" if total > len(matches) else "")
    ]
    current = None
    for path, number, text in matches:
        if path != current:
            lines.append(f"{path}:" if current is None else f"\n{path}:")
            current = path
        shown = text if len(text) <= _LINE_CHARS else text[:_LINE_CHARS] + "…"
        lines.append(f"  Line {number}: {shown}")
    if total > len(matches):
        lines.append(f"\n({total - len(matches)} more matches left out; narrow the pattern, path or include)")
    return "\n".join(lines)


def search_tools(workspace: Workspace, *, ripgrep: str | bool | None = True) -> list[Tool]:
    """``glob`` and ``grep`` in ``workspace``; ``ripgrep``: True finds ``rg`` on PATH, a path uses it, None never."""
    rg = shutil.which("rg") if ripgrep is True else (ripgrep or None)

    async def glob(context: ToolContext, pattern: str, path: str | None = None) -> ToolOutput:
        root = workspace.resolve(context, path or ".")
        if not pattern.strip():
            return fs_error("glob: the pattern is empty", "FS_INVALID_ARGUMENT")
        if not os.path.isdir(root):
            return fs_error(f'glob: "{root}" is not a directory', "FS_NOT_DIRECTORY")
        paths, total = await asyncio.to_thread(_glob, root, pattern)
        if not paths:
            return ToolOutput(f"No files match {pattern!r} in {root}.", meta={"root": root, "count": 0})
        text = "\n".join(paths)
        if total > len(paths):
            text += f"\n({total - len(paths)} more files left out; use a narrower pattern or path)"
        return ToolOutput(text, meta={"root": root, "count": total})

    async def grep(
        context: ToolContext, pattern: str, path: str | None = None, include: str | None = None
    ) -> ToolOutput:
        root = workspace.resolve(context, path or ".")
        if not os.path.exists(root):
            return fs_error(f'grep: no such file or directory "{root}"', "FS_NOT_FOUND")
        if rg is not None:
            found = await _ripgrep(rg, root, pattern, include)
            if isinstance(found, str):
                return fs_error(f"grep: {found}", "FS_INVALID_ARGUMENT")
            engine = "ripgrep"
        else:
            try:
                regex = re.compile(pattern)
            except re.error as error:
                return fs_error(f"grep: invalid regular expression {pattern!r}: {error}", "FS_INVALID_ARGUMENT")
            include_regex = glob_regex(include) if include else None
            found = await asyncio.to_thread(_python_grep, root, regex, include_regex)
            engine = "python"
        matches, total = found
        return ToolOutput(_grep_text(matches, total, pattern), meta={"count": total, "engine": engine})

    return [schemas.dsh_tool(glob, schemas.GLOB), schemas.dsh_tool(grep, schemas.GREP)]
