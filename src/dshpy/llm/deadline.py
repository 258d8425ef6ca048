"""The whole-request time limit of a model call, shared by both clients.

``ModelTimeouts.total`` bounds a request from sending to its last chunk. The
deadline is fixed when the request starts, but it is armed only around each wait
for the server (the answer's headers, then each chunk), never across a ``yield``: a
timeout must not fire inside the consumer's code, where it would cancel whatever the
consumer was awaiting. When a wait fails, :meth:`RequestDeadline.failure` says
whether the deadline expired (``TIMEOUT`` naming the total limit) or classifies the
error like any other (:func:`~dshpy.llm.failures.classify_exception`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import Final, TypeVar

from dshpy.llm.config import ModelConfig
from dshpy.llm.failures import LlmError, classify_exception, timeout_failure

__all__ = ["END", "RequestDeadline"]

T = TypeVar("T")


class _End:
    """The iterator is exhausted (a sentinel: ``None`` may be a legitimate item)."""


END: Final = _End()


class RequestDeadline:
    """One request's total deadline (see the module docstring); make it inside the running event loop."""

    __slots__ = ("_at", "_base_url", "_limits", "_timer", "_total")

    def __init__(self, config: ModelConfig, limits: Mapping[str, float]) -> None:
        total = config.timeouts.total
        self._total = total
        self._at = None if total is None else asyncio.get_running_loop().time() + total
        self._base_url = config.base_url
        self._limits = limits
        self._timer: asyncio.Timeout | None = None

    def arm(self) -> asyncio.Timeout:
        """A context manager bounding one wait for the server by the deadline."""
        self._timer = asyncio.timeout_at(self._at)
        return self._timer

    async def next(self, iterator: AsyncIterator[T]) -> T | _End:
        """The iterator's next item within the deadline, or :data:`END`."""
        async with self.arm():
            try:
                return await anext(iterator)
            except StopAsyncIteration:
                return END

    def failure(self, error: BaseException, *, streaming: bool) -> LlmError:
        """The ``LlmFailure`` for an error raised while waiting (``streaming``: the answer had begun)."""
        if self._timer is not None and self._timer.expired():
            return timeout_failure("total", self._base_url, self._total)
        return classify_exception(error, streaming=streaming, base_url=self._base_url, limits=self._limits)
