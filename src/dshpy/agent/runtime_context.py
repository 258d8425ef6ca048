"""dsh's runtime-context snapshot: a ``user/message`` telling the model where it works and what it may do.

dsh renders named context sections each step — the working directory, the file
sandbox policy, the approval policy (:func:`permission_sections` writes dsh's texts)
— and joins them under one heading::

    Current runtime context. This snapshot supersedes earlier runtime-context snapshots.

    Current working directory: "/srv/app".

    Current DSH file policy: workspace-write. …

The loop appends that text as a ``user/message`` with source ``{kind:
"runtime-context", form: "snapshot", sections: [{name, text}, …]}`` after the step's
entering messages (the prompt, injected messages, instructions), but only when it
differs from the snapshot the model still sees: the newest runtime-context message
on the surface. So the first step of a session writes one, later steps and resumed
processes write nothing until the directory or a policy changes, and a compaction
that folded the old snapshot into a summary makes the next step write it again.
When every section is empty after a snapshot was shown, the model is told that
none applies any more (:data:`CLEARED`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from dshpy.log.records import user_message
from dshpy.log.session import Session

__all__ = [
    "CLEARED",
    "HEADING",
    "SOURCE_KIND",
    "RuntimeContext",
    "approval_text",
    "permission_sections",
    "sandbox_text",
    "snapshot_text",
    "working_directory_text",
]

SOURCE_KIND = "runtime-context"
HEADING = "Current runtime context. This snapshot supersedes earlier runtime-context snapshots."
CLEARED = "Current runtime context: none. Earlier runtime-context snapshots no longer apply."


def working_directory_text(cwd: str) -> str:
    """dsh's ``working-directory:current`` section (the path JSON-quoted)."""
    return f"Current working directory: {json.dumps(cwd, ensure_ascii=False)}."


def sandbox_text(mode: str, workspace_root: str) -> str:
    """dsh's ``sandbox:policy`` section for a sandbox mode."""
    if mode == "read-only":
        return (
            "Current DSH file policy: read-only. Any available operation enforced by the DSH file sandbox cannot "
            "modify files in the standing mode. Do not refuse a required modification from this policy alone: try "
            "an available tool normally and follow any denial and escalation guidance it returns."
        )
    if mode == "workspace-write":
        return (
            "Current DSH file policy: workspace-write. Any available operation enforced by the DSH file sandbox may "
            "modify files under the session workspace: "
            f"{json.dumps(workspace_root, ensure_ascii=False)}. Some platform temporary areas may also be writable."
        )
    if mode == "danger-full-access":
        return (
            "Current DSH file policy: danger-full-access. The DSH file sandbox does not restrict file "
            "modifications by available operations."
        )
    raise ValueError(f"unknown sandbox mode {mode!r}")


def approval_text(policy: str) -> str:
    """dsh's ``approval:policy`` section."""
    if policy == "never":
        return (
            "Approval prompts are disabled in this session: actions that require approval are rejected "
            "automatically — do not request sandbox escalation (do not set `sandbox_permissions`)."
        )
    return (
        "Approval policy: ask. Operations that require approval may ask through the configured answerers; "
        "without an available answerer, the request fails closed."
    )


def permission_sections(cwd: str, mode: str, policy: str) -> list[dict[str, str]]:
    """The three sections dsh's SDK runtime shows, in its order (directory, sandbox, approval)."""
    return [
        {"name": "working-directory:current", "text": working_directory_text(cwd)},
        {"name": "sandbox:policy", "text": sandbox_text(mode, cwd)},
        {"name": "approval:policy", "text": approval_text(policy)},
    ]


def snapshot_text(sections: Sequence[Mapping[str, str]]) -> str:
    """The model-facing text: the heading and the non-empty sections, or ``""`` when none has text."""
    body = "\n\n".join(section["text"] for section in sections if section["text"])
    return f"{HEADING}\n\n{body}" if body else ""


def _owned_text(data: Any) -> str | None:
    """The text of a runtime-context message (``None`` if ``data`` is another message)."""
    if not isinstance(data, Mapping):
        return None
    source = data.get("source")
    if not isinstance(source, Mapping) or source.get("kind") != SOURCE_KIND:
        return None
    content = data.get("content")
    if isinstance(content, Sequence) and len(content) == 1 and isinstance(content[0], Mapping):
        block = content[0]
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            return str(block["text"])
    return ""


class RuntimeContext:
    """Per agent: which snapshot the model still sees, and the message to append when the context changed.

    Restored once from the log (the newest runtime-context message still on the
    surface), then kept current from the events appended since — a new snapshot,
    or a replacement citing the retained one.
    """

    def __init__(self, session: Session) -> None:
        self._session = session
        self._ever = False
        self._retained: tuple[int, str] | None = None
        events = session.events
        surface = set(session.surface_nodes)
        for event in reversed(events):
            if event.type == "user/message" and (text := _owned_text(event.data)) is not None:
                self._ever = True
                if event.seq in surface:
                    self._retained = (event.seq, text)
                    break
        self._scanned = len(events)

    def _follow(self) -> None:
        events = self._session.events
        for seq in range(self._scanned, len(events)):
            event = events[seq]
            if event.type == "user/message" and (text := _owned_text(event.data)) is not None:
                self._ever = True
                self._retained = (seq, text)
                continue
            retained = self._retained
            replaces = event.surface_op is not None and event.surface_op != "append"
            if retained is not None and replaces and retained[0] in (event.source_event_seqs or ()):
                self._retained = None
        self._scanned = len(events)

    def message(self, sections: Sequence[Mapping[str, str]]) -> dict[str, Any] | None:
        """The snapshot ``user/message`` data for ``sections``, or ``None`` when the model sees it already."""
        self._follow()
        current = snapshot_text(sections)
        if not current and not self._ever:
            return None
        text = current or CLEARED
        if self._retained is not None and self._retained[1] == text:
            return None
        shown = [{"name": s["name"], "text": s["text"]} for s in sections if s["text"]]
        source: dict[str, Any] = {"kind": SOURCE_KIND}
        if shown and current:
            source.update({"form": "snapshot", "sections": shown})
        return user_message(text, source)
