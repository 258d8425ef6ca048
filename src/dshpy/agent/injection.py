"""What :meth:`Agent.inject` accepts, and the user message it makes of it.

dsh's ``agent.inject`` takes a complete ``UserMessage`` (``role``, ``content``,
``source``, ``id``); the seed's example writes the shorter ``{type: 'user', content:
[...]}``. Both are accepted, and a plain text too. What is missing is filled in: a
fresh message ``id``; the ``source`` the caller passes, else the plugin whose handler
is running (a plugin host sets :data:`INJECTING_PLUGIN` around its handlers, so the
injected message carries ``{"kind": "plugin:<name>"}`` — dsh v4's producer-owned
source kinds — and is never mistaken for the human's words), else ``{"kind": "user"}``.
Anything else is refused with a message that names what is wrong, before the log is
touched.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any

from dshpy.log.records import user_message

__all__ = ["INJECTING_PLUGIN", "injected_message"]

INJECTING_PLUGIN: ContextVar[str | None] = ContextVar("dshpy_injecting_plugin", default=None)
"""The name of the plugin whose handler is running in this context (``None`` outside one)."""

_KEYS = frozenset({"type", "role", "content", "source", "id"})
_SHAPES = "a text, {'type': 'user', 'content': [...]} or a user message {'role': 'user', 'content': ...}"


def _default_source(source: Mapping[str, Any] | None) -> dict[str, Any]:
    if source is not None:
        return dict(source)
    plugin = INJECTING_PLUGIN.get()
    return {"kind": f"plugin:{plugin}"} if plugin else {"kind": "user"}


def _blocks(content: object) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list | tuple) or not content:
        raise ValueError(f"inject(): content must be a text or a non-empty list of blocks, not {content!r}")
    blocks = []
    for index, block in enumerate(content):
        if not isinstance(block, Mapping) or not isinstance(block.get("type"), str):
            raise ValueError(f"inject(): content[{index}] must be a block with a 'type' (e.g. 'text'), not {block!r}")
        if block["type"] == "text" and not isinstance(block.get("text"), str):
            raise ValueError(f"inject(): content[{index}] is a text block without a 'text' string")
        blocks.append(dict(block))
    return blocks


def injected_message(message: str | Mapping[str, Any], source: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The complete ``UserMessage`` to queue for ``message`` (see the module docstring)."""
    if isinstance(message, str):
        return user_message(message, _default_source(source))
    if not isinstance(message, Mapping):
        raise TypeError(f"inject() takes {_SHAPES}; got {type(message).__name__}")
    if message.get("type") != "user" and message.get("role") != "user":
        raise ValueError(f"inject() takes {_SHAPES}; got type={message.get('type')!r}, role={message.get('role')!r}")
    unknown = sorted(str(key) for key in message if key not in _KEYS)
    if unknown:
        raise ValueError(f"inject(): unknown key {unknown[0]!r} in the message (known: {', '.join(sorted(_KEYS))})")
    given = message.get("source")
    if given is not None and not (isinstance(given, Mapping) and isinstance(given.get("kind"), str)):
        raise ValueError(f"inject(): source must be a mapping with a 'kind' string, not {given!r}")
    message_id = message.get("id")
    if message_id is not None and (not isinstance(message_id, str) or not message_id):
        raise ValueError(f"inject(): id must be a non-empty string, not {message_id!r}")
    return user_message(
        _blocks(message.get("content")),
        dict(given) if given is not None else _default_source(source),
        message_id=message_id,
    )
