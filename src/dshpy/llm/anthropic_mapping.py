"""Anthropic Messages stream events → dsh ``StreamChunk`` s (what dsh's DeepSeek adapter does).

The Messages API streams explicit blocks, so the mapping is nearly one to one:

* ``message_start`` — the input side of the usage (``input_tokens``,
  ``cache_read_input_tokens``, ``cache_creation_input_tokens``);
* ``content_block_start`` — ``block-start`` (``text`` → ``text``, ``thinking`` →
  ``reasoning``, ``tool_use`` → ``tool-call``; a tool call also gets a first
  ``tool-call-delta`` with its id, its name and empty arguments, as dsh emits it);
* ``content_block_delta`` — ``text_delta`` / ``thinking_delta`` / ``input_json_delta``
  become text, reasoning and argument deltas; a ``signature_delta`` produces no chunk
  but is kept for the replay state;
* ``content_block_stop`` — ``block-end`` with the whole block;
* ``message_delta`` — the stop reason and the output side of the usage;
* ``message_stop`` — one ``usage`` chunk (with ``totalTokens``) and the ``finish``
  chunk, which carries the **replay state**: ``{response: {kind: "deepseek-messages",
  version: 1, model}, blocks: [...]}`` with one entry per block and the thinking
  signatures. The same object is stored in the assistant message's
  ``source.replayState``, and the next request sends the signatures back.

Blocks are numbered in order of arrival, whatever index the server gave them. A
stream that ends without ``message_stop`` was cut off (``STREAM_INTERRUPTED``); an
in-band ``error`` event is classified like an HTTP error of the same type.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from dshpy.llm import chunks as c
from dshpy.llm.chunks import StreamChunk
from dshpy.llm.failures import LlmError, classify_anthropic_error
from dshpy.llm.surrogates import SurrogateJoiner

__all__ = ["REPLAY_KIND", "MessagesMapper", "replay_state"]

REPLAY_KIND = "deepseek-messages"
"""``replayState.response.kind`` of a Messages answer, as dsh writes it."""

_STOP_REASONS: dict[str, c.FinishKind] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "tool_use": "tool-calls",
    "max_tokens": "max-tokens",
}
_USAGE_FIELDS = {
    "input_tokens": "inputTokens",
    "output_tokens": "outputTokens",
    "cache_read_input_tokens": "cacheReadTokens",
    "cache_creation_input_tokens": "cacheWriteTokens",
}


def replay_state(model: str, blocks: list[dict[str, Any]]) -> dict[str, Any]:
    """dsh's replay envelope: what a later request needs to send this answer back natively."""
    return {"response": {"kind": REPLAY_KIND, "version": 1, "model": model}, "blocks": blocks}


def _malformed(detail: str) -> LlmError:
    return LlmError({"message": f"malformed Messages stream: {detail}", "code": "STREAM_INTERRUPTED"})


@dataclass(slots=True)
class _Block:
    index: int
    type: c.BlockType
    replay: dict[str, Any]
    pieces: list[str] = field(default_factory=list)
    joiner: SurrogateJoiner = field(default_factory=SurrogateJoiner)
    id: str = ""
    name: str = ""
    initial_input: str = "{}"
    closed: bool = False


