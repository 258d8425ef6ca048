"""What semantic search needs from a model: the :class:`Embedder` protocol, and the error for its absence.

Semantic search is optional (``pip install 'dshpy[semantic]'``): nothing here imports
numpy or a model, so core dshpy never pays for it. An embedder turns texts into
vectors of one fixed width; ``name`` identifies the model, because vectors of two
models must never be compared (the vector store keys every vector by it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Protocol, runtime_checkable

from dshpy.query.errors import QueryError

__all__ = ["INSTALL_HINT", "SEMANTIC_UNAVAILABLE", "Embedder", "SemanticUnavailableError"]

SEMANTIC_UNAVAILABLE: Final = "SESSION_QUERY_SEMANTIC_UNAVAILABLE"
INSTALL_HINT: Final = "pip install 'dshpy[semantic]'"


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors; similar meanings should give vectors with a high cosine."""

    @property
    def name(self) -> str:
        """The model's identity (vectors are stored under it, never mixed across models)."""
        ...

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order, all of the same width."""
        ...


class SemanticUnavailableError(QueryError):
    """Semantic or hybrid search was asked for, but its extra is not installed (or its model failed to load)."""

    def __init__(self, message: str) -> None:
        super().__init__(SEMANTIC_UNAVAILABLE, message)


def require_numpy() -> None:
    """Fail with the install command, not an ImportError deep in a search, when the extra is missing."""
    try:
        import numpy  # noqa: F401
    except ImportError:
        raise SemanticUnavailableError(
            f"semantic search needs numpy and a local model, which are not installed: {INSTALL_HINT}"
        ) from None
