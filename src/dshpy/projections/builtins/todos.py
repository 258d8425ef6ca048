"""``todos``: the agent's current to-do list.

``todo/write`` always carries the whole list (dsh: "whole-list, last write wins"),
so the state is simply the latest list, or ``None`` before the first write. Items
keep any extra keys a producer added, except keys holding a lone UTF-16 surrogate:
pydantic can neither validate nor dump such a key (it converts keys to UTF-8), so
the projection leaves it out; the logged event keeps it.
"""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict

from dshpy.core.events import SessionEvent
from dshpy.projections.definition import ProjectionDefinition, ProjectionState

__all__ = ["TODOS", "TodoItem", "TodosState"]


class TodoItem(ProjectionState):
    """One entry: ``content`` and ``status`` (``pending``, ``in_progress``, ``completed``), plus extra keys."""

    model_config = ConfigDict(extra="allow")

    content: str
    status: str


class TodosState(ProjectionState):
    todos: tuple[TodoItem, ...] | None = None
    """The latest list; ``None`` until the first ``todo/write``."""
    seq: int | None = None
    """The ``todo/write`` it came from."""


def apply_todos(state: TodosState, event: SessionEvent) -> TodosState:
    data = event.data
    todos = data.get("todos") if isinstance(data, dict) else None
    if not isinstance(todos, list):
        return state
    items = tuple(TodoItem.model_validate(_encodable_keys(item)) for item in todos if _is_item(item))
    return TodosState(todos=items, seq=event.seq)


def _encodable_keys(item: dict[str, Any]) -> dict[str, Any]:
    if all(key.isascii() for key in item):
        return item
    return {key: value for key, value in item.items() if _encodable(key)}


def _encodable(key: str) -> bool:
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _is_item(value: object) -> bool:
    return isinstance(value, dict) and isinstance(value.get("content"), str) and isinstance(value.get("status"), str)


TODOS: ProjectionDefinition[TodosState] = ProjectionDefinition(
    key="todos",
    state_version=1,
    state_schema=TodosState,
    init=TodosState,
    apply=apply_todos,
    types=frozenset({"todo/write"}),
)
"""The list of the latest ``todo/write`` (``None`` before any)."""
