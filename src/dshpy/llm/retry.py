"""When to try a failed model call again, and how long to wait first.

The policy only decides; the agent loop acts and logs (``assistant/attempt`` for the
failed try, ``llm/retry`` with the chosen delay, ``llm/retry-started`` when the new
try begins), so every wait is visible in the session.

Only transient failures are retried (``RETRYABLE_CODES``: rate limits, server errors,
timeouts, broken streams, unreachable servers). A server's ``Retry-After`` wins over
the exponential backoff; one longer than :attr:`RetryPolicy.max_retry_after` is not
waited out silently — the call fails with the server's reason instead.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from dshpy.llm.failures import LlmError

__all__ = ["RetryPolicy"]


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Exponential backoff with jitter: ``base_delay · 2^(n-1)`` seconds before retry n, capped."""

    max_retries: int = 4
    base_delay: float = 0.5
    max_delay: float = 30.0
    max_retry_after: float = 120.0
    jitter: float = 0.2
    """Each backoff is scaled by a random factor in ``[1 - jitter, 1 + jitter]``."""
    policy_key: str = "transient"
    """Names the retry chain in ``llm/retry`` (one ``retryId`` per chain and step)."""

    def should_retry(self, error: LlmError, retry: int) -> bool:
        """Whether retry number ``retry`` (1-based) may follow ``error``."""
        if not error.retryable or retry > self.max_retries:
            return False
        after = error.retry_after_ms
        return after is None or after <= self.max_retry_after * 1000

    def delay_ms(self, error: LlmError, retry: int, rng: random.Random | None = None) -> int:
        """Milliseconds to wait before retry number ``retry``."""
        after = error.retry_after_ms
        if after is not None:
            return int(after)
        backoff = min(self.max_delay, self.base_delay * 2.0 ** (retry - 1))
        factor = 1.0 + (rng or random).uniform(-self.jitter, self.jitter)
        return max(0, round(backoff * factor * 1000))
