"""The embedding boundary: texts -> L2-normalised float32 matrix, with the model's id."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

Matrix = npt.NDArray[np.float32]

log = logging.getLogger("tmem.embed")


def clip_texts(texts: Sequence[str], limit: int, model: str) -> list[str]:
    """``texts`` with each one cut to ``limit`` characters, logging a note when any was cut.

    A model reads a bounded number of tokens anyway; cutting before tokenisation keeps a very long turn (up to the
    importer's 100,000 characters) from costing time and memory for tokens the model would drop. The full text stays
    stored and indexed by BM25; only its vector is computed from its start.
    """
    out = [t if len(t) <= limit else t[:limit] for t in texts]
    cut = sum(1 for t in texts if len(t) > limit)
    if cut:
        log.warning(
            "%d text(s) longer than %d characters were truncated for embedding with %s (their full text stays "
            "stored and in the BM25 index)",
            cut,
            limit,
            model,
        )
    return out


@dataclass(frozen=True)
class EmbeddingResult:
    vectors: Matrix  # shape (n, dim), float32, each row L2-normalised
    model_id: str


class Embedder(Protocol):
    @property
    def model_id(self) -> str:
        """Identifies the model (and its revision); recorded beside every stored vector."""
        ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> EmbeddingResult: ...
