"""Packing one model attempt's chunks into stream records, exactly as dsh's migration packs them.

The v1→v2 edge folds a legacy attempt (``assistant/chunk`` events, packed chunk
rows, or both) into one ``AssistantStreamRecord[]`` list (dsh-v4 §3.4). Two steps
do it, mirroring dsh: an accumulator packs consecutive loose chunks
(:class:`ChunkAccumulator`, dsh-llm's ``AssistantStreamAccumulator``), and
:class:`AttemptStream` appends its records and whole packed rows to the attempt,
merging a record into the previous run when the type, block index (and for tool
calls the id and name) agree and the time gap is a safe integer. Records keep dsh's
key order, because they are written as they are built.
"""

from __future__ import annotations

from typing import Any

from dshpy.core.json import MAX_SAFE_INTEGER
from dshpy.log.formats.chain import FormatError

__all__ = ["AttemptStream", "ChunkAccumulator"]

_DELTA_RUNS = {"text-delta": "text-chunks", "reasoning-delta": "reasoning-chunks"}
_VERBATIM = frozenset({"block-start", "block-end", "usage", "finish"})


def _safe(value: int) -> bool:
    return -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER


def _index(value: Any, label: str) -> int:
    if type(value) is not int or not 0 <= value <= MAX_SAFE_INTEGER:
        raise FormatError(f"{label} index must be a non-negative safe integer")
    return value


class ChunkAccumulator:
    """Consecutive loose chunks of one attempt, packed into records (runs remember their last time)."""

    __slots__ = ("_records",)

    def __init__(self) -> None:
        self._records: list[dict[str, Any]] = []

    def push(self, time: Any, chunk: Any) -> None:
        if type(time) is not int or not _safe(time):
            raise FormatError(f"Assistant stream time must be a safe integer, got {time}")
        if not isinstance(chunk, dict):
            raise FormatError("Assistant stream chunk must be losslessly JSON-serializable")
        kind = chunk.get("type")
        previous = self._records[-1] if self._records else None
        if kind in _DELTA_RUNS:
            index = _index(chunk.get("index"), kind)
            if not isinstance(chunk.get("text"), str):
                raise FormatError(f"{kind} text must be a string")
            run = _DELTA_RUNS[kind]
            if previous is not None and previous["type"] == run and previous["index"] == index:
                gap = time - previous["lastTime"]
                if _safe(gap):
                    previous["dt"].append(gap)
                    previous["texts"].append(chunk["text"])
                    previous["lastTime"] = time
                    return
            self._records.append(
                {"type": run, "time0": time, "index": index, "dt": [], "texts": [chunk["text"]], "lastTime": time}
            )
        elif kind == "tool-call-delta":
            self._push_tool(time, chunk, previous)
        elif kind in _VERBATIM:
            self._records.append({"type": "chunk", "time": time, "chunk": chunk})
        else:
            raise FormatError(f"Unexpected value in AssistantStreamAccumulator.push: {chunk.get('type')!r}")

    def _push_tool(self, time: int, chunk: dict[str, Any], previous: dict[str, Any] | None) -> None:
        index = _index(chunk.get("index"), "tool-call-delta")
        if not isinstance(chunk.get("id"), str):
            raise FormatError("tool-call-delta id must be a string")
        if "name" in chunk and not isinstance(chunk["name"], str):
            raise FormatError("tool-call-delta name must be a string")
        if not isinstance(chunk.get("argumentsDelta"), str):
            raise FormatError("tool-call-delta argumentsDelta must be a string")
        if not chunk["id"] or chunk.get("name") == "":
            self._records.append({"type": "chunk", "time": time, "chunk": chunk})
            return
        if (
            previous is not None
            and previous["type"] == "tool-call-chunks"
            and previous["index"] == index
            and previous["id"] == chunk["id"]
            and ("name" in previous) == ("name" in chunk)
            and previous.get("name") == chunk.get("name")
            and _safe(time - previous["lastTime"])
        ):
            previous["dt"].append(time - previous["lastTime"])
            previous["args"].append(chunk["argumentsDelta"])
            previous["lastTime"] = time
            return
        record: dict[str, Any] = {
            "type": "tool-call-chunks",
            "time0": time,
            "index": index,
            "dt": [],
            "id": chunk["id"],
        }
        if "name" in chunk:
            record["name"] = chunk["name"]
        record["args"] = [chunk["argumentsDelta"]]
        record["lastTime"] = time
        self._records.append(record)

    def snapshot(self) -> list[dict[str, Any]]:
        """The durable records (a run's ``lastTime`` bookkeeping dropped)."""
        out = []
        for record in self._records:
            if record["type"] == "chunk":
                out.append(dict(record))
            else:
                out.append({key: value for key, value in record.items() if key != "lastTime"})
        return out


def _last_time(record: dict[str, Any]) -> int:
    if record["type"] == "chunk":
        return int(record["time"])
    return int(record["time0"]) + int(sum(record["dt"]))


def _copy(record: dict[str, Any]) -> dict[str, Any]:
    if record["type"] == "chunk":
        return record
    members = "args" if record["type"] == "tool-call-chunks" else "texts"
    return {**record, "dt": list(record["dt"]), members: list(record[members])}


class AttemptStream:
    """One attempt's record list under construction (dsh's ``appendStreamRecord`` merging)."""

    __slots__ = ("_entries", "accumulator")

    def __init__(self) -> None:
        self._entries: list[tuple[dict[str, Any], int]] = []
        self.accumulator: ChunkAccumulator | None = None

    def append(self, record: dict[str, Any], last_time: int, *, owned: bool = True) -> None:
        """Add a record whose last member arrived at ``last_time``; a run that continues the previous one merges."""
        entries = self._entries
        previous = entries[-1][0] if entries else None
        kind = record["type"]
        if previous is None or kind == "chunk" or previous["type"] != kind:
            entries.append((record if owned else _copy(record), last_time))
            return
        gap = record["time0"] - entries[-1][1]
        same_tool = kind != "tool-call-chunks" or (
            previous["id"] == record["id"] and previous.get("name") == record.get("name")
        )
        if previous["index"] != record["index"] or not _safe(gap) or not same_tool:
            entries.append((record if owned else _copy(record), last_time))
            return
        members = "args" if kind == "tool-call-chunks" else "texts"
        previous["dt"].append(gap)
        previous["dt"].extend(record["dt"])
        previous[members].extend(record[members])
        entries[-1] = (previous, last_time)

    def flush(self) -> None:
        """Move the accumulator's packed loose chunks into the record list."""
        accumulator = self.accumulator
        if accumulator is None:
            return
        for record in accumulator.snapshot():
            self.append(record, _last_time(record), owned=False)
        self.accumulator = None

    def records(self) -> list[dict[str, Any]]:
        self.flush()
        return [record for record, _ in self._entries]
