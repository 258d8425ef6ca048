"""Packing a model stream into dsh's ``AssistantStreamRecord`` runs, and back (dsh-v4 §3.4).

dsh v4 stores no per-chunk events: the whole timed chunk sequence of one model
attempt rides inside its ``assistant/message`` (or ``assistant/attempt``) as a list
of records, which is lossless (:func:`expand_stream` gives the exact chunks and
receipt times back) yet compact, because consecutive deltas of one block share a
record:

* ``{type: "chunk", time, chunk}`` — block-start, block-end, usage, finish, and a
  degenerate tool-call delta (empty ``id`` or ``name: ""``);
* ``{type: "text-chunks" | "reasoning-chunks", time0, index, dt, texts}``;
* ``{type: "tool-call-chunks", time0, index, dt, id, name?, args}``.

A delta extends the previous record when that record is a run of the same type and
block ``index`` (tool runs: also the same ``id`` and the same presence and value of
``name``); member k arrived at ``time0 + dt[0] + … + dt[k-1]``. A run may have one
member. :class:`AssistantStreamAccumulator` also folds the chunks into content blocks,
so the message content, the usage and the finish reason come from the same place.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from dshpy.llm.chunks import StreamChunk

__all__ = ["AssistantStreamAccumulator", "expand_stream", "pack_stream"]

_RUN_TYPES = {"text-delta": "text-chunks", "reasoning-delta": "reasoning-chunks"}
_DELTA_TYPES = {run: delta for delta, run in _RUN_TYPES.items()}


class AssistantStreamAccumulator:
    """Collects one attempt's chunks: packed records, content blocks, usage and finish.

    :meth:`push` is O(1) per chunk (texts are kept as pieces and joined once, when
    read). Nothing is written anywhere; the agent stores :attr:`records` once, in the
    event that settles the attempt.
    """

    __slots__ = ("_blocks", "_finish", "_last_time", "_records", "_replay", "_usage")

    def __init__(self) -> None:
        self._records: list[dict[str, Any]] = []
        self._last_time = 0
        self._blocks: dict[int, dict[str, Any]] = {}
        self._usage: dict[str, Any] | None = None
        self._finish: dict[str, Any] | None = None
        self._replay: dict[str, Any] | None = None

    # -- packing ------------------------------------------------------------------

    def push(self, chunk: StreamChunk, time: int) -> None:
        """Add one chunk received at ``time`` (epoch ms)."""
        kind = chunk.get("type")
        records = self._records
        last = records[-1] if records else None
        if kind in _RUN_TYPES:
            run = _RUN_TYPES[kind]
            if last is not None and last["type"] == run and last["index"] == chunk["index"]:
                last["dt"].append(time - self._last_time)
                last["texts"].append(chunk["text"])
            else:
                records.append(
                    {"type": run, "time0": time, "index": chunk["index"], "dt": [], "texts": [chunk["text"]]}
                )
        elif kind == "tool-call-delta" and chunk.get("id") and chunk.get("name") != "":
            if (
                last is not None
                and last["type"] == "tool-call-chunks"
                and last["index"] == chunk["index"]
                and last["id"] == chunk["id"]
                and ("name" in last) == ("name" in chunk)
                and last.get("name") == chunk.get("name")
            ):
                last["dt"].append(time - self._last_time)
                last["args"].append(chunk["argumentsDelta"])
            else:
                record: dict[str, Any] = {
                    "type": "tool-call-chunks",
                    "time0": time,
                    "index": chunk["index"],
                    "dt": [],
                    "id": chunk["id"],
                }
                if "name" in chunk:
                    record["name"] = chunk["name"]
                record["args"] = [chunk["argumentsDelta"]]
                records.append(record)
        else:
            records.append({"type": "chunk", "time": time, "chunk": chunk})
        self._last_time = time
        self._fold(chunk)

    def _fold(self, chunk: StreamChunk) -> None:
        # Unfinished blocks keep their text as a list of pieces ("parts"), joined when read:
        # appending each delta to one string would copy the whole text per chunk.
        kind = chunk.get("type")
        blocks = self._blocks
        if kind == "block-start":
            block_type = chunk["blockType"]
            if block_type == "tool-call":
                blocks[chunk["index"]] = {"type": "tool-call", "id": "", "name": "", "parts": [], "done": False}
            else:
                blocks[chunk["index"]] = {"type": block_type, "parts": [], "done": False}
        elif kind in _RUN_TYPES:
            block = blocks.setdefault(chunk["index"], {"type": kind.removesuffix("-delta"), "parts": [], "done": False})
            block["parts"].append(chunk["text"])
        elif kind == "tool-call-delta":
            block = blocks.setdefault(
                chunk["index"], {"type": "tool-call", "id": "", "name": "", "parts": [], "done": False}
            )
            if chunk.get("id"):
                block["id"] = chunk["id"]
            if chunk.get("name"):
                block["name"] = chunk["name"]
            block["parts"].append(chunk.get("argumentsDelta", ""))
        elif kind == "block-end":
            blocks[chunk["index"]] = {**chunk["block"], "done": True}
        elif kind == "usage":
            self._usage = chunk["usage"]
        elif kind == "finish":
            self._finish = chunk["reason"]
            replay = chunk.get("replayState")
            self._replay = replay if isinstance(replay, dict) else None

    # -- reading ------------------------------------------------------------------

    @property
    def records(self) -> list[dict[str, Any]]:
        """The packed ``AssistantStreamRecord`` list (live: later pushes extend it)."""
        return self._records

    @property
    def usage(self) -> dict[str, Any] | None:
        """The last ``usage`` the provider reported (reports are cumulative)."""
        return self._usage

    @property
    def finish_reason(self) -> dict[str, Any] | None:
        """The ``finish`` chunk's reason, once it arrived."""
        return self._finish

    @property
    def replay_state(self) -> dict[str, Any] | None:
        """The ``finish`` chunk's ``replayState`` (Messages API answers: the thinking signatures), if any."""
        return self._replay

    @property
    def started(self) -> bool:
        """Whether any chunk arrived."""
        return bool(self._records)

    def content(self) -> list[dict[str, Any]]:
        """The completed blocks (``block-end`` seen), in block order: the message content."""
        return [_public(block) for _, block in sorted(self._blocks.items()) if block["done"]]

    def visible_content(self) -> list[dict[str, Any]]:
        """Text and reasoning received so far, finished or not (what an interrupted message keeps).

        Tool calls are left out: an unfinished call cannot be run, and a finished one
        in a message cut short would have to be answered before the turn could end.
        """
        blocks = []
        for _, block in sorted(self._blocks.items()):
            if block["type"] in ("text", "reasoning"):
                text = block["text"] if block["done"] else "".join(block["parts"])
                if text:
                    blocks.append({"type": block["type"], "text": text})
        return blocks


