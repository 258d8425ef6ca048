"""The Anthropic Messages dialect of :class:`~dshpy.testing.fake_model.FakeModelServer`.

A scripted :class:`~dshpy.testing.fake_model.Reply` is written once, as the
chat-completions chunks it streams; a request to ``POST /v1/messages`` gets the same
answer as Messages API server-sent events, translated here chunk by chunk (so a reply
cut or stalled after ``n`` chunks breaks off at the same point in both dialects):

* the first chunk → ``message_start`` (the input side of the usage: uncached input,
  ``cache_read_input_tokens``, ``cache_creation_input_tokens: 0``);
* ``reasoning_content`` / ``content`` / ``tool_calls`` deltas → ``content_block_start``
  (``thinking`` / ``text`` / ``tool_use``), ``thinking_delta`` / ``text_delta`` /
  ``input_json_delta`` and ``content_block_stop``; a thinking block ends with a
  ``signature_delta`` carrying the reply's ``signature``;
* the finish chunk → ``message_delta`` (``stop_reason``: ``end_turn``, ``tool_use``,
  ``max_tokens``; the output tokens) and ``message_stop``.

Error replies are sent with Anthropic's error body ``{"type": "error", "error": {"type",
"message"}}``; :meth:`Reply.overloaded` is its 529.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["MessagesRenderer", "anthropic_error_body"]

_STOP_REASONS = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens", "content_filter": "refusal"}
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def anthropic_error_body(status: int, body: Any) -> dict[str, Any]:
    """``body`` (an OpenAI-style error, or any JSON) as Anthropic's error envelope for ``status``."""
    error = body.get("error") if isinstance(body, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    kind = _ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
    if isinstance(error, dict) and error.get("type") == "overloaded_error":
        kind = "overloaded_error"
    return {"type": "error", "error": {"type": kind, "message": message if isinstance(message, str) else str(body)}}


def _sse(payload: dict[str, Any]) -> bytes:
    return f"event: {payload['type']}\ndata: {json.dumps(payload)}\n\n".encode()


@dataclass
class MessagesRenderer:
    """Translates one reply's chunks, in order, into groups of Messages events (one group per chunk)."""

    model: str
    signature: str | None = None
    prompt_tokens: int | None = None
    """The counted prompt (a server with a context window): replaces the scripted input tokens."""
    _open: tuple[str, int] | None = None
    _next: int = 0
    _tools: dict[int, int] = field(default_factory=dict)
    _started: bool = False

    def usage_in(self, chunks: Sequence[dict[str, Any]]) -> dict[str, int]:
        usage: dict[str, Any] = next((c["usage"] for c in chunks if isinstance(c.get("usage"), dict)), {})
        prompt = int(usage.get("prompt_tokens") or 0) if self.prompt_tokens is None else self.prompt_tokens
        hit = min(int(usage.get("prompt_cache_hit_tokens") or 0), prompt)
        return {
            "input_tokens": prompt - hit,
            "output_tokens": 0,
            "cache_read_input_tokens": hit,
            "cache_creation_input_tokens": 0,
        }

    def group(self, chunk: dict[str, Any], all_chunks: Sequence[dict[str, Any]], number: int) -> list[bytes]:
        out: list[bytes] = []
        if not self._started:
            self._started = True
            message: dict[str, Any] = {
                "id": f"msg_fake_{number}",
                "type": "message",
                "role": "assistant",
                "model": self.model,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": self.usage_in(all_chunks),
            }
            out.append(_sse({"type": "message_start", "message": message}))
        if "choices" in chunk:  # a usage-only chunk: Messages reports usage in message_start/message_delta
            return out
        delta = chunk.get("delta") or {}
        reasoning = delta.get("reasoning_content")
        if isinstance(reasoning, str) and reasoning:
            index = self._ensure(out, "thinking", {"type": "thinking", "thinking": "", "signature": ""})
            out.append(self._delta(index, {"type": "thinking_delta", "thinking": reasoning}))
        content = delta.get("content")
        if isinstance(content, str) and content:
            index = self._ensure(out, "text", {"type": "text", "text": ""})
            out.append(self._delta(index, {"type": "text_delta", "text": content}))
        for call in delta.get("tool_calls") or ():
            position = call.get("index", 0)
            function = call.get("function") or {}
            if position not in self._tools:
                self._close(out)
                index = self._next
                self._next += 1
                self._tools[position] = index
                block = {"type": "tool_use", "id": call.get("id"), "name": function.get("name"), "input": {}}
                out.append(_sse({"type": "content_block_start", "index": index, "content_block": block}))
                self._open = ("tool", index)
            index = self._tools[position]
            if function.get("arguments"):
                out.append(self._delta(index, {"type": "input_json_delta", "partial_json": function["arguments"]}))
        finish = chunk.get("finish_reason")
        if finish is not None:
            self._close(out)
            output = int((chunk.get("usage") or {}).get("completion_tokens") or 0)
            if not output:
                output = next(
                    (
                        int(c["usage"].get("completion_tokens") or 0)
                        for c in all_chunks
                        if isinstance(c.get("usage"), dict)
                    ),
                    0,
                )
            stop = {"stop_reason": _STOP_REASONS.get(finish, finish), "stop_sequence": None}
            out.append(_sse({"type": "message_delta", "delta": stop, "usage": {"output_tokens": output}}))
            out.append(_sse({"type": "message_stop"}))
        return out

    def _ensure(self, out: list[bytes], kind: str, block: dict[str, Any]) -> int:
        if self._open is not None and self._open[0] == kind:
            return self._open[1]
        self._close(out)
        index = self._next
        self._next += 1
        out.append(_sse({"type": "content_block_start", "index": index, "content_block": block}))
        self._open = (kind, index)
        return index

    @staticmethod
    def _delta(index: int, delta: dict[str, Any]) -> bytes:
        return _sse({"type": "content_block_delta", "index": index, "delta": delta})

    def _close(self, out: list[bytes]) -> None:
        if self._open is None:
            return
        kind, index = self._open
        self._open = None
        if kind == "thinking" and self.signature is not None:
            out.append(self._delta(index, {"type": "signature_delta", "signature": self.signature}))
        out.append(_sse({"type": "content_block_stop", "index": index}))
