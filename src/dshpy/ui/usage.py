"""The UI's usage view: tokens per turn (failed attempts included) and time per step, from the log."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dshpy.core.events import SessionEvent
from dshpy.core.json import thaw
from dshpy.projections.builtins._stream import last_usage
from dshpy.query import SessionQuery
from dshpy.storage.contract import SessionStore

__all__ = ["usage_of"]

_USAGE_KEYS = ("inputTokens", "cacheReadTokens", "cacheWriteTokens", "outputTokens", "reasoningTokens")
_USAGE_TYPES = ("turn/start", "turn/end", "step/start", "step/end", "assistant/message", "assistant/attempt")


def usage_of(
    store: SessionStore, query: SessionQuery, session_id: str, cost: Callable[[Any], dict[str, Any] | None]
) -> dict[str, Any]:
    """Tokens per turn (input, cached, output, reasoning; failed attempts included) and time per step.

    A message's ``usage`` counts, else its stream's last usage chunk; an attempt has
    only the chunk. Totals and the cost come from the ``usage`` projection.
    """
    view = query.inspect(session_id)
    turns: dict[int, dict[str, Any]] = {}
    steps: list[dict[str, Any]] = []
    open_steps: dict[tuple[int, int], SessionEvent] = {}
    for event in store.read_types(session_id, _USAGE_TYPES):
        data = thaw(event.data)
        turn = data.get("turn") if isinstance(data, dict) else None
        if not isinstance(turn, int):
            continue
        row = turns.setdefault(turn, {"turn": turn, **{k: 0 for k in _USAGE_KEYS}, "calls": 0, "failed": 0})
        if event.type == "turn/start":
            row["start"] = event.time
        elif event.type == "turn/end":
            row["end"] = event.time
            reason = data.get("reason")
            row["outcome"] = reason.get("kind") if isinstance(reason, dict) else None
        elif event.type == "step/start":
            open_steps[(turn, data.get("step", 0))] = event
        elif event.type == "step/end":
            started = open_steps.pop((turn, data.get("step", 0)), None)
            if started is not None:
                steps.append({"turn": turn, "step": data.get("step"), "ms": max(0, event.time - started.time)})
        else:
            found = data.get("usage") if event.type == "assistant/message" else None
            counts = found if isinstance(found, dict) else last_usage(data.get("stream"))
            row["calls" if event.type == "assistant/message" else "failed"] += 1
            for key in _USAGE_KEYS:
                value = counts.get(key) if isinstance(counts, dict) else None
                if type(value) is int and value >= 0:
                    row[key] += value
    usage = view.projections.get("usage")
    return {
        "sessionId": session_id,
        "turns": [turns[t] for t in sorted(turns)],
        "steps": steps,
        "total": thaw(usage).get("total") if isinstance(usage, dict) else None,
        "stats": thaw(view.projections.get("stats")),
        "cost": cost(thaw(usage) if usage is not None else None),
    }
