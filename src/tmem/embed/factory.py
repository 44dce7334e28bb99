"""Choosing the embedder from settings."""

from __future__ import annotations

from tmem.embed.base import Embedder
from tmem.embed.cached import CachedEmbedder
from tmem.embed.hashing import HashEmbedder
from tmem.embed.remote import OpenAIEmbedder
from tmem.embed.sentence import SentenceTransformerEmbedder
from tmem.errors import ConfigError
from tmem.scope import Scope
from tmem.settings import Settings
from tmem.store.base import Store


def make_embedder(settings: Settings, *, store: Store | None = None, space: Scope | None = None) -> Embedder:
    """The embedder ``settings`` describe; wrapped in a :class:`CachedEmbedder` when a store and space are given.

    * ``sentence-transformers``: ``settings.embed_model`` (default all-MiniLM-L6-v2, shipped, offline);
    * ``openai``: ``settings.embed_model`` at ``settings.embed_base_url`` (falling back to the LLM's base URL)
      with the LLM's API key;
    * ``hash``: the deterministic test embedder (never for judging retrieval quality).
    """
    if (store is None) != (space is None):
        raise ConfigError("make_embedder: pass both store and space to cache embeddings, or neither.")
    inner: Embedder
    if settings.embed_backend == "sentence-transformers":
        inner = SentenceTransformerEmbedder(
            settings.embed_model,
            batch_size=settings.embed_batch_size,
            query_threads=settings.embed_threads,
            numpy_queries=settings.embed_numpy_queries,
        )
    elif settings.embed_backend == "openai":
        base_url = settings.embed_base_url or settings.llm_base_url
        if base_url is None and settings.llm_api_key is None:
            raise ConfigError(
                "The openai embedding backend needs an endpoint: set TMEM_EMBED_BASE_URL (or OPENAI_BASE_URL), "
                "or OPENAI_API_KEY for api.openai.com, and TMEM_EMBED_MODEL to a model it serves."
            )
        inner = OpenAIEmbedder(
            settings.embed_model, base_url=base_url, api_key=settings.llm_api_key, batch_size=settings.embed_batch_size
        )
    else:
        inner = HashEmbedder()
    if store is not None and space is not None:
        return CachedEmbedder(inner, store, space)
    return inner