class MessagesMapper:
    """Stateful converter for one model attempt (feed it decoded SSE ``data`` objects in order)."""

    __slots__ = ("_blocks", "_finished", "_model", "_started", "_stop", "_usage")

    def __init__(self, model: str) -> None:
        self._model = model
        self._blocks: dict[int, _Block] = {}
        self._usage: dict[str, int] = {"inputTokens": 0, "outputTokens": 0}
        self._started = False
        self._stop: c.FinishKind | None = None
        self._finished = False

    @property
    def finished(self) -> bool:
        return self._finished

    def feed(self, event: dict[str, Any]) -> list[StreamChunk]:
        """The dsh chunks one decoded event produces."""
        kind = event.get("type")
        if kind == "error":
            raise classify_anthropic_error(event, None, None)
        if kind == "message_start":
            if self._started:
                raise _malformed("duplicate message_start")
            self._started = True
            message = event.get("message")
            self._update_usage(message.get("usage") if isinstance(message, dict) else None)
            return []
        if kind not in ("content_block_start", "content_block_delta", "content_block_stop", "message_delta"):
            if kind == "message_stop":
                return self._end()
            return []  # ping and event types a later API version may add
        if not self._started:
            raise _malformed(f"{kind} before message_start")
        if kind == "message_delta":
            delta = event.get("delta")
            reason = delta.get("stop_reason") if isinstance(delta, dict) else None
            if reason is not None:
                self._stop = self._stop_kind(reason)
            self._update_usage(event.get("usage"))
            return []
        wire_index = event.get("index")
        if type(wire_index) is not int or wire_index < 0:
            raise _malformed("invalid block index")
        if kind == "content_block_start":
            return self._start(wire_index, event.get("content_block"))
        block = self._blocks.get(wire_index)
        if block is None or block.closed:
            raise _malformed(f"{kind} without an open block {wire_index}")
        if kind == "content_block_delta":
            return self._delta(block, event.get("delta"))
        return self._close(block)

    def end(self) -> list[StreamChunk]:
        """Call when the body ended; raises ``STREAM_INTERRUPTED`` if ``message_stop`` never came."""
        if not self._finished:
            raise LlmError({"message": "the stream ended before the model finished", "code": "STREAM_INTERRUPTED"})
        return []

    # -- pieces ---------------------------------------------------------------------

    def _update_usage(self, raw: Any) -> None:
        if not isinstance(raw, dict):
            return
        for wire, local in _USAGE_FIELDS.items():
            value = raw.get(wire)
            if type(value) is int and value >= 0:
                self._usage[local] = value

    @staticmethod
    def _stop_kind(reason: Any) -> c.FinishKind:
        if reason == "refusal":
            raise LlmError(
                {"message": "the provider refused to answer (stop reason: refusal)", "code": "CONTENT_FILTERED"}
            )
        kind = _STOP_REASONS.get(str(reason))
        if kind is None:
            raise _malformed(f"unsupported stop reason {reason!r}")
        return kind

    def _start(self, wire_index: int, raw: Any) -> list[StreamChunk]:
        if wire_index in self._blocks or self._stop is not None:
            raise _malformed("a block starts after the stop reason or repeats an index")
        if not isinstance(raw, dict):
            raise _malformed("content_block_start without a content_block")
        index = len(self._blocks)
        native = raw.get("type")
        out: list[StreamChunk] = []
        if native == "text":
            block = _Block(index, "text", {"type": "text"})
            initial = raw.get("text")
        elif native == "thinking":
            block = _Block(index, "reasoning", {"type": "reasoning"})
            initial = raw.get("thinking")
            signature = raw.get("signature")
            if isinstance(signature, str) and signature:
                block.replay["signature"] = signature
        elif native == "tool_use":
            call_id, name = raw.get("id"), raw.get("name")
            if not isinstance(call_id, str) or not call_id or not isinstance(name, str) or not name:
                raise _malformed("a tool_use block without id or name")
            block = _Block(index, "tool-call", {"type": "tool-call"}, id=call_id, name=name)
            start_input = raw.get("input")
            block.initial_input = orjson.dumps(start_input if isinstance(start_input, dict) else {}).decode()
            initial = None
        else:
            raise LlmError(
                {"message": f"the model answered with an unsupported block type {native!r}", "code": "UNKNOWN"}
            )
        self._blocks[wire_index] = block
        out.append(c.block_start(index, block.type))
        if block.type == "tool-call":
            out.append(c.tool_call_delta(index, block.id, "", block.name))
        elif isinstance(initial, str) and initial:
            self._text(out, block, initial)
        return out

    def _text(self, out: list[StreamChunk], block: _Block, text: str) -> None:
        ready = block.joiner.feed(text)
        if not ready:
            return
        block.pieces.append(ready)
        if block.type == "text":
            out.append(c.text_delta(block.index, ready))
        elif block.type == "reasoning":
            out.append(c.reasoning_delta(block.index, ready))
        else:
            out.append(c.tool_call_delta(block.index, block.id, ready))

    def _delta(self, block: _Block, raw: Any) -> list[StreamChunk]:
        if not isinstance(raw, dict):
            raise _malformed("content_block_delta without a delta")
        kind = raw.get("type")
        out: list[StreamChunk] = []
        if kind == "text_delta" and block.type == "text":
            self._text(out, block, str(raw.get("text") or ""))
        elif kind == "thinking_delta" and block.type == "reasoning":
            self._text(out, block, str(raw.get("thinking") or ""))
        elif kind == "signature_delta" and block.type == "reasoning":
            block.replay["signature"] = block.replay.get("signature", "") + str(raw.get("signature") or "")
        elif kind == "input_json_delta" and block.type == "tool-call":
            self._text(out, block, str(raw.get("partial_json") or ""))
        else:
            raise _malformed(f"unsupported delta {kind!r} for a {block.type} block")
        return out

    def _close(self, block: _Block) -> list[StreamChunk]:
        block.closed = True
        out: list[StreamChunk] = []
        rest = block.joiner.flush()
        if rest:
            block.pieces.append(rest)
            if block.type == "tool-call":
                out.append(c.tool_call_delta(block.index, block.id, rest))
            else:
                out.append(
                    c.reasoning_delta(block.index, rest)
                    if block.type == "reasoning"
                    else c.text_delta(block.index, rest)
                )
        text = "".join(block.pieces)
        if block.type == "tool-call":
            arguments = text or block.initial_input
            out.append(
                c.block_end(
                    block.index, {"type": "tool-call", "id": block.id, "name": block.name, "arguments": arguments}
                )
            )
        else:
            out.append(c.block_end(block.index, {"type": block.type, "text": text}))
        return out

    def _end(self) -> list[StreamChunk]:
        if self._stop is None or any(not block.closed for block in self._blocks.values()):
            raise _malformed("message_stop before every block was closed and a stop reason was given")
        usage = dict(self._usage)
        usage["totalTokens"] = (
            usage["inputTokens"]
            + usage["outputTokens"]
            + usage.get("cacheReadTokens", 0)
            + usage.get("cacheWriteTokens", 0)
        )
        self._finished = True
        blocks = [block.replay for block in sorted(self._blocks.values(), key=lambda b: b.index)]
        finish = c.finish(self._stop)
        finish["replayState"] = replay_state(self._model, blocks)
        return [c.usage_chunk(usage), finish]
