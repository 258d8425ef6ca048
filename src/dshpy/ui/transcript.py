"""The transcript a person reads: the model's messages in log order, plus what the model never saw.

Built from the stored log and its :class:`~dshpy.query.surface_trace.SurfaceTrace`,
not from ``derive_messages()``, because a reader wants more than the model's view:
which messages a compaction checkpoint took off the surface (nested under the
checkpoint, so the card can expand to them), and the failed model attempts with the
retry that followed (shown aside, never as history). Each item is plain JSON for the
browser; the browser renders every string as text.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from dshpy.core.events import SessionEvent, SurfaceReplace
from dshpy.core.json import thaw
from dshpy.query.surface_trace import SURFACE_TYPES, SurfaceTrace

__all__ = ["TRANSCRIPT_TYPES", "attempt_text", "transcript_items"]

TRANSCRIPT_TYPES: tuple[str, ...] = (*SURFACE_TYPES, "assistant/attempt", "llm/retry", "compaction/summary")
"""The event types a transcript reads (surface messages, failed attempts, retries, summaries)."""


def attempt_text(stream: Any) -> str:
    """The text a failed attempt had streamed before it failed (its ``text-chunks`` joined)."""
    parts: list[str] = []
    for record in stream if isinstance(stream, list) else ():
        if isinstance(record, Mapping) and record.get("type") == "text-chunks":
            parts.extend(t for t in record.get("texts") or () if isinstance(t, str))
    return "".join(parts)


def _message(event: SessionEvent) -> dict[str, Any]:
    """One surface event as an item; only the message is thawed (an assistant's packed stream is left alone)."""
    data = event.data if isinstance(event.data, Mapping) else {}
    message = data.get("message", data)
    item: dict[str, Any] = {"kind": "message", "seq": event.seq, "time": event.time, "type": event.type}
    if isinstance(message, Mapping):
        item["role"] = message.get("role")
        item["content"] = thaw(message.get("content"))
        for key in ("toolCallId", "isError", "source"):
            if key in message:
                item[key] = thaw(message[key])
    for key in ("turn", "step", "usage"):
        if key in data:
            item[key] = thaw(data[key])
    return item


def transcript_items(events: Iterable[SessionEvent], trace: SurfaceTrace) -> list[dict[str, Any]]:
    """Top-level transcript items, in seq order, from ``events`` (at least :data:`TRANSCRIPT_TYPES`).

    An item is ``{"kind": "message" | "checkpoint" | "attempt" | "retry", "seq", ...}``.
    A checkpoint (a replacing surface event) carries ``shadowed``: the items it took off
    the surface (recursively, for a checkpoint that replaced an earlier one) and
    ``summary`` when a ``compaction/summary`` preceded it. Shadowed messages never
    appear at the top level.
    """
    by_seq: dict[int, dict[str, Any]] = {}
    top: list[dict[str, Any]] = []
    last_summary: Any = None
    for event in events:
        if event.type == "compaction/summary":
            last_summary = thaw(event.data)
            continue
        if event.type == "assistant/attempt":
            data = event.data if isinstance(event.data, Mapping) else {}
            top.append(
                {"kind": "attempt", "seq": event.seq, "time": event.time, "text": attempt_text(data.get("stream")),
                 "turn": data.get("turn"), "step": data.get("step")}
            )  # fmt: skip
            continue
        if event.type == "llm/retry":
            data = thaw(event.data)
            top.append({"kind": "retry", "seq": event.seq, "time": event.time, "data": data})
            continue
        if event.type not in SURFACE_TYPES or event.surface_op is None:
            continue
        item = _message(event)
        by_seq[event.seq] = item
        if isinstance(event.surface_op, SurfaceReplace):
            item["kind"] = "checkpoint"
            item["replaces"] = [event.surface_op.start_seq, event.surface_op.end_seq]
            item["shadowed"] = [by_seq[s] for s in trace.replaced.get(event.seq, ()) if s in by_seq]
            if last_summary is not None:
                item["summary"] = last_summary
                last_summary = None
        item["surface"] = trace.surface_of(event.seq)
        if event.seq not in trace.replaced_by:  # shadowed: nested under the checkpoint that replaced it
            top.append(item)
    return _in_model_order(top)


def _in_model_order(top: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Place each checkpoint where the span it replaced stood, with the attempts made inside that span.

    The model reads a checkpoint in place of the messages it condensed, so the reader
    should too; an attempt or retry logged among the condensed messages belongs to
    them. ``at`` is the position key the items are sorted (and paged) by.
    """
    spans = [item for item in top if item["kind"] == "checkpoint"]
    kept: list[dict[str, Any]] = []
    for item in top:
        item["at"] = item["replaces"][0] if item["kind"] == "checkpoint" else item["seq"]
        owner = None
        if item["kind"] in ("attempt", "retry"):
            owner = next((c for c in spans if c["replaces"][0] <= item["seq"] <= c["replaces"][1]), None)
        if owner is None:
            kept.append(item)
        else:
            owner["shadowed"] = sorted([*owner["shadowed"], item], key=lambda i: i["seq"])
    return sorted(kept, key=lambda i: (i["at"], i["seq"]))