def _public(block: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in block.items() if key != "done"}


def pack_stream(chunks: Iterable[tuple[int, StreamChunk]]) -> list[dict[str, Any]]:
    """Pack ``(time, chunk)`` pairs into records (what :class:`AssistantStreamAccumulator` stores)."""
    accumulator = AssistantStreamAccumulator()
    for time, chunk in chunks:
        accumulator.push(chunk, time)
    return accumulator.records


def expand_stream(records: Sequence[Any]) -> list[tuple[int, StreamChunk]]:
    """The exact timed chunk sequence a record list packs (dsh's ``expandAssistantStream``)."""
    out: list[tuple[int, StreamChunk]] = []
    for record in records:
        kind = record["type"]
        if kind == "chunk":
            out.append((record["time"], dict(record["chunk"])))
            continue
        time = record["time0"]
        members = record["texts"] if kind in _DELTA_TYPES else record["args"]
        for position, member in enumerate(members):
            if position:
                time += record["dt"][position - 1]
            if kind in _DELTA_TYPES:
                out.append((time, {"type": _DELTA_TYPES[kind], "index": record["index"], "text": member}))
            else:
                chunk: StreamChunk = {"type": "tool-call-delta", "index": record["index"], "id": record["id"]}
                if "name" in record:
                    chunk["name"] = record["name"]
                chunk["argumentsDelta"] = member
                out.append((time, chunk))
    return out
