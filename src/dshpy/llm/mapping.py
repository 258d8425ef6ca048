"""OpenAI chat-completions stream chunks → dsh ``StreamChunk`` s.

The chat-completions protocol has no explicit blocks: a ``delta`` carries
``reasoning_content`` (DeepSeek), ``content`` or ``tool_calls`` fragments, and the
last chunk a ``finish_reason``; usage comes with the finish chunk (DeepSeek) or in a
chunk of its own with no choices (OpenAI, ``stream_options.include_usage``).
:class:`ChunkMapper` turns that into dsh's block vocabulary: a block opens when a new
kind of content (or a new tool call) starts, and the open block ends when the next
one starts or the model finishes. Blocks are numbered in order of appearance.

``finish`` is emitted only by :meth:`ChunkMapper.end`, after the usage chunk, which is
where dsh puts it; a stream that ends without a ``finish_reason`` was cut off.

Block texts are collected as lists of pieces and joined once, when the block ends: an
answer of megabytes arrives in thousands of deltas, and growing one string per delta
would copy the whole text each time (quadratic). A surrogate pair the server split
between two chunks is rejoined before it reaches any delta (:mod:`~dshpy.llm.surrogates`).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from dshpy.llm import chunks as c
from dshpy.llm.chunks import StreamChunk
from dshpy.llm.failures import LlmError
from dshpy.llm.surrogates import SurrogateJoiner
from dshpy.llm.usage import token_usage

__all__ = ["ChunkMapper"]

_FINISH_KINDS: dict[str, c.FinishKind] = {
    "stop": "stop",
    "tool_calls": "tool-calls",
    "function_call": "tool-calls",
    "length": "max-tokens",
}


@dataclass(slots=True)
class _TextBlock:
    type: c.BlockType
    pieces: list[str] = field(default_factory=list)
    joiner: SurrogateJoiner = field(default_factory=SurrogateJoiner)


@dataclass(slots=True)
class _ToolBlock:
    index: int
    id: str
    name: str = ""
    pieces: list[str] = field(default_factory=list)
    """The argument fragments (joined once, when the block ends)."""
    joiner: SurrogateJoiner = field(default_factory=SurrogateJoiner)
    closed: bool = False
    dirty: bool = False
    """A fragment arrived after the block ended (interleaved calls): end it again at finish."""


class ChunkMapper:
    """Stateful converter for one model attempt."""

    __slots__ = ("_finish", "_next", "_open", "_texts", "_tools")

    def __init__(self) -> None:
        self._next = 0
        self._open: tuple[str, int] | None = None
        """(kind, block index) of the open text/reasoning block, or ("tool", openai index)."""
        self._texts: dict[int, _TextBlock] = {}
        """Text and reasoning blocks by index."""
        self._tools: dict[int, _ToolBlock] = {}
        """Tool-call blocks by the provider's tool index."""
        self._finish: str | None = None

    @property
    def finish_reason(self) -> str | None:
        return self._finish

    @property
    def has_tool_calls(self) -> bool:
        return bool(self._tools)

    def feed(self, chunk: dict[str, Any]) -> list[StreamChunk]:
        """The dsh chunks one provider chunk (as a plain dict) produces."""
        out: list[StreamChunk] = []
        choices = chunk.get("choices") or []
        choice = choices[0] if choices and isinstance(choices[0], dict) else None
        if choice is not None:
            delta = choice.get("delta") or {}
            reasoning = delta.get("reasoning_content")
            if isinstance(reasoning, str) and reasoning:
                self._text(out, "reasoning", reasoning)
            content = delta.get("content")
            if isinstance(content, str) and content:
                self._text(out, "text", content)
            for call in delta.get("tool_calls") or ():
                if isinstance(call, dict):
                    self._tool(out, call)
            finish = choice.get("finish_reason")
            if isinstance(finish, str) and finish and self._finish is None:
                self._finish = finish
                self._close(out)
        usage = token_usage(chunk.get("usage"))
        if usage is not None:
            out.append(c.usage_chunk(usage))
        return out

    def end(self) -> list[StreamChunk]:
        """The closing chunks once the stream ended normally; raises :class:`LlmError` if it was cut off."""
        out: list[StreamChunk] = []
        if self._finish is None:
            raise LlmError({"message": "the stream ended before the model finished", "code": "STREAM_INTERRUPTED"})
        self._close(out)
        for tool in self._tools.values():
            if tool.dirty:
                self._release(out, tool)
                out.append(c.block_end(tool.index, self._tool_block(tool)))
        if self._finish == "insufficient_system_resource":  # DeepSeek: the server gave up mid-answer
            raise LlmError({"message": "the server ran out of resources mid-answer", "code": "SERVER"})
        if self._finish == "content_filter":
            raise LlmError({"message": "the provider's content filter stopped the answer", "code": "CONTENT_FILTERED"})
        kind = _FINISH_KINDS.get(self._finish, "stop")
        if kind == "stop" and self._tools:
            kind = "tool-calls"  # some servers say "stop" after tool calls
        out.append(c.finish(kind))
        return out

    # -- blocks -------------------------------------------------------------------

    def _start(self, out: list[StreamChunk], block_type: c.BlockType) -> int:
        self._close(out)
        index = self._next
        self._next += 1
        out.append(c.block_start(index, block_type))
        return index

    def _close(self, out: list[StreamChunk]) -> None:
        if self._open is None:
            return
        kind, key = self._open
        self._open = None
        if kind == "tool":
            tool = self._tools[key]
            tool.closed = True
            self._release(out, tool)
            out.append(c.block_end(tool.index, self._tool_block(tool)))
        else:
            block = self._texts[key]
            rest = block.joiner.flush()
            if rest:
                self._emit_text(out, key, block, rest)
            out.append(c.block_end(key, {"type": block.type, "text": "".join(block.pieces)}))

    def _text(self, out: list[StreamChunk], block_type: c.BlockType, text: str) -> None:
        if self._open is not None and self._open[0] == block_type:
            index = self._open[1]
        else:
            index = self._start(out, block_type)
            self._open = (block_type, index)
            self._texts[index] = _TextBlock(block_type)
        block = self._texts[index]
        ready = block.joiner.feed(text)
        if ready:
            self._emit_text(out, index, block, ready)

    @staticmethod
    def _emit_text(out: list[StreamChunk], index: int, block: _TextBlock, text: str) -> None:
        block.pieces.append(text)
        out.append(c.reasoning_delta(index, text) if block.type == "reasoning" else c.text_delta(index, text))

    def _tool(self, out: list[StreamChunk], call: dict[str, Any]) -> None:
        position = call.get("index")
        if not isinstance(position, int):
            position = len(self._tools) - 1 if self._tools and not call.get("id") else len(self._tools)
        function = call.get("function") or {}
        raw_name = function.get("name")
        raw_arguments = function.get("arguments")
        name: str | None = raw_name if isinstance(raw_name, str) else None
        arguments: str = raw_arguments if isinstance(raw_arguments, str) else ""
        tool = self._tools.get(position)
        if tool is None:
            call_id = call.get("id") if isinstance(call.get("id"), str) and call.get("id") else None
            index = self._start(out, "tool-call")
            tool = _ToolBlock(index, call_id or f"call_{uuid.uuid4().hex[:24]}")
            self._tools[position] = tool
            self._open = ("tool", position)
        elif tool.closed:
            tool.dirty = True
        elif self._open != ("tool", position):
            self._close(out)
            self._open = ("tool", position)
        if name and name != tool.name:  # some servers repeat the full name in every fragment
            tool.name += name
        arguments = tool.joiner.feed(arguments)
        if arguments:
            tool.pieces.append(arguments)
        if not name and not arguments:
            return
        out.append(c.tool_call_delta(tool.index, tool.id, arguments, name if name else None))

    @staticmethod
    def _release(out: list[StreamChunk], tool: _ToolBlock) -> None:
        """Emit a high surrogate still held back for ``tool``: its arguments end here."""
        rest = tool.joiner.flush()
        if rest:
            tool.pieces.append(rest)
            out.append(c.tool_call_delta(tool.index, tool.id, rest))

    @staticmethod
    def _tool_block(tool: _ToolBlock) -> dict[str, Any]:
        arguments = "".join(tool.pieces)
        tool.pieces = [arguments]  # a dirty block ends twice: join once per end
        return {"type": "tool-call", "id": tool.id, "name": tool.name, "arguments": arguments}
