"""Long format-v0 logs shaped like the ones dsh rc.8 wrote, for upgrade benchmarks and crash tests.

rc.8 logged every model stream chunk as an event and packed runs of deltas into one
row (dsh-dataplane §2.8, §6.5); most of a real v0 log is chunks. :func:`v0_log`
writes completed turns in rc.8's order (``turn/start``, ``step/start``, the prompt,
``request/header``, the chunks — a block start, a packed ``text-chunks`` row, block
end, usage, finish —, the ``assistant/message`` citing them all, ``step/end``,
``turn/end``), so dsh's chain upgrades it and a v4 reader accepts the result.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dshpy.core.events import encode_seq_ranges
from dshpy.core.json import dumps
from dshpy.storage.jsonl.layout import log_path
from dshpy.storage.jsonl.zstd_frames import compress_frame

__all__ = ["v0_header", "v0_log", "write_v0_log"]

_MODEL = {"provider": "deepseek-official", "model": "deepseek-v4-flash"}


def v0_header(
    session_id: str, *, cwd: str | None = "/tmp/dshpy-v0", created_at: int = 1_700_000_000_000
) -> dict[str, Any]:
    """A v0 header record in rc.8's key order."""
    header: dict[str, Any] = {"type": "session", "version": 0, "id": session_id, "createdAt": created_at}
    if cwd is not None:
        header["cwd"] = cwd
    header["delegationDepth"] = 0
    return header


def v0_log(session_id: str, *, events: int, deltas: int = 24, cwd: str | None = "/tmp/dshpy-v0") -> Iterator[bytes]:
    """The lines (each with its newline) of a v0 log of at least ``events`` events, whole turns only.

    Each answer streams ``deltas`` text deltas (one packed row) and cites its chunks.
    """
    created = 1_700_000_000_000
    yield dumps(v0_header(session_id, cwd=cwd, created_at=created)) + b"\n"
    seq = 0
    turn = 0
    time = created

    def row(kind: str, data: Any, **envelope: Any) -> bytes:
        nonlocal seq, time
        line = dumps({"type": kind, "seq": seq, "time": time, "data": data, **envelope}) + b"\n"
        seq += 1
        time += 1
        return line

    while seq < events:
        turn += 1
        yield row("turn/start", {"turn": turn})
        yield row("step/start", {"turn": turn, "step": 1})
        prompt = {"id": f"u-{turn}", "role": "user", "content": [{"type": "text", "text": f"question {turn}"}]}
        yield row("user/message", {**prompt, "source": {"kind": "user"}}, surfaceOp="append")
        header: dict[str, Any] = {"config": _MODEL}
        if turn == 1:
            header["system"] = "You are a helpful agent."
        yield row("request/header", {"header": header, "reason": "initial" if turn == 1 else "resume"})
        first = seq
        yield row(
            "assistant/chunk",
            {"turn": turn, "step": 1, "chunk": {"type": "block-start", "index": 0, "blockType": "text"}},
        )
        texts = [f"w{turn}.{index} " for index in range(deltas)]
        packed = {"turn": turn, "step": 1, "index": 0, "dt": [1] * (deltas - 1), "texts": texts}
        yield dumps({"type": "text-chunks", "seq0": seq, "time0": time, "data": packed}) + b"\n"
        seq += deltas
        time += deltas
        answer = "".join(texts)
        block = {"type": "block-end", "index": 0, "block": {"type": "text", "text": answer}}
        yield row("assistant/chunk", {"turn": turn, "step": 1, "chunk": block})
        usage = {"inputTokens": 100 + turn, "outputTokens": deltas}
        yield row("assistant/chunk", {"turn": turn, "step": 1, "chunk": {"type": "usage", "usage": usage}})
        yield row("assistant/chunk", {"turn": turn, "step": 1, "chunk": {"type": "finish", "reason": {"kind": "stop"}}})
        message = {
            "id": f"a-{turn}",
            "role": "assistant",
            "content": [{"type": "text", "text": answer}],
            "source": {"kind": "model", **_MODEL},
        }
        yield row(
            "assistant/message",
            {"turn": turn, "step": 1, "message": message, "usage": usage},
            sourceEventSeqs=encode_seq_ranges(range(first, seq)),  # rc.8 range-packs the citation
            surfaceOp="append",
        )
        yield row("step/end", {"turn": turn, "step": 1})
        yield row("turn/end", {"turn": turn, "reason": {"kind": "completed"}})


def write_v0_log(root: Path, session_id: str, *, events: int, cwd: str, compression: str) -> Path:
    """Store :func:`v0_log` where a JSONL root keeps that session's v0 generation, as dsh rc.8 wrote it.

    ``compression`` is ``"zstd"`` (the header in a frame of its own, the events in one
    more) or ``"none"``. Returns the file's path.
    """
    zstd = compression == "zstd"
    path = log_path(root, cwd, session_id, 0, compressed=zstd)
    path.parent.mkdir(parents=True)
    lines = list(v0_log(session_id, events=events, cwd=cwd))
    path.write_bytes(compress_frame(lines[0]) + compress_frame(b"".join(lines[1:])) if zstd else b"".join(lines))
    return path
