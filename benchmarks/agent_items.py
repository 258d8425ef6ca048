"""One agent workload for every store the peer benchmark compares (see ``peers.py``).

A *cycle* is four conversation items, the unit the OpenAI Agents SDK's sessions store:
a user message, the assistant's answer (which asks for a tool), the tool call and the
tool's result. The same cycle is written once as those four Responses-API items (what
raw sqlite3, raw JSONL and ``SQLiteSession`` store) and once as the dsh v4 events
dshpy's agent loop writes for it (turn and step brackets, the answer with its packed
stream, the call, the result): the *payload* is the items' compact JSON, and every
store's bytes are measured against it.

Text is not synthetic noise nor one repeated sentence, either of which would flatter or
punish compression: prose is drawn from the words of the standard library's docstrings
and comments, tool results are line-aligned slices of its source files, all from one
seeded generator, so every run writes the same bytes.
"""

from __future__ import annotations

import random
import re
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from dshpy.log import records

_SOURCES = (
    "os.py",
    "json/decoder.py",
    "argparse.py",
    "pathlib/_local.py",
    "asyncio/tasks.py",
    "typing.py",
    "dataclasses.py",
    "inspect.py",
    "subprocess.py",
    "shutil.py",
    "tarfile.py",
    "zipfile/__init__.py",
    "logging/__init__.py",
    "email/message.py",
    "http/client.py",
    "urllib/request.py",
    "difflib.py",
    "textwrap.py",
    "functools.py",
    "collections/__init__.py",
    "enum.py",
    "statistics.py",
    "csv.py",
)
_TOOLS = ("read_file", "grep", "list_dir", "bash")


@dataclass(frozen=True, slots=True)
class Cycle:
    """One cycle: the four items as a peer stores them, and what dshpy's events are made of."""

    items: tuple[dict[str, Any], ...]
    prompt: str
    answer: str
    call_id: str
    tool: str
    arguments: str
    result: str


def _corpus() -> tuple[list[str], list[str]]:
    """Words for prose and source lines for tool results, from the running Python's own library."""
    root = Path(sysconfig.get_paths()["stdlib"])
    lines: list[str] = []
    words: list[str] = []
    for name in _SOURCES:
        path = root / name
        if not path.exists():
            continue
        text = path.read_text(encoding="utf-8")
        lines.extend(text.splitlines())
        for comment in re.findall(r'#\s*(.+)|"""(.*?)"""', text, flags=re.S):
            words.extend(re.findall(r"[A-Za-z][A-Za-z'-]+", " ".join(comment)))
    if len(lines) < 1000 or len(words) < 1000:
        raise RuntimeError(f"too little standard library source under {root} for the workload")
    return words, lines


def _prose(rng: random.Random, words: list[str], low: int, high: int) -> str:
    count = rng.randint(low, high)
    start = rng.randrange(len(words) - count)
    picked = words[start : start + count]  # a run of real text, then a few substitutions
    for _ in range(count // 8):
        picked[rng.randrange(count)] = rng.choice(words)
    return " ".join(picked).capitalize() + "."


def cycles(count: int, seed: int = 20) -> list[Cycle]:
    """``count`` cycles (``4 * count`` items), the same for the same arguments."""
    rng = random.Random(seed)
    words, lines = _corpus()
    made: list[Cycle] = []
    for index in range(count):
        prompt = _prose(rng, words, 20, 80)
        answer = _prose(rng, words, 40, 160)
        tool = rng.choice(_TOOLS)
        path = f"src/module_{rng.randrange(400)}.py"
        arguments = orjson.dumps({"path": path, "limit": rng.choice((50, 100, 200))}).decode()
        start = rng.randrange(len(lines) - 200)
        result = "\n".join(lines[start : start + rng.randint(50, 190)])
        call_id = f"call_{index:06d}_{rng.getrandbits(32):08x}"
        items = (
            {"role": "user", "content": prompt},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": answer}]},
            {"type": "function_call", "call_id": call_id, "name": tool, "arguments": arguments},
            {"type": "function_call_output", "call_id": call_id, "output": result},
        )
        made.append(Cycle(items, prompt, answer, call_id, tool, arguments, result))
    return made


def payload_bytes(made: list[Cycle]) -> int:
    """The items' compact JSON, the yardstick every store's size is compared with."""
    return sum(len(orjson.dumps(item)) for cycle in made for item in cycle.items)


def answer_stream(text: str, time0: int) -> list[dict[str, Any]]:
    """The packed stream an answer arrives in: ~12-character deltas, as a model streams them."""
    deltas = [text[i : i + 12] for i in range(0, len(text), 12)] or [""]
    end = time0 + len(deltas)
    return [
        {"type": "chunk", "time": time0, "chunk": {"type": "block-start", "index": 0, "blockType": "text"}},
        {"type": "text-chunks", "time0": time0, "index": 0, "dt": [1] * (len(deltas) - 1), "texts": deltas},
        {
            "type": "chunk",
            "time": end,
            "chunk": {"type": "block-end", "index": 0, "block": {"type": "text", "text": text}},
        },
        {"type": "chunk", "time": end, "chunk": {"type": "usage", "usage": {"inputTokens": 900, "outputTokens": 80}}},
        {"type": "chunk", "time": end, "chunk": {"type": "finish", "reason": {"kind": "tool-calls"}}},
    ]


def dshpy_events(cycle: Cycle, turn: int) -> list[tuple[str, dict[str, Any], str | None, bool]]:
    """The cycle as dshpy's agent loop logs it: ``(type, data, surface_op, cites the previous event)``.

    The four items are the user message, the answer, the call and the result; the rest
    are the brackets every turn has (they carry no payload of their own).
    """
    content = [
        {"type": "text", "text": cycle.answer},
        {"type": "tool-call", "id": cycle.call_id, "name": cycle.tool, "arguments": cycle.arguments},
    ]
    answer = records.assistant_data(
        turn,
        1,
        content,
        provider="deepseek",
        model="deepseek-chat",
        stream=answer_stream(cycle.answer, 0),
        usage={"inputTokens": 900, "outputTokens": 80, "cacheReadTokens": 0},
    )
    result = records.tool_result_data(turn, 1, cycle.call_id, [{"type": "text", "text": cycle.result}], is_error=False)
    return [
        ("turn/start", {"turn": turn}, None, False),
        ("step/start", {"turn": turn, "step": 1}, None, False),
        ("user/message", records.user_message(cycle.prompt), "append", False),
        ("assistant/message", answer, "append", False),
        ("tool/call", records.tool_call_data(turn, 1, cycle.call_id, cycle.tool, cycle.arguments), None, False),
        ("tool/result", result, "append", True),
        ("step/end", {"turn": turn, "step": 1}, None, False),
        ("turn/end", {"turn": turn, "reason": {"kind": "completed"}}, None, False),
    ]


ITEM_EVENTS = ((0, 1, 2), (3,), (4,), (5, 6, 7))
"""Which of a cycle's events are appended with each of its four items (the brackets go with their neighbour)."""
