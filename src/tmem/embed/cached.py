"""An embedder that remembers: vectors are cached in the store by (model id, text hash), per space.

Only texts whose vectors are not stored are sent to the inner embedder (each distinct text once); the result keeps
the input's order and duplicates.

Wrapping is idempotent: a :class:`CachedEmbedder` given another one for the same store and space uses that one's inner
embedder, so callers may wrap whatever embedder they were handed without paying two cache lookups per batch.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tmem.embed.base import Embedder, EmbeddingResult, Matrix
from tmem.errors import EmbeddingError
from tmem.scope import Scope
from tmem.store.base import Store, Vector
from tmem.util.text import text_hash


class CachedEmbedder:
    _inner: Embedder
    _store: Store
    _space: Scope

    def __init__(self, inner: Embedder, store: Store, space: Scope) -> None:
        if isinstance(inner, CachedEmbedder) and inner._store is store and inner._space == space:
            inner = inner.inner
        self._inner = inner
        self._store = store
        self._space = space

    @property
    def inner(self) -> Embedder:
        return self._inner

    @property
    def model_id(self) -> str:
        return self._inner.model_id

    @property
    def dim(self) -> int:
        return self._inner.dim

    def embed(self, texts: Sequence[str]) -> EmbeddingResult:
        model_id = self._inner.model_id
        hashes = [text_hash(t) for t in texts]
        found: dict[str, Vector] = self._store.get_embeddings(self._space, model_id, hashes)
        missing: dict[str, str] = {}
        for h, text in zip(hashes, texts, strict=True):
            if h not in found:
                missing.setdefault(h, text)
        if missing:
            fresh = self._inner.embed(list(missing.values()))
            if fresh.model_id != model_id:
                raise EmbeddingError(
                    f"The embedder reported model {fresh.model_id!r} but is registered as {model_id!r}; "
                    "vectors of different models must not mix."
                )
            new = {h: fresh.vectors[row] for row, h in enumerate(missing)}
            self._store.put_embeddings(self._space, model_id, new)
            found.update(new)
        if not texts:
            return EmbeddingResult(vectors=np.zeros((0, self.dim), dtype=np.float32), model_id=model_id)
        widths = {found[h].shape[0] for h in hashes}
        if len(widths) != 1:
            raise EmbeddingError(
                f"Cached vectors for {model_id!r} have different sizes {sorted(widths)}; the cache is corrupt: "
                "delete the space's embeddings and rebuild."
            )
        vectors: Matrix = np.stack([found[h] for h in hashes]).astype(np.float32, copy=False)
        return EmbeddingResult(vectors=vectors, model_id=model_id)
