"""Permissions as dsh has them: a preset (a sandbox mode plus an approval policy) and audited approvals.

dsh ships three presets (its ``dsh-permission-presets`` rows), and dshpy keeps their
names and meaning:

====================  ======================================================  ========
preset                what the agent's tools may change                       approval
====================  ======================================================  ========
``read-only``         nothing (shell commands run in a read-only sandbox)     ``ask``
``workspace-write``   files under the working directory (and temp areas)      ``ask``
``danger-full-access``  anything the user running dshpy may change            ``never``
====================  ======================================================  ========

The preset comes from a flag or config key, else ``$DSH_PERMISSION_MODE`` (dsh's own
variable), else ``workspace-write`` — dsh's default for fresh sessions. The approval
policy is the preset's unless given (``ask`` or ``never``, dsh's two). A session
records all three at its start as dsh does — ``permission/preset {preset}``,
``sandbox/mode {mode}``, ``approval/policy {policy}`` — and again only when one
changes (:func:`record_permissions`).

**Approvals.** An operation the sandbox refuses is answered with an error the model
can read; under ``ask`` it may retry that exact operation once with
``sandbox_permissions`` (a wider mode) and a ``justification``, which asks the user.
:func:`request_approval` writes dsh's audit pair inside the open turn —
``approval/asked {id, toolName, callId?, reason?}`` then ``approval/decided {id,
outcome}`` — whatever the answer: ``allowed-once`` (the only grant), ``rejected``,
``cancelled``, or ``unavailable`` when nobody can answer (no terminal, an SDK
client): asking fails closed. Under ``never`` the pair is still logged and the
outcome is ``rejected``, as in dsh.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from dshpy.core.events import SessionEvent
from dshpy.errors import ConfigError
from dshpy.log.session import Session

__all__ = [
    "APPROVAL_OUTCOMES",
    "APPROVAL_POLICIES",
    "PERMISSION_ENV",
    "PERMISSION_PRESETS",
    "SANDBOX_OPT_OUT_ENV",
    "ApprovalOutcome",
    "ApprovalPolicy",
    "ApprovalRequest",
    "Approver",
    "PermissionConfigError",
    "PermissionPreset",
    "Permissions",
    "denial_reason",
    "record_permissions",
    "request_approval",
]

log = logging.getLogger("dshpy.agent.permissions")

PermissionPreset = Literal["read-only", "workspace-write", "danger-full-access"]
ApprovalPolicy = Literal["ask", "never"]
ApprovalOutcome = Literal["allowed-once", "rejected", "cancelled", "unavailable"]
PERMISSION_PRESETS: tuple[PermissionPreset, ...] = get_args(PermissionPreset)
APPROVAL_POLICIES: tuple[ApprovalPolicy, ...] = get_args(ApprovalPolicy)
APPROVAL_OUTCOMES: tuple[ApprovalOutcome, ...] = get_args(ApprovalOutcome)
PERMISSION_ENV = "DSH_PERMISSION_MODE"
"""dsh's variable for the preset (its sandbox mode; ``danger-full-access`` also turns approvals to ``never``)."""
SANDBOX_OPT_OUT_ENV = "DSHPY_ALLOW_UNSANDBOXED_SHELL"
"""Set to 1 to run shell commands unconfined when bubblewrap is missing (dshpy's opt-out)."""

_PRESET_APPROVAL: dict[str, ApprovalPolicy] = {
    "read-only": "ask",
    "workspace-write": "ask",
    "danger-full-access": "never",
}
_RANK: dict[str, int] = {name: rank for rank, name in enumerate(PERMISSION_PRESETS)}
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"", "0", "false", "no", "off"})


class PermissionConfigError(ConfigError):
    """A permission preset, approval policy or sandbox opt-out that dshpy does not know; names the valid ones."""


def _preset(value: str, where: str) -> PermissionPreset:
    if value not in PERMISSION_PRESETS:
        raise PermissionConfigError(
            f"{where}: unknown permission preset {value!r}; use one of {', '.join(PERMISSION_PRESETS)}"
        )
    return value


def _policy(value: str, where: str) -> ApprovalPolicy:
    if value not in APPROVAL_POLICIES:
        raise PermissionConfigError(
            f"{where}: unknown approval policy {value!r}; use one of {', '.join(APPROVAL_POLICIES)}"
        )
    return value


