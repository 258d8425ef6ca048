"""Tools: Python callables the model may call, with a JSON schema taken from their type hints.

``@tool`` turns a sync or async function into a :class:`Tool`. Its name is the
function's, its description the docstring's first paragraph, its ``parameters`` the
JSON schema pydantic builds from the signature (``Annotated[..., Field(description=…)]``
and a Google-style ``Args:`` section describe the parameters). A parameter annotated
:class:`ToolContext` is filled in by the agent and hidden from the model.

Whatever goes wrong becomes a result the model can read and react to — never an
exception that ends the turn: arguments that are not JSON or do not validate, an
unknown tool, an exception in the body, a timeout. Each such result is an error
(``isError: true``) with dsh's ``error {name, code}`` beside it. A sync body runs in a
worker thread so the event loop (streaming, cancellation, other tools) keeps going;
a timed-out or cancelled sync body cannot be stopped, only abandoned, which its
result says.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
import types
import typing
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, overload

import pydantic
from pydantic import BaseModel, ConfigDict, Field, create_model
from pydantic.fields import FieldInfo

__all__ = ["Tool", "ToolContext", "ToolLike", "ToolOutcome", "ToolOutput", "as_tool", "tool"]


@dataclass(frozen=True, slots=True)
class ToolContext:
    """What a tool may know about the call it serves (declare a parameter of this type to get it)."""

    agent: Any
    session: Any
    call_id: str
    turn: int
    step: int


@dataclass(frozen=True, slots=True)
class ToolOutput:
    """An explicit tool result: text (or content blocks), an error flag, and ``meta`` logged beside it.

    ``error`` (``{name, code}``, dsh's ``tool/result.error``) names what went wrong for
    tooling; giving it makes the result an error.
    """

    content: str | Sequence[dict[str, Any]]
    is_error: bool = False
    meta: Any = None
    error: dict[str, str] | None = None


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """A finished call, ready to log as ``tool/result``."""

    content: list[dict[str, Any]]
    is_error: bool = False
    error: dict[str, str] | None = None
    meta: Any = None

    @classmethod
    def failure(cls, text: str, name: str, code: str) -> ToolOutcome:
        return cls([{"type": "text", "text": text}], True, {"name": name, "code": code})


_ARGS_HEADER = re.compile(r"^\s*(Args|Arguments|Parameters)\s*:\s*$")
_ARG_LINE = re.compile(r"^\s+(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


def _describe(doc: str | None) -> tuple[str, dict[str, str]]:
    """The docstring's first paragraph and the descriptions of its ``Args:`` section."""
    text = inspect.cleandoc(doc or "")
    summary = text.split("\n\n", 1)[0].strip()
    if _ARGS_HEADER.match(summary.splitlines()[0] if summary else ""):
        summary = ""
    params: dict[str, str] = {}
    in_args = False
    current: str | None = None
    for line in text.splitlines():
        if _ARGS_HEADER.match(line):
            in_args, current = True, None
            continue
        if not in_args:
            continue
        if line and not line[0].isspace():
            break  # the next section
        match = _ARG_LINE.match(line)
        if match and (current is None or len(line) - len(line.lstrip()) <= 4):
            current = match.group(1).lstrip("*")
            params[current] = match.group(2).strip()
        elif current is not None and line.strip():
            params[current] = f"{params[current]} {line.strip()}".strip()
    return summary, params


def _strip_titles(schema: Any) -> Any:
    """Drop pydantic's generated ``title`` keys: noise the model pays tokens for."""
    if isinstance(schema, dict):
        cleaned = {}
        for key, value in schema.items():
            if key == "title" and isinstance(value, str):
                continue
            if key == "properties" and isinstance(value, dict):
                cleaned[key] = {name: _strip_titles(prop) for name, prop in value.items()}
            else:
                cleaned[key] = _strip_titles(value)
        return cleaned
    if isinstance(schema, list):
        return [_strip_titles(item) for item in schema]
    return schema


def _is_context(annotation: Any) -> bool:
    """Whether a parameter asks for the :class:`ToolContext` (``ToolContext``, ``ToolContext | None``, Annotated)."""
    if annotation is ToolContext:
        return True
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _is_context(typing.get_args(annotation)[0])
    if origin is typing.Union or origin is types.UnionType:
        return any(arg is ToolContext for arg in typing.get_args(annotation))
    return False


class Tool:
    """A callable the model can call; build with :func:`tool`."""

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        timeout: float | None = None,
    ) -> None:
        self.fn = fn
        self.name = name or fn.__name__
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", self.name):
            raise ValueError(f"tool name {self.name!r} must be 1-64 of A-Z a-z 0-9 _ - (the chat API's rule)")
        summary, arg_docs = _describe(fn.__doc__)
        self.description = description if description is not None else summary
        self.timeout = timeout
        self.is_async = inspect.iscoroutinefunction(fn)
        self.context_param: str | None = None
        hints = typing.get_type_hints(fn, include_extras=True)
        fields: dict[str, Any] = {}
        for param in inspect.signature(fn).parameters.values():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise TypeError(f"tool {self.name}: *args/**kwargs cannot be described to the model")
            annotation = hints.get(param.name, Any)
            if _is_context(annotation):
                self.context_param = param.name
                continue
            default: Any = ... if param.default is param.empty else param.default
            doc = arg_docs.get(param.name)
            if isinstance(default, FieldInfo):
                info = default
            else:
                info = Field(default) if doc is None else Field(default, description=doc)
            fields[param.name] = (annotation, info)
        self.arguments_model: type[BaseModel] = create_model(
            f"{self.name}_arguments", __config__=ConfigDict(extra="forbid"), **fields
        )
        self.parameters: dict[str, Any] = _strip_titles(self.arguments_model.model_json_schema())

    def schema(self) -> dict[str, Any]:
        """``{name, description, parameters}``: the ``ToolSchema`` logged in ``request/header``."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the function directly (tests, composition); the agent uses :meth:`invoke`."""
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<Tool {self.name}>"

    async def invoke(
        self, arguments: str, context: ToolContext | None = None, *, timeout: float | None = None
    ) -> ToolOutcome:
        """Validate ``arguments`` (the model's raw JSON text) and run the body; never raises but for cancellation."""
        try:
            raw = json.loads(arguments) if arguments.strip() else {}
        except ValueError as error:
            return ToolOutcome.failure(
                f"Error: the arguments of tool {self.name} are not valid JSON ({error}). "
                "Send a JSON object matching the tool's parameters.",
                "ToolInputError",
                "INVALID_TOOL_INPUT",
            )
        if not isinstance(raw, dict):
            return ToolOutcome.failure(
                f"Error: the arguments of tool {self.name} must be a JSON object, got {type(raw).__name__}.",
                "ToolInputError",
                "INVALID_TOOL_INPUT",
            )
        try:
            parsed = self.arguments_model.model_validate(raw)
        except pydantic.ValidationError as error:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in item['loc']) or '(arguments)'}: {item['msg']}" for item in error.errors()
            )
            return ToolOutcome.failure(
                f"Error: invalid arguments for tool {self.name}: {problems}. Fix them and call the tool again.",
                "ToolInputError",
                "INVALID_TOOL_INPUT",
            )
        kwargs = {name: getattr(parsed, name) for name in type(parsed).model_fields}
        if self.context_param is not None:
            kwargs[self.context_param] = context
        limit = self.timeout if self.timeout is not None else timeout
        try:
            if self.is_async:
                value = await asyncio.wait_for(self.fn(**kwargs), limit)
            else:
                value = await asyncio.wait_for(asyncio.to_thread(self.fn, **kwargs), limit)
        except TimeoutError:
            return ToolOutcome.failure(
                f"Error: tool {self.name} did not finish within {limit:g} s and was abandoned; "
                "whatever it changed before that is unknown. Do not retry blindly.",
                "ToolTimeoutError",
                "TOOL_TIMEOUT",
            )
        except Exception as error:
            detail = str(error) or "(no message)"
            return ToolOutcome.failure(
                f"Error: tool {self.name} failed: {type(error).__name__}: {detail}",
                type(error).__name__,
                "TOOL_ERROR",
            )
        return _outcome(value)


