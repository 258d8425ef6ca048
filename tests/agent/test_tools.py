"""The @tool decorator: schemas from type hints, and every failure as a result the model can read."""

from __future__ import annotations

import asyncio
import time
from typing import Annotated, Literal

import pytest
from pydantic import BaseModel, Field

from dshpy.agent import Tool, ToolContext, ToolOutput, tool


@tool
def read_file(path: str, limit: int = 100, context: ToolContext | None = None) -> str:
    """Read a text file.

    Longer explanation that is not sent.

    Args:
        path: File to read, relative to the workspace.
        limit: Read at most this many
            lines.
    """
    return f"{path}:{limit}:{context.call_id if context else None}"


class Point(BaseModel):
    x: int
    y: int


@tool(name="plot", timeout=5)
async def plot_points(
    points: list[Point],
    style: Literal["dot", "line"] = "dot",
    label: Annotated[str, Field(description="Legend text")] = "",
) -> dict[str, int]:
    """Plot points."""
    await asyncio.sleep(0)
    return {"count": len(points)}


def invoke(target: Tool, arguments: str, **kwargs):
    return asyncio.run(target.invoke(arguments, **kwargs))


def test_schema_from_hints_and_docstring():
    assert read_file.schema() == {
        "name": "read_file",
        "description": "Read a text file.",
        "parameters": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "path": {"type": "string", "description": "File to read, relative to the workspace."},
                "limit": {"type": "integer", "default": 100, "description": "Read at most this many lines."},
            },
            "required": ["path"],
        },
    }


def test_nested_models_literals_and_field_descriptions():
    schema = plot_points.schema()
    assert schema["name"] == "plot"
    props = schema["parameters"]["properties"]
    assert props["style"]["enum"] == ["dot", "line"]
    assert props["label"]["description"] == "Legend text"
    assert "Point" in schema["parameters"]["$defs"]
    outcome = invoke(plot_points, '{"points": [{"x": 1, "y": 2}]}')
    assert outcome.content == [{"type": "text", "text": '{"count": 1}'}]
    assert not outcome.is_error


def test_context_is_injected_and_hidden():
    context = ToolContext(agent=None, session=None, call_id="call_9", turn=1, step=1)
    assert invoke(read_file, '{"path": "a"}', context=context).content[0]["text"] == "a:100:call_9"


@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [
        ("{not json", "not valid JSON"),
        ("[1]", "must be a JSON object"),
        ('{"limit": "x"}', "path: Field required"),
        ('{"path": "a", "extra": 1}', "extra: Extra inputs are not permitted"),
    ],
)
def test_bad_arguments_become_error_results(arguments, fragment):
    outcome = invoke(read_file, arguments)
    assert outcome.is_error
    assert outcome.error == {"name": "ToolInputError", "code": "INVALID_TOOL_INPUT"}
    assert fragment in outcome.content[0]["text"]


def test_exceptions_become_error_results():
    @tool
    def broken() -> None:
        raise PermissionError("no access to /etc")

    outcome = invoke(broken, "")
    assert outcome.is_error
    assert outcome.error == {"name": "PermissionError", "code": "TOOL_ERROR"}
    assert outcome.content[0]["text"] == "Error: tool broken failed: PermissionError: no access to /etc"


def test_sync_and_async_timeouts():
    @tool(timeout=0.05)
    def slow_sync() -> str:
        time.sleep(0.5)
        return "late"

    @tool
    async def slow_async() -> str:
        await asyncio.sleep(5)
        return "late"

    async def timed(target, **kwargs):
        started = time.monotonic()
        outcome = await target.invoke("{}", **kwargs)
        return outcome, time.monotonic() - started

    for target, kwargs in ((slow_sync, {}), (slow_async, {"timeout": 0.05})):
        outcome, elapsed = asyncio.run(timed(target, **kwargs))
        assert elapsed < 0.45  # abandoned at the timeout (a sync body's thread finishes on its own)
        assert outcome.error == {"name": "ToolTimeoutError", "code": "TOOL_TIMEOUT"}
        assert "Do not retry blindly" in outcome.content[0]["text"]


def test_outputs():
    @tool
    def explicit() -> ToolOutput:
        return ToolOutput("nope", is_error=True, meta={"exit": 2})

    @tool
    def empty() -> None:
        return None

    outcome = invoke(explicit, "{}")
    assert (outcome.is_error, outcome.meta, outcome.error) == (True, {"exit": 2}, None)
    assert invoke(empty, "{}").content == [{"type": "text", "text": "(no output)"}]


def test_bad_tool_definitions():
    with pytest.raises(ValueError, match="tool name"):
        tool(name="bad name")(lambda: None)
    with pytest.raises(TypeError, match=r"\*args"):

        @tool
        def variadic(*paths: str) -> None: ...
