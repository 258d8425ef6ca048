"""The remote embedder: any OpenAI-compatible ``POST /embeddings`` endpoint (OpenAI, vLLM, Ollama, LM Studio…).

Plain HTTP through httpx rather than the ``openai`` client, so a local server that
speaks only the wire format works, and a test can script the server on loopback.
Texts go in batches, and the answer's ``index`` fields put the vectors back in order
whatever order the server lists them in.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx2 as httpx

from dshpy.query.embedding import SemanticUnavailableError

__all__ = ["OpenAIEmbedder"]


class OpenAIEmbedder:
    """Embeds by calling ``{base_url}/embeddings`` with ``model``; ``api_key`` goes in a bearer header."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str = "https://api.openai.com/v1",
        api_key: str | None = None,
        batch_size: int = 64,
        timeout: float = 60.0,
        client: httpx.Client | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self.model = model
        self.batch_size = batch_size
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._url = base_url.rstrip("/") + "/embeddings"
        self._client = client or httpx.Client(headers=headers, timeout=timeout)

    @property
    def name(self) -> str:
        return f"openai:{self._url}#{self.model}"

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            vectors.extend(self._batch(list(texts[start : start + self.batch_size])))
        return vectors

    def _batch(self, texts: list[str]) -> list[list[float]]:
        try:
            response = self._client.post(self._url, json={"model": self.model, "input": texts})
        except httpx.HTTPError as error:
            raise SemanticUnavailableError(f"the embeddings endpoint {self._url} failed: {error}") from error
        if response.status_code != 200:
            raise SemanticUnavailableError(
                f"the embeddings endpoint {self._url} answered {response.status_code}: {response.text[:200]}"
            )
        return _vectors(response.json(), len(texts), self._url)

    def close(self) -> None:
        self._client.close()


def _vectors(body: Any, count: int, url: str) -> list[list[float]]:
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list) or len(data) != count:
        raise SemanticUnavailableError(f"the embeddings endpoint {url} answered {count} texts with no matching data")
    ordered: list[list[float] | None] = [None] * count
    for position, item in enumerate(data):
        index = item.get("index", position) if isinstance(item, dict) else None
        vector = item.get("embedding") if isinstance(item, dict) else None
        if not isinstance(index, int) or not 0 <= index < count or not isinstance(vector, list):
            raise SemanticUnavailableError(f"the embeddings endpoint {url} answered a malformed item")
        ordered[index] = [float(x) for x in vector]
    if any(vector is None for vector in ordered):
        raise SemanticUnavailableError(f"the embeddings endpoint {url} left some texts without a vector")
    return [vector for vector in ordered if vector is not None]
