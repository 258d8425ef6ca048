"""Project instructions from the working directory (``AGENTS.md``), entered into the context as dsh enters them.

dsh's ``agent-instructions`` plugin reads ``AGENTS.md`` (or ``CLAUDE.md``) and adds
it to the first step as a ``user/message`` right after the prompt — not into the
system prompt — with the source ``{kind: "agent-instructions", form: "instructions",
baseline: true, baselineIdentity, changes: [{action: "set", scope, path, digest}]}``
(``digest``: SHA-1 of the file, ``scope``: ``<directory>\\0<file name>``). The text is
framed in ``<system-reminder>`` tags, one ``Instructions from: <path>`` section per
file. The message stays on the surface, so it is written once; it is written again
only when the file's digest changed (a new baseline that supersedes the old one).

dshpy reads the working directory's file only (dsh also walks up to the project
root and reads user-global files); the wording of the frame's introduction is
dshpy's own. A file over :data:`MAX_INSTRUCTION_BYTES` is cut, with a marker saying so.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from dshpy.core.json import thaw
from dshpy.log.records import user_message
from dshpy.log.session import Session

__all__ = ["INSTRUCTION_FILES", "MAX_INSTRUCTION_BYTES", "instructions_message", "pending_instructions"]

INSTRUCTION_FILES = ("AGENTS.md", "CLAUDE.md")
"""Candidates in the working directory, first found wins (dsh's defaults)."""
MAX_INSTRUCTION_BYTES = 64 * 1024
_INTRO = (
    "The project's own instructions follow. Apply them where they are relevant; the more specific ones win, "
    "and none of them overrides the system prompt or what the user asks directly."
)


def _read(cwd: Path) -> tuple[str, str] | None:
    for name in INSTRUCTION_FILES:
        path = cwd / name
        try:
            raw = path.read_bytes()
        except OSError:  # absent, a directory, unreadable: not an instruction file
            continue
        return name, raw.decode("utf-8", "replace")
    return None


def instructions_message(cwd: str | Path) -> dict[str, Any] | None:
    """The ``user/message`` carrying the instruction file of ``cwd``, or ``None`` when it has none."""
    found = _read(Path(cwd))
    if found is None:
        return None
    name, content = found
    body = content
    encoded = body.encode("utf-8")
    if len(encoded) > MAX_INSTRUCTION_BYTES:
        body = encoded[:MAX_INSTRUCTION_BYTES].decode("utf-8", "ignore")
        body += f"\n\n[truncated: {name} is {len(encoded)} bytes, the first {MAX_INSTRUCTION_BYTES} are shown]"
    escaped = body.replace("</system-reminder>", "<\\/system-reminder>")  # the frame cannot be closed early
    text = f"<system-reminder>\n{_INTRO}\n\nInstructions from: {name}\n\n{escaped}\n</system-reminder>"
    identity = json.dumps(
        {"projectRoot": "", "instructionFileCandidates": list(INSTRUCTION_FILES)}, separators=(",", ":")
    )
    change = {
        "action": "set",
        "scope": f".\0{name}",
        "path": name,
        "digest": hashlib.sha1(content.encode("utf-8")).hexdigest(),
    }
    source = {
        "kind": "agent-instructions",
        "form": "instructions",
        "baseline": True,
        "baselineIdentity": identity,
        "changes": [change],
    }
    return user_message([{"type": "text", "text": text}], source)


def _visible_changes(session: Session) -> list[Any] | None:
    """The ``changes`` of the newest instructions message on the surface, if any."""
    for message in reversed(session.derive_messages()):
        source = message.source
        if message.role == "user" and isinstance(source, dict) and source.get("kind") == "agent-instructions":
            changes: list[Any] = thaw(source.get("changes") or [])
            return changes
    return None


def pending_instructions(session: Session, cwd: str | Path | None) -> dict[str, Any] | None:
    """The instructions message to enter now: the file's, unless the surface already shows the same content."""
    if cwd is None:
        return None
    message = instructions_message(cwd)
    if message is None or _visible_changes(session) == message["source"]["changes"]:
        return None
    return message
