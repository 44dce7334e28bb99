"""A deterministic embedder for tests and examples: feature hashing of word unigrams and bigrams.

It needs no model, gives the same vector for the same text on every machine, and texts sharing words get a positive
cosine, which is enough to exercise dense code paths. Never use it to judge retrieval quality.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections.abc import Sequence

import numpy as np

from tmem.embed.base import EmbeddingResult

_WORD = re.compile(r"[a-z0-9]+")


class HashEmbedder:
    def __init__(self, dim: int = 256) -> None:
        if dim < 8:
            raise ValueError("HashEmbedder needs dim >= 8")
        self._dim = dim

    @property
    def model_id(self) -> str:
        return f"hash-{self._dim}"

    @property
    def dim(self) -> int:
        return self._dim

    def _bucket(self, feature: str) -> tuple[int, float]:
        digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
        value = int.from_bytes(digest, "little")
        return value % self._dim, (1.0 if (value >> 63) & 1 else -1.0)

    def embed(self, texts: Sequence[str]) -> EmbeddingResult:
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        for row, text in enumerate(texts):
            words = _WORD.findall(text.lower())
            features = words + [f"{a} {b}" for a, b in itertools.pairwise(words)]
            for feature in features:
                col, sign = self._bucket(feature)
                out[row, col] += sign
            norm = float(np.linalg.norm(out[row]))
            if norm > 0:
                out[row] /= norm
            else:
                out[row, 0] = 1.0  # empty text: a fixed unit vector keeps rows normalised
        return EmbeddingResult(vectors=out, model_id=self.model_id)
