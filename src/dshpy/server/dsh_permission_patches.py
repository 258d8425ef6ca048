"""What ``dshpy-runtime`` takes from the permission rows of the dsh patches the official SDK passes.

dsh configures permissions with two profile rows (its ``dsh-base`` bundle):
``sandbox-policy`` (``config: {mode, workspaceRoot}``; ``mode`` defaults to
``$DSH_PERMISSION_MODE``, else ``workspace-write``) and ``approval`` (``config:
{policy}``: ``ask`` or ``never``). An SDK user who patches either gets the same
preset and policy from dshpy-runtime. As with every patch, the last entry for a
row wins and replaces its ``config`` whole; a value dsh would not accept is refused
with the file named. A patched sandbox mode leaves the approval policy where dsh
leaves it: its ``approval`` row derives the policy from ``$DSH_PERMISSION_MODE``
(``never`` only for ``danger-full-access``), not from the patched mode.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .dsh_patches import PatchError, read_patch_list

__all__ = ["PERMISSION_ROWS", "PatchedPermissions", "permissions_from_patches"]

SANDBOX_ROW = "sandbox-policy"
APPROVAL_ROW = "approval"
PERMISSION_ROWS = frozenset({SANDBOX_ROW, APPROVAL_ROW})
_MODES = ("read-only", "workspace-write", "danger-full-access")
_POLICIES = ("ask", "never")


@dataclass(frozen=True, slots=True)
class PatchedPermissions:
    """The preset and approval policy the patches set (``None``: not patched)."""

    preset: str | None = None
    approval: str | None = None


def _value(config: Any, key: str, choices: tuple[str, ...], row: str, path: Path) -> str | None:
    if not isinstance(config, dict):
        raise PatchError(f"dsh patch {path}: the {row} config must be a mapping")
    value = config.get(key)
    if value is None:
        return None
    if value not in choices:
        raise PatchError(f"dsh patch {path}: {row} {key} must be one of {', '.join(choices)}, not {value!r}")
    return str(value)


def permissions_from_patches(
    paths: Iterable[str | os.PathLike[str]], env: Mapping[str, str] | None = None
) -> PatchedPermissions:
    """The ``sandbox-policy`` mode and ``approval`` policy the patches give (applied in order)."""
    preset: str | None = None
    approval: str | None = None
    for raw_path in paths:
        path = Path(raw_path)
        for entry in read_patch_list(path):
            row = entry.get("id")
            if row not in PERMISSION_ROWS or "insert" in entry or "config" not in entry:
                continue
            if row == SANDBOX_ROW:
                preset = _value(entry["config"], "mode", _MODES, row, path)
            else:
                approval = _value(entry["config"], "policy", _POLICIES, row, path)
    if preset is not None and approval is None:  # dsh's approval row: from the variable, not the patched mode
        variable = (os.environ if env is None else env).get("DSH_PERMISSION_MODE") or "workspace-write"
        approval = "never" if variable.strip() == "danger-full-access" else "ask"
    return PatchedPermissions(preset, approval)
