"""Provider token counts → dsh's ``TokenUsage`` buckets.

dsh's buckets are disjoint so that sums mean something: ``inputTokens`` is the
*uncached* input only, ``cacheReadTokens`` the input served from the provider's
prompt cache (billed input = input + cacheRead + cacheWrite), ``outputTokens`` every
generated token, ``reasoningTokens`` the part of the output spent thinking (never
added again), ``totalTokens`` what the provider says the request cost in all.

OpenAI-compatible servers report ``prompt_tokens`` *including* cached tokens. DeepSeek
adds ``prompt_cache_hit_tokens`` / ``prompt_cache_miss_tokens``; OpenAI (and vLLM)
report ``prompt_tokens_details.cached_tokens``. DeepSeek's own fields win when both
are present, since they are the ones it bills by.
"""

from __future__ import annotations

from typing import Any

__all__ = ["token_usage"]


def _count(value: Any) -> int | None:
    return value if type(value) is int and value >= 0 else None


def token_usage(raw: Any) -> dict[str, Any] | None:
    """A ``TokenUsage`` dict from a chat-completions ``usage`` object, or ``None`` if it has no counts."""
    if not isinstance(raw, dict):
        return None
    prompt = _count(raw.get("prompt_tokens"))
    output = _count(raw.get("completion_tokens"))
    if prompt is None and output is None:
        return None
    prompt = prompt or 0
    hit = _count(raw.get("prompt_cache_hit_tokens"))
    miss = _count(raw.get("prompt_cache_miss_tokens"))
    if hit is None:
        details = raw.get("prompt_tokens_details")
        hit = _count(details.get("cached_tokens")) if isinstance(details, dict) else None
    hit = min(hit or 0, prompt) if miss is None else hit or 0
    uncached = miss if miss is not None else prompt - hit
    usage: dict[str, Any] = {"inputTokens": uncached, "outputTokens": output or 0, "cacheReadTokens": hit}
    details = raw.get("completion_tokens_details")
    reasoning = _count(details.get("reasoning_tokens")) if isinstance(details, dict) else None
    if reasoning is not None:
        usage["reasoningTokens"] = reasoning
    total = _count(raw.get("total_tokens"))
    usage["totalTokens"] = total if total is not None else uncached + hit + (output or 0)
    return usage
