"""The event types dshpy understands: dsh format v4's vocabulary plus plugin records.

A reader that meets a type outside :data:`KNOWN_EVENT_TYPES` must refuse the log
unless that event is marked ``ignorable``: skipping a required event would rebuild
a different conversation than the one the model saw. dshpy's own extra records use
the plugin namespace (``plugin:dshpy/<name>``), are always ignorable and never reach
the model, so the real dsh runtime can still read every session we write.
"""

from __future__ import annotations

import re
from typing import Final

from dshpy.errors import UnknownEventTypeError

__all__ = [
    "IN_STEP_EVENT_TYPES",
    "IN_TURN_EVENT_TYPES",
    "KNOWN_EVENT_TYPES",
    "MESSAGE_PROJECTION_EVENT_TYPES",
    "PLUGIN_TYPE_PATTERN",
    "SURFACE_EVENT_TYPES",
    "TURN_END_KINDS",
    "is_known_type",
    "is_plugin_type",
    "unknown_type_error",
]

KNOWN_EVENT_TYPES: Final = frozenset(
    {
        "agent-preset/selected",
        "agent/inbox/spliced",
        "approval/asked",
        "approval/decided",
        "approval/policy",
        "assistant/attempt",
        "assistant/message",
        "command/done",
        "command/run",
        "compaction/end",
        "compaction/prune",
        "compaction/start",
        "compaction/summary",
        "deliverables/presented",
        "developer/message",
        "feedback/message-delete",
        "feedback/message-put",
        "feedback/record",
        "goal/change",
        "hook/invoked",
        "hook/result",
        "image/offload",
        "job/registered",
        "job/settled",
        "llm/retry",
        "llm/retry-started",
        "model/selection",
        "permission/preset",
        "plan/mode",
        "request/context",
        "request/header",
        "sandbox/mode",
        "schedule/change",
        "session-log-deepseek/delivery-accepted",
        "session/end-seed",
        "session/title",
        "session/title-llm-request",
        "step/end",
        "step/start",
        "subagent/catalog",
        "subagent/descriptor",
        "subagent/model-selection-policy",
        "system/message",
        "team/member",
        "team/message/delivered",
        "team/message/queued",
        "team/task",
        "todo/write",
        "tool-workflow/agent-end",
        "tool-workflow/agent-start",
        "tool-workflow/run-end",
        "tool-workflow/run-start",
        "tool/call",
        "tool/ptc-dispatch",
        "tool/ptc-dispatch-start",
        "tool/result",
        "turn/end",
        "turn/start",
        "user/message",
        "web/deepseek-search-llm-request",
        "working-directory/change",
        "workspace/changes",
    }
)
"""dsh v4's 62 known event types (``KNOWN_SESSION_EVENT_TYPES`` in the original)."""

SURFACE_EVENT_TYPES: Final = frozenset(
    {"system/message", "developer/message", "user/message", "assistant/message", "tool/result"}
)
"""The only types that can produce a model-visible message; they always carry a ``surfaceOp``."""

MESSAGE_PROJECTION_EVENT_TYPES: Final = frozenset({"image/offload"})
"""Types that rewrite earlier messages through a projection dshpy does not implement yet."""

IN_STEP_EVENT_TYPES: Final = frozenset(
    {"system/message", "developer/message", "assistant/message", "assistant/attempt", "tool/call"}
)
"""Types that name the open ``(turn, step)`` and may only occur inside it."""

IN_TURN_EVENT_TYPES: Final = frozenset({"request/header", "request/context"})
"""Types that may only occur while a turn is open."""

TURN_END_KINDS: Final = frozenset({"completed", "aborted", "blocked", "error", "max-tokens", "interrupted", "forked"})
"""``turn/end`` reason kinds of format v4."""

PLUGIN_TYPE_PATTERN: Final = re.compile(r"^plugin:[a-z0-9][a-z0-9._-]*(?:/[a-z0-9][a-z0-9._-]*)*$")
"""dsh v4's plugin-record namespace; such records are always ``ignorable``."""


def is_known_type(event_type: str) -> bool:
    """Whether this build interprets ``event_type`` (plugin records are not interpreted)."""
    return event_type in KNOWN_EVENT_TYPES


def is_plugin_type(event_type: str) -> bool:
    """Whether ``event_type`` is a well-formed plugin-record type."""
    return PLUGIN_TYPE_PATTERN.match(event_type) is not None


def unknown_type_error(event_type: str, seq: int, session_id: str | None = None) -> UnknownEventTypeError:
    """The refusal of a required event whose type this build does not know (one wording for every reader)."""
    where = f'session "{session_id}" ' if session_id is not None else ""
    return UnknownEventTypeError(
        f'{where}event type "{event_type}" (seq {seq}) is unknown to this harness and not marked ignorable; '
        "the log was likely written by a newer harness — upgrade dshpy to open it"
    )
