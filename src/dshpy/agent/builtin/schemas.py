"""The JSON schemas the model sees for the built-in tools: dsh 0.2.1's names and parameters.

Names, parameter names, types, ``enum`` s and ``required`` lists are the ones the
real runtime advertises in its ``request/header`` (checked against
``tests/fixtures/dsh``), so a model (or a prompt) written for dsh calls dshpy's tools
the same way. Descriptions say what dshpy's tools do, which differs from dsh's in a
few places: output is cut to head and tail (dsh keeps the tail and spills the
rest to a file), and a timed-out command is killed (dsh moves it to a background
job; ``run_in_background`` starts one in both).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..tools import Tool

__all__ = [
    "BASH",
    "EDIT",
    "GLOB",
    "GREP",
    "JOB_KILL",
    "JOB_LIST",
    "JOB_OUTPUT",
    "READ",
    "SCHEMAS",
    "TODO_WRITE",
    "WRITE",
    "dsh_tool",
    "without",
]

_ESCALATION: dict[str, dict[str, Any]] = {
    "sandbox_permissions": {
        "type": "string",
        "description": "The narrowest wider sandbox mode for a one-shot retry of the exact {what} the sandbox just "
        "denied; the retry asks the user for approval.",
        "enum": ["workspace-write", "danger-full-access"],
    },
    "justification": {
        "type": "string",
        "description": "Required with sandbox_permissions: one sentence for the user explaining why this exact "
        "{what} needs the wider access. Use the language of the user's current request.",
    },
}


def _escalation(what: str) -> dict[str, Any]:
    return {
        name: {key: value.format(what=what) if key == "description" else value for key, value in prop.items()}
        for name, prop in _ESCALATION.items()
    }


BASH: dict[str, Any] = {
    "name": "bash",
    "description": (
        "Execute a bash command (`bash -c`) and return its stdout/stderr. Each call runs in a fresh shell; pass "
        "`workdir` instead of using `cd`. Long output is cut to its head and tail. Non-zero exits end the result "
        "with an `[exit code: N]` marker; a command that outlives its timeout is killed (`[timed out after Nms]`). "
        "Provide `description` before `command` in the arguments. Before any delete or move, verify that the "
        "resolved absolute target path is the intended one. Commands may run under a file sandbox: outside the "
        "writable areas, writes fail with `Read-only file system`; do not retry another way."
    ),
    "parameters": {
        "type": "object",
        "properties": {
            "description": {
                "type": "string",
                "description": "Clear, concise description of what this command does in active voice, 5-10 words "
                '(shown in the UI). Examples: "ls" → "List files in current directory"; "git status" → "Show '
                'working tree status".',
            },
            "command": {"type": "string", "description": "The bash command to execute."},
            "timeoutMs": {
                "type": "number",
                "description": "Timeout in milliseconds. The executor applies its configured default and cap; on "
                "expiry the command is killed.",
            },
            "workdir": {
                "type": "string",
                "description": "Working directory for this command. Defaults to the session workspace; a relative "
                "path is resolved against it.",
            },
            "run_in_background": {
                "type": "boolean",
                "description": "Run in the background and return a job id immediately (collect with job_output, "
                "stop with job_kill). No timeout applies.",
            },
            **_escalation("command"),
        },
        "required": ["description", "command"],
    },
}

READ: dict[str, Any] = {
    "name": "read",
    "description": "Read a UTF-8 text file and return line-numbered content.",
    "parameters": {
        "type": "object",
        "properties": {
            "file_path": {"type": "string", "description": "Path to read, relative to the session workspace."},
            "offset": {"type": "number", "description": "1-based first line to return. Defaults to 1."},
            "limit": {"type": "number", "description": "Maximum number of lines to return. Defaults to 2000."},
        },
        "required": ["file_path"],
    },
}

WRITE: dict[str, Any] = {
    "name": "write",
    "description": "Create or fully replace a UTF-8 text file.",
    "parameters": {
        "type": "object",
        "properties": {
            "file_path": {
                "type": "string",
                "description": "Path to write, relative to the session workspace. Provide `file_path` before "
                "`content` in the arguments.",
            },
            "content": {"type": "string", "description": "Full UTF-8 text content to write."},
            **_escalation("file operation"),
        },
        "required": ["file_path", "content"],
    },
}

EDIT: dict[str, Any] = {
    "name": "edit",
    "description": "Edit an existing UTF-8 text file by replacing literal text.",
    "parameters": {
        "type": "object",
        "properties": {
            "file_path": {
                "type": "string",
                "description": "Path to edit, relative to the session workspace. Provide `file_path` before "
                "`old_string` and `new_string` in the arguments.",
            },
            "old_string": {"type": "string", "description": "Literal text to replace."},
            "new_string": {
                "type": "string",
                "description": "Literal replacement text. Use an empty string to delete the match.",
            },
            "replace_all": {
                "type": "boolean",
                "description": "Replace all matches. Defaults to false; when false, old_string must appear exactly "
                "once.",
            },
            **_escalation("file operation"),
        },
        "required": ["file_path", "old_string", "new_string"],
    },
}

GLOB: dict[str, Any] = {
    "name": "glob",
    "description": "Find files, not directories, whose paths match a glob pattern, including hidden and ignored "
    "files. Returns up to 100 paths, most recently modified first; a larger result says how many were left out.",
    "parameters": {
        "type": "object",
        "properties": {
            "pattern": {
                "type": "string",
                "description": 'Glob pattern to match file paths against (e.g. "**/*.ts", "src/**/*.test.js"). A '
                'pattern with no "/" matches the basename at any depth, so "*" and "*.ts" both search the whole '
                "tree; include a separator to anchor the depth.",
            },
            "path": {
                "type": "string",
                "description": "Directory to search in. Defaults to the session workspace; a relative path "
                "resolves against it.",
            },
        },
        "required": ["pattern"],
    },
}

GREP: dict[str, Any] = {
    "name": "grep",
    "description": "Search file contents with a ripgrep regular expression. Returns matching lines with line "
    "numbers, grouped by file. Returns up to 250 matches; a larger result says how many were left out.",
    "parameters": {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "Regular expression to search for (ripgrep syntax)."},
            "path": {
                "type": "string",
                "description": "File or directory to search. Defaults to the session workspace; a relative path "
                "resolves against it.",
            },
            "include": {
                "type": "string",
                "description": 'One glob filter for which files to search (e.g. "*.ts", "*.{js,jsx}"). Not a list; '
                "negation is not supported.",
            },
        },
        "required": ["pattern"],
    },
}

_JOB_ID = {"type": "string", "description": "Job id returned by the tool that started the background work."}

JOB_OUTPUT: dict[str, Any] = {
    "name": "job_output",
    "description": "Read a background job: output since the previous read for stream jobs, or the result of a "
    "finished final-output job.",
    "parameters": {
        "type": "object",
        "properties": {
            "job_id": _JOB_ID,
            "wait": {
                "type": "boolean",
                "description": "Block until the job finishes or the timeout expires; a timed-out wait leaves the job "
                "running. Defaults to false.",
            },
            "timeout_ms": {
                "type": "number",
                "description": "Max wait in milliseconds with wait: true. Defaults to and is capped by configuration.",
            },
        },
        "required": ["job_id"],
    },
}

JOB_LIST: dict[str, Any] = {
    "name": "job_list",
    "description": "List your background jobs (running and finished) with their ids, kinds, and statuses.",
    "parameters": {"type": "object", "properties": {}},
}

JOB_KILL: dict[str, Any] = {
    "name": "job_kill",
    "description": "Request cancellation of a running background job.",
    "parameters": {
        "type": "object",
        "properties": {
            "job_id": _JOB_ID,
            "reason": {
                "type": "string",
                "description": "Optional short reason, recorded in the log and forwarded to the job.",
            },
        },
        "required": ["job_id"],
    },
}

TODO_WRITE: dict[str, Any] = {
    "name": "todo_write",
    "description": "Record and update a task list to plan multi-step work and show progress; skip it for trivial "
    "single-step tasks. Add one todo per concrete step before you start. While work remains, keep the todos being "
    "worked on `in_progress`, several only when work runs in parallel. Mark each todo `completed` as soon as it is "
    "done.",
    "parameters": {
        "type": "object",
        "properties": {
            "todos": {
                "type": "array",
                "description": "The COMPLETE task list, replacing any previous list.",
                "items": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "content": {"type": "string", "description": "What the task is — a short imperative line."},
                        "status": {
                            "type": "string",
                            "description": "pending (not started) | in_progress (now) | completed (done).",
                            "enum": ["pending", "in_progress", "completed"],
                        },
                    },
                    "required": ["content", "status"],
                },
            }
        },
        "required": ["todos"],
    },
}

SCHEMAS: dict[str, dict[str, Any]] = {
    schema["name"]: schema
    for schema in (READ, WRITE, EDIT, GLOB, GREP, BASH, JOB_OUTPUT, JOB_LIST, JOB_KILL, TODO_WRITE)
}


def without(schema: dict[str, Any], *properties: str) -> dict[str, Any]:
    """``schema`` with ``properties`` no longer advertised (a composition that cannot serve them)."""
    parameters = schema["parameters"]
    kept = {name: value for name, value in parameters["properties"].items() if name not in properties}
    return {**schema, "parameters": {**parameters, "properties": kept}}


def dsh_tool(fn: Callable[..., Any], schema: dict[str, Any], *, timeout: float | None = None) -> Tool:
    """A :class:`Tool` for ``fn`` that shows the model ``schema`` (its signature still validates the call)."""
    made = Tool(fn, name=schema["name"], description=schema["description"], timeout=timeout)
    made.parameters = schema["parameters"]
    return made
