"""The ways a search can rank, named apart from their code so the service checks ``mode`` without loading numpy."""

from __future__ import annotations

from typing import Final

__all__ = ["SEARCH_MODES"]

SEARCH_MODES: Final = ("fts", "semantic", "hybrid")
"""``fts``: bm25 over words; ``semantic``: cosine of embeddings; ``hybrid``: both, fused by reciprocal rank."""
