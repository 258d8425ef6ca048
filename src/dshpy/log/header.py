"""The session header: identity and lineage, stored beside the log and never changed.

Title, lifecycle state and everything else that evolves is a projection of the log;
the header holds only what is fixed at creation. Its physical record is the first
line of a dsh JSONL file, with keys in dsh's order and ``delegationDepth`` always
written.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

from dshpy.core.events import is_seq
from dshpy.core.ids import check_session_id
from dshpy.core.json import joined_text
from dshpy.errors import CorruptSessionError

__all__ = ["FORMAT_VERSION", "SessionHeader"]

FORMAT_VERSION = 4
"""The session format dshpy writes: dsh's current format, v4."""

_HEADER_KEYS = frozenset(
    {
        "type",
        "version",
        "id",
        "createdAt",
        "cwd",
        "parentSession",
        "isSeeded",
        "origin",
        "delegationDepth",
        "agentPreset",
    }
)
_RETIRED_KEYS = {
    "seedLength": "format v4 replaced seedLength with isSeeded",
    "sandboxMode": "retired policy baseline field",
    "approvalPolicy": "retired policy baseline field",
}


@dataclass(frozen=True, slots=True)
class SessionHeader:
    """Immutable identity of a session (dsh v4 ``SessionHeader``)."""

    id: str
    created_at: int
    cwd: str | None = None
    parent_session: str | None = None
    is_seeded: bool = False
    origin: str | None = None
    delegation_depth: int = 0
    agent_preset: str | None = None
    version: int = FORMAT_VERSION

    def __post_init__(self) -> None:
        check_session_id(self.id)
        for name in ("cwd", "agent_preset"):  # a split surrogate pair is stored, and read back, as its character
            value = getattr(self, name)
            if isinstance(value, str) and not value.isascii():
                object.__setattr__(self, name, joined_text(value))
        if not is_seq(self.created_at):
            raise ValueError(f"session header createdAt must be a non-negative safe integer, got {self.created_at!r}")
        if self.cwd is not None and (not isinstance(self.cwd, str) or not os.path.isabs(self.cwd)):
            raise ValueError(f"session header cwd must be an absolute path, got {self.cwd!r}")
        if self.parent_session is not None:
            check_session_id(self.parent_session)
        if self.origin is not None and self.origin != "subagent":
            raise ValueError(f'session header origin must be "subagent", got {self.origin!r}')
        if not is_seq(self.delegation_depth):
            raise ValueError("session header delegationDepth must be a non-negative safe integer")
        if self.agent_preset is not None and not isinstance(self.agent_preset, str):
            raise ValueError("session header agentPreset must be a string")
        if type(self.is_seeded) is not bool:
            raise ValueError("session header isSeeded must be a boolean")

    @classmethod
    def new(
        cls,
        session_id: str,
        *,
        cwd: str | None = None,
        parent_session: str | None = None,
        is_seeded: bool = False,
        origin: str | None = None,
        delegation_depth: int = 0,
        agent_preset: str | None = None,
        created_at: int | None = None,
    ) -> SessionHeader:
        """A header stamped with the current time (epoch ms) unless ``created_at`` is given."""
        return cls(
            id=session_id,
            created_at=int(time.time() * 1000) if created_at is None else created_at,
            cwd=cwd,
            parent_session=parent_session,
            is_seeded=is_seeded,
            origin=origin,
            delegation_depth=delegation_depth,
            agent_preset=agent_preset,
        )

    def to_record(self) -> dict[str, Any]:
        """The physical header line, keys in dsh's order."""
        record: dict[str, Any] = {
            "type": "session",
            "version": self.version,
            "id": self.id,
            "createdAt": self.created_at,
        }
        if self.cwd is not None:
            record["cwd"] = self.cwd
        if self.parent_session is not None:
            record["parentSession"] = self.parent_session
        record["isSeeded"] = self.is_seeded
        if self.origin is not None:
            record["origin"] = self.origin
        record["delegationDepth"] = self.delegation_depth
        if self.agent_preset is not None:
            record["agentPreset"] = self.agent_preset
        return record

    @classmethod
    def from_record(cls, raw: Any) -> SessionHeader:
        """Parse a physical header record of the current version; damage raises CorruptSessionError.

        The caller checks ``version`` first (see :mod:`dshpy.log.versions`), so a newer
        file is reported as "upgrade", not as corruption.
        """
        if not isinstance(raw, dict) or raw.get("type", "session") != "session":
            raise CorruptSessionError("session header must be a JSON object with type 'session'")
        for key, why in _RETIRED_KEYS.items():
            if key in raw:
                raise CorruptSessionError(f'session header has invalid field "{key}" ({why})')
        unexpected = sorted(set(raw) - _HEADER_KEYS)
        if unexpected:
            raise CorruptSessionError(f"session header has unexpected field {unexpected[0]}")
        for key in ("version", "id", "createdAt", "isSeeded"):
            if key not in raw:
                raise CorruptSessionError(f"session header lacks required field {key}")
        try:
            return cls(
                id=raw["id"],
                created_at=raw["createdAt"],
                cwd=raw.get("cwd"),
                parent_session=raw.get("parentSession"),
                is_seeded=raw["isSeeded"],
                origin=raw.get("origin"),
                delegation_depth=raw.get("delegationDepth", 0),
                agent_preset=raw.get("agentPreset"),
                version=raw["version"],
            )
        except (ValueError, TypeError) as error:
            raise CorruptSessionError(f"invalid session header: {error}") from None
