"""``todo_write``: the model's task list, logged as dsh logs it.

Each call replaces the whole list and appends ``todo/write {todos: [{content,
status}]}`` to the session (inside the open step, between the call and its
result), so the ``todos`` projection — and dsh reading the session — sees the
latest list. The model gets the list back as text.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from dshpy.log.session import Session

from ..tools import Tool, ToolContext, ToolOutput
from . import schemas

__all__ = ["TodoItem", "todo_tool"]

_MARKS = {"pending": "[ ]", "in_progress": "[~]", "completed": "[x]"}


class TodoItem(BaseModel):
    """One task: what it is and where it stands."""

    model_config = ConfigDict(extra="forbid")
    content: str
    status: Literal["pending", "in_progress", "completed"]


def todo_tool() -> Tool:
    """``todo_write``, appending ``todo/write`` to the calling session."""

    async def todo_write(context: ToolContext, todos: list[TodoItem]) -> ToolOutput:
        items = [{"content": item.content, "status": item.status} for item in todos]
        session = context.session if context is not None else None
        if isinstance(session, Session):
            session.append("todo/write", {"todos": items})
        if not items:
            return ToolOutput("The task list is now empty.")
        done = sum(item["status"] == "completed" for item in items)
        lines = [f"Task list updated ({done}/{len(items)} completed):"]
        lines += [f"{_MARKS[item['status']]} {item['content']}" for item in items]
        return ToolOutput("\n".join(lines))

    return schemas.dsh_tool(todo_write, schemas.TODO_WRITE)
