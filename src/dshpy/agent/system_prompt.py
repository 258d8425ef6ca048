"""The default system prompt, and where a caller's own comes from (text, file, profile).

dsh starts every session with a long prompt of its own (the ``system/message`` head,
dsh-v4 §3.8); dshpy's default is short and in its own words, describing what a dshpy
agent can rely on. It applies to a session that has no system prompt yet: a resumed
session keeps the prompt its log holds unless the caller gives a new one, which then
replaces the head (:mod:`dshpy.agent.prologue`).

Precedence, highest first: an explicit text (``--system``), a file (``--system-file``),
the profile's ``system`` key, the session's stored prompt, then :data:`DEFAULT_SYSTEM_PROMPT`.
"""

from __future__ import annotations

from pathlib import Path

from dshpy.errors import ConfigError
from dshpy.log.continuation import system_head, system_prompt_text
from dshpy.log.session import Session

__all__ = ["DEFAULT_SYSTEM_PROMPT", "SystemPromptError", "read_system_file", "system_prompt_for"]

DEFAULT_SYSTEM_PROMPT = """\
You are a software agent working in the user's project through the tools you are given.

Work from evidence: read the files that matter before changing them, and check the result of \
every command or edit before relying on it. Prefer small, targeted changes over rewrites, and \
keep to the conventions the project already follows.

When a tool fails or a request is refused, say so plainly and adjust; never claim an outcome \
you did not observe. Ask the user when a decision is theirs to make.

Answer concisely. When you finish, state what you changed and anything left undone."""
"""dshpy's own default prompt (the text is dshpy's; only its place in the log follows dsh)."""

MAX_SYSTEM_FILE_BYTES = 1 << 20


class SystemPromptError(ConfigError):
    """A system prompt file cannot be used (missing, unreadable, not UTF-8, too large); the message names it."""


def read_system_file(path: str | Path) -> str:
    """The text of a ``--system-file``; refused with the path and the reason when it cannot be one."""
    file = Path(path).expanduser()
    try:
        raw = file.read_bytes()
    except FileNotFoundError:
        raise SystemPromptError(f"system prompt file {file} does not exist") from None
    except IsADirectoryError:
        raise SystemPromptError(f"system prompt file {file} is a directory") from None
    except OSError as error:
        raise SystemPromptError(f"cannot read system prompt file {file}: {error.strerror or error}") from None
    if len(raw) > MAX_SYSTEM_FILE_BYTES:
        raise SystemPromptError(f"system prompt file {file} is {len(raw)} bytes; the limit is {MAX_SYSTEM_FILE_BYTES}")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise SystemPromptError(f"system prompt file {file} is not UTF-8 text (byte {error.start})") from None


def system_prompt_for(session: Session, explicit: str | None = None, *, default: str = DEFAULT_SYSTEM_PROMPT) -> str:
    """The prompt an agent on ``session`` should use: ``explicit``, else the stored one, else ``default``."""
    if explicit is not None:
        return explicit
    if system_head(session) is not None or session.surface_nodes:
        return system_prompt_text(session)  # a session that began without one cannot get one later
    return default