@dataclass(frozen=True, slots=True)
class Permissions:
    """The preset a session runs under, its approval policy, and whether an unconfined shell is acceptable.

    ``unsandboxed_shell`` is the user's opt-out for machines without bubblewrap:
    ``read-only`` and ``workspace-write`` shell commands then run unconfined
    instead of being refused (file tools stay confined either way).
    """

    preset: PermissionPreset = "workspace-write"
    approval: ApprovalPolicy | None = None
    unsandboxed_shell: bool = False

    def __post_init__(self) -> None:
        _preset(self.preset, "permissions")
        if self.approval is not None:
            _policy(self.approval, "permissions")

    @property
    def policy(self) -> ApprovalPolicy:
        """The approval policy: the one given, else the preset's (``never`` only for ``danger-full-access``)."""
        return self.approval if self.approval is not None else _PRESET_APPROVAL[self.preset]

    @property
    def sandbox(self) -> PermissionPreset:
        """The sandbox mode (dsh names modes as its presets)."""
        return self.preset

    @staticmethod
    def wider(mode: str, than: str) -> bool:
        """Whether sandbox ``mode`` allows more than ``than``."""
        return _RANK.get(mode, -1) > _RANK.get(than, len(_RANK))

    @classmethod
    def resolve(
        cls,
        preset: str | None = None,
        approval: str | None = None,
        unsandboxed_shell: bool | None = None,
        *,
        env: Mapping[str, str] | None = None,
        where: str = "--permissions",
    ) -> Permissions:
        """Flag/config values first, then ``$DSH_PERMISSION_MODE`` and ``$DSHPY_ALLOW_UNSANDBOXED_SHELL``."""
        environ = os.environ if env is None else env
        if preset is not None:
            chosen = _preset(preset, where)
        elif environ.get(PERMISSION_ENV, "").strip():
            chosen = _preset(environ[PERMISSION_ENV].strip(), PERMISSION_ENV)
        else:
            chosen = "workspace-write"
        policy = _policy(approval, "approval policy") if approval is not None else None
        if unsandboxed_shell is None:
            raw = environ.get(SANDBOX_OPT_OUT_ENV, "").strip().lower()
            if raw not in _TRUE | _FALSE:
                raise PermissionConfigError(f"{SANDBOX_OPT_OUT_ENV} must be 1 or 0, not {raw!r}")
            unsandboxed_shell = raw in _TRUE
        return cls(chosen, policy, unsandboxed_shell)

    def events(self) -> list[tuple[str, dict[str, Any]]]:
        """The three session-start events, in dsh's order."""
        return [
            ("permission/preset", {"preset": self.preset}),
            ("sandbox/mode", {"mode": self.sandbox}),
            ("approval/policy", {"policy": self.policy}),
        ]


_KEYS = {"permission/preset": "preset", "sandbox/mode": "mode", "approval/policy": "policy"}


def _logged(session: Session) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for event in reversed(session.events):
        key = _KEYS.get(event.type)
        if key is not None and event.type not in found and isinstance(event.data, Mapping):
            found[event.type] = event.data.get(key)
            if len(found) == len(_KEYS):
                break
    return found


def record_permissions(session: Session, permissions: Permissions) -> list[SessionEvent]:
    """Log the preset, sandbox mode and approval policy where they differ from the session's last ones.

    A fresh session gets all three (dsh writes them at seq 0-2); a continued one only
    what changed, so reopening a session under the same settings writes nothing.
    Between turns only (they are not turn events); inside an open turn nothing is
    written and the next call catches up.
    """
    if session.open_turn is not None:
        return []
    logged = _logged(session)
    appended = []
    for kind, data in permissions.events():
        if logged.get(kind) != data[_KEYS[kind]]:
            appended.append(session.append(kind, data))
    return appended


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """What the user is asked: a tool wants ``mode`` for ``detail`` (a command or a path), because ``reason``."""

    id: str
    tool_name: str
    call_id: str | None
    reason: str | None
    mode: str
    detail: str
    extra: dict[str, Any] = field(default_factory=dict)


Approver = Callable[[ApprovalRequest], "ApprovalOutcome | Awaitable[ApprovalOutcome]"]
"""Answers an :class:`ApprovalRequest` (sync or async); anything but an outcome counts as ``unavailable``."""


async def request_approval(
    session: Session,
    permissions: Permissions,
    approver: Approver | None,
    *,
    tool_name: str,
    call_id: str | None,
    reason: str | None,
    mode: str,
    detail: str,
) -> ApprovalOutcome:
    """Ask for one operation and log dsh's ``approval/asked`` / ``approval/decided`` pair around the answer.

    Must run inside the turn that needs the decision (the pair is part of it). A
    missing or failing approver gives ``unavailable``; cancellation logs
    ``cancelled`` and propagates.
    """
    if session.open_turn is None:
        raise RuntimeError("an approval must be asked inside the turn that needs it")
    request = ApprovalRequest(str(uuid.uuid4()), tool_name, call_id, reason, mode, detail)
    asked: dict[str, Any] = {"id": request.id, "toolName": tool_name}
    if call_id is not None:
        asked["callId"] = call_id
    if reason is not None:
        asked["reason"] = reason
    session.append("approval/asked", asked)
    outcome: ApprovalOutcome
    if permissions.policy == "never":
        outcome = "rejected"
    elif approver is None:
        outcome = "unavailable"
    else:
        try:
            answer: Any = approver(request)
            if inspect.isawaitable(answer):
                answer = await answer
            outcome = answer if answer in APPROVAL_OUTCOMES else "unavailable"
        except asyncio.CancelledError:
            session.append("approval/decided", {"id": request.id, "outcome": "cancelled"})
            raise
        except Exception:
            log.warning("the approver failed; %s is refused (unavailable)", tool_name, exc_info=True)
            outcome = "unavailable"
    session.append("approval/decided", {"id": request.id, "outcome": outcome})
    return outcome


def denial_reason(outcome: ApprovalOutcome, tool_name: str) -> str:
    """Why a refused approval denies the call, in dsh's words (a human "no" differs from no channel)."""
    if outcome == "rejected":
        return f'the user rejected tool "{tool_name}"'
    if outcome == "cancelled":
        return f'approval for tool "{tool_name}" was cancelled'
    return f'tool "{tool_name}" requires approval, but no approval channel is available'
