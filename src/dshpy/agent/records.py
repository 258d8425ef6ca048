"""The agent's texts for cancelled tool calls; event data is built by :mod:`dshpy.log.records`.

The builders are re-exported here so that ``from dshpy.agent.records import
user_message`` keeps working.
"""

from __future__ import annotations

from dshpy.log.records import (
    assistant_data,
    claim_splice,
    insert_splice,
    system_data,
    tool_result_data,
    user_message,
)

__all__ = [
    "ABORTED_BEFORE_DISPATCH",
    "ABORTED_RUNNING",
    "assistant_data",
    "claim_splice",
    "insert_splice",
    "system_data",
    "tool_result_data",
    "user_message",
]

ABORTED_BEFORE_DISPATCH = "Error: tool call aborted before dispatch"
"""dsh's text for a call cancelled before its body started (``TOOL_ABORTED_BEFORE_DISPATCH``)."""

ABORTED_RUNNING = (
    "Error: the tool call was cancelled while it was running, so it may have done part of its work. "
    "Its outcome is unknown. Do not retry blindly."
)
"""Our text for a call cancelled while its body ran (``TOOL_ABORTED``)."""
