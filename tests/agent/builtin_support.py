"""Helpers for the built-in tool tests: call a tool as the agent would, inside an open turn of a real session."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import dshpy
from dshpy.agent import ToolContext, ToolOutcome
from dshpy.agent.builtin import builtin_tools
from dshpy.agent.permissions import Approver, Permissions


class Bench:
    """A workspace directory, a live session whose cwd it is (turn 1, step 1 open), and the built-in tools."""

    def __init__(
        self,
        tmp_path: Path,
        permissions: Permissions | None = None,
        approver: Approver | None = None,
        **options: Any,
    ) -> None:
        self.root = tmp_path / "ws"
        self.root.mkdir(exist_ok=True)
        self.store = dshpy.open_store("memory:")
        self.session = self.store.create(cwd=str(self.root))
        self.session.append("turn/start", {"turn": 1})
        self.session.append("step/start", {"turn": 1, "step": 1})
        perms = permissions or Permissions("workspace-write")
        self.tools = {t.name: t for t in builtin_tools(permissions=perms, approver=approver, **options)}
        self.calls = 0

    def call(self, name: str, **arguments: Any) -> ToolOutcome:
        self.calls += 1
        context = ToolContext(None, self.session, f"call-{self.calls}", 1, 1)
        return asyncio.run(self.tools[name].invoke(json.dumps(arguments), context, timeout=60))

    def events(self, kind: str) -> list[Any]:
        return [event for event in self.session.events if event.type == kind]


def text(outcome: ToolOutcome) -> str:
    return "".join(block.get("text", "") for block in outcome.content)
