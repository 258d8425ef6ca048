"""Where the built-in tools work, and the gate every change they make passes.

The **workspace** is the session's current working directory (its last
``working-directory/change``, else the header's ``cwd``, else the process's): paths
the model gives are resolved against it, and ``workspace-write`` lets the tools
change files only below it. Confinement compares resolved real paths, so neither
``..`` nor a symlink pointing out of the workspace gets a write past it.

:meth:`Workspace.gate` decides one operation under the session's
:class:`~dshpy.agent.permissions.Permissions`: allowed, refused by the sandbox (with
dsh's ``[sandbox: file access denied under <mode> mode]`` marker and, when
approvals can be asked, the hint to retry with ``sandbox_permissions``), or — for
that retry — asked through the approver, logged as ``approval/asked`` /
``approval/decided``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from dshpy.core.events import SessionEvent
from dshpy.log.session import Session

from ..permissions import Approver, Permissions, denial_reason, request_approval
from ..tools import ToolContext, ToolOutput

__all__ = ["Grant", "Workspace", "current_cwd", "fs_error"]


def _changed_cwd(events: Sequence[SessionEvent], start: int) -> str | None:
    """The last ``working-directory/change`` at or after ``start``, if any."""
    for seq in range(len(events) - 1, start - 1, -1):
        event = events[seq]
        if event.type == "working-directory/change" and isinstance(event.data, Mapping):
            cwd = event.data.get("cwd")
            if isinstance(cwd, str):
                return cwd
    return None


def current_cwd(session: Session) -> str | None:
    """The session's working directory: its last ``working-directory/change``, else its header's ``cwd``."""
    return _changed_cwd(session.events, 0) or session.header.cwd


def fs_error(text: str, code: str, name: str = "FsError") -> ToolOutput:
    """A failed file operation the model can read (``Error: …``) with dsh's ``FS_*`` code beside it."""
    return ToolOutput(f"Error: {text}", error={"name": name, "code": code})


@dataclass(frozen=True, slots=True)
class Grant:
    """An operation may go ahead, under sandbox ``mode`` (wider than the session's after an approval)."""

    mode: str


def _inside(path: str, root: str) -> bool:
    try:
        return os.path.commonpath([path, root]) == root
    except ValueError:  # different drives
        return False


def _escalation_hint(subject: str) -> str:
    return (
        f"[sandbox: escalation available — retry this exact {subject} once with sandbox_permissions "
        "(the narrowest wider mode that suffices) + justification; the approval prompt asks the user]"
    )


class Workspace:
    """The directory the tools resolve paths against, the permissions they run under, and who approves."""

    def __init__(
        self,
        permissions: Permissions,
        approver: Approver | None = None,
        *,
        root: str | os.PathLike[str] | None = None,
        getcwd: Callable[[], str] = os.getcwd,
    ) -> None:
        self.permissions = permissions
        self.approver = approver
        self._root = os.fspath(root) if root is not None else None
        self._getcwd = getcwd
        self._seen: dict[str, tuple[int, str | None]] = {}
        """Per session id: how many events were scanned, and the last changed cwd among them (logs only grow)."""

    def _session_cwd(self, session: Session) -> str | None:
        events = session.events
        scanned, found = self._seen.get(session.id, (0, None))
        if scanned > len(events):  # not the log we scanned (a store replaced it): start over
            scanned, found = 0, None
        found = _changed_cwd(events, scanned) or found
        self._seen[session.id] = (len(events), found)
        return found or session.header.cwd

    def cwd(self, context: ToolContext | None) -> str:
        """The working directory for a call: the fixed root, else the session's, else the process's."""
        if self._root is not None:
            return os.path.abspath(self._root)
        session = context.session if context is not None else None
        found = self._session_cwd(session) if isinstance(session, Session) else None
        return os.path.abspath(found or self._getcwd())

    def resolve(self, context: ToolContext | None, path: str) -> str:
        """``path`` (``~`` expanded, relative to the working directory) as an absolute path."""
        return os.path.normpath(os.path.join(self.cwd(context), os.path.expanduser(path)))

    def allows(self, mode: str, path: str | None, context: ToolContext | None) -> bool:
        """Whether sandbox ``mode`` lets a tool change ``path`` (``None``: run a command, judged by the shell)."""
        if mode == "danger-full-access":
            return True
        if mode == "read-only" or path is None:
            return False
        root = os.path.realpath(self.cwd(context))
        return _inside(os.path.realpath(path), root)

    def refusal(self, tool: str, what: str, mode: str, subject: str) -> str:
        """The sandbox's refusal text: what was refused, dsh's denial marker, and the escalation hint under ask."""
        lines = [f"{tool}: {what}", f"[sandbox: file access denied under {mode} mode]"]
        if self.permissions.policy == "ask":
            lines.append(_escalation_hint(subject))
        return "\n".join(lines)

    async def gate(
        self,
        context: ToolContext | None,
        *,
        tool: str,
        path: str | None,
        detail: str,
        refused: str,
        sandbox_permissions: str | None,
        justification: str | None,
        subject: str = "operation",
    ) -> Grant | ToolOutput:
        """Allow one change, refuse it, or (for a retry naming ``sandbox_permissions``) ask the user."""
        mode = self.permissions.sandbox
        if sandbox_permissions is None:
            if path is None or self.allows(mode, path, context):
                return Grant(mode)
            text = self.refusal(tool, refused, mode, subject)
            return fs_error(text, "FS_SANDBOX_DENIED")
        if not Permissions.wider(sandbox_permissions, mode):
            return fs_error(
                f"{tool}: sandbox_permissions {sandbox_permissions!r} is not wider than the current {mode} mode; "
                "call again without it",
                "FS_INVALID_ARGUMENT",
                "ToolInputError",
            )
        if path is not None and not self.allows(sandbox_permissions, path, context):
            return fs_error(
                self.refusal(tool, refused, sandbox_permissions, subject)
                + "\n(the requested mode does not allow it either)",
                "FS_SANDBOX_DENIED",
            )
        if not (justification or "").strip():
            return fs_error(
                f"{tool}: sandbox_permissions needs a justification (one sentence for the user)",
                "FS_INVALID_ARGUMENT",
                "ToolInputError",
            )
        if context is None or not isinstance(context.session, Session):
            return ToolOutput(f"Error: {denial_reason('unavailable', tool)}", error=_denied())
        outcome = await request_approval(
            context.session,
            self.permissions,
            self.approver,
            tool_name=tool,
            call_id=context.call_id,
            reason=justification,
            mode=sandbox_permissions,
            detail=detail,
        )
        if outcome == "allowed-once":
            return Grant(sandbox_permissions)
        if self.permissions.policy == "never":
            reason = f'approvals are disabled in this session (policy "never"): tool "{tool}" was rejected'
        else:
            reason = denial_reason(outcome, tool)
        return ToolOutput(f"Error: {reason}", error=_denied(), meta={"approval": outcome})


def _denied() -> dict[str, str]:
    return {"name": "ToolDeniedError", "code": "TOOL_DENIED"}
