"""The embedding boundary: texts -> L2-normalised float32 matrix, with the model's id."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

Matrix = npt.NDArray[np.float32]


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
