"""Embeddings: texts -> L2-normalised float32 matrices with the model's id (see docs/embeddings.md)."""

from __future__ import annotations

from tmem.embed.base import Embedder, EmbeddingResult, Matrix
from tmem.embed.cached import CachedEmbedder
from tmem.embed.factory import make_embedder
from tmem.embed.hashing import HashEmbedder
from tmem.embed.remote import OpenAIEmbedder
from tmem.embed.sentence import DEFAULT_MODEL, SentenceTransformerEmbedder, clear_loader_cache

__all__ = [
    "DEFAULT_MODEL",
    "CachedEmbedder",
    "Embedder",
    "EmbeddingResult",
    "HashEmbedder",
    "Matrix",
    "OpenAIEmbedder",
    "SentenceTransformerEmbedder",
    "clear_loader_cache",
    "make_embedder",
]