def _outcome(value: Any) -> ToolOutcome:
    if isinstance(value, ToolOutput):
        if isinstance(value.content, str):
            content = [{"type": "text", "text": value.content or "(no output)"}]
        else:
            content = [dict(block) for block in value.content] or [{"type": "text", "text": "(no output)"}]
        error = dict(value.error) if value.error is not None else None
        return ToolOutcome(content, value.is_error or error is not None, error, value.meta)
    if value is None:
        text = "(no output)"
    elif isinstance(value, str):
        text = value or "(no output)"
    elif isinstance(value, BaseModel):
        text = value.model_dump_json()
    else:
        try:
            text = json.dumps(value, ensure_ascii=False)
        except (TypeError, ValueError):
            text = str(value)
    return ToolOutcome([{"type": "text", "text": text}])


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...
@overload
def tool(
    *, name: str | None = None, description: str | None = None, timeout: float | None = None
) -> Callable[[Callable[..., Any]], Tool]: ...
def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make ``fn`` a :class:`Tool` (``@tool`` or ``@tool(name=…, timeout=…)``); ``timeout`` in seconds."""

    def wrap(function: Callable[..., Any]) -> Tool:
        return Tool(function, name=name, description=description, timeout=timeout)

    return wrap if fn is None else wrap(fn)


ToolLike = Tool | Callable[..., Any] | Callable[..., Awaitable[Any]]


def as_tool(value: ToolLike) -> Tool:
    """A :class:`Tool` for a tool or a plain function."""
    return value if isinstance(value, Tool) else Tool(value)
