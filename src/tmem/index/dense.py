"""A flat dense table: ids and an L2-normalised float32 matrix, searched by cosine (one matrix-vector product)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from tmem.errors import InputError
from tmem.index.topk import Mask, Scores, top_k

Matrix = npt.NDArray[np.float32]


def normalise_rows(matrix: npt.NDArray[np.floating]) -> Matrix:
    """float32 rows of unit length; a copy is made only when the input is not already so."""
    out = np.ascontiguousarray(matrix, dtype=np.float32)
    if out.shape[0] == 0:
        return out
    norms = np.linalg.norm(out, axis=1)
    if np.any(norms == 0) or not np.all(np.isfinite(norms)):
        raise InputError("DenseTable got a zero or non-finite vector; every row needs a usable embedding.")
    if np.max(np.abs(norms - 1.0)) > 1e-4:
        out = out / norms[:, None]
    return out


def unit_rows(matrix: npt.NDArray[np.floating]) -> Matrix:
    """float32 rows of unit length, each row on its own: a row already of unit length (within 1e-4) is kept bit for
    bit, whatever the other rows, so that the same vector is stored alike in any batch."""
    out = np.array(matrix, dtype=np.float32, copy=True, order="C")
    if out.shape[0] == 0:
        return out
    norms = np.linalg.norm(out, axis=1)
    if np.any(norms == 0) or not np.all(np.isfinite(norms)):
        raise InputError("A zero or non-finite vector cannot be indexed; every row needs a usable embedding.")
    off = np.abs(norms - 1.0) > 1e-4
    out[off] /= norms[off, None]
    return out


def query_vector(qvec: npt.NDArray[np.floating], dim: int) -> npt.NDArray[np.float32]:
    """The query as a flat float32 vector of the index's dimension (InputError naming the fix otherwise)."""
    q = np.asarray(qvec, dtype=np.float32).reshape(-1)
    if q.shape[0] != dim:
        raise InputError(
            f"Query vector has dimension {q.shape[0]} but the index holds {dim}; embed the query with the model the "
            "index was built with."
        )
    return q


class DenseTable:
    """Cosine search over a fixed set of vectors. Rows are normalised on construction."""

    def __init__(self, ids: Sequence[str], matrix: npt.NDArray[np.floating]) -> None:
        if matrix.ndim != 2:
            raise InputError(f"DenseTable needs a 2-D matrix, got shape {matrix.shape}.")
        if matrix.shape[0] != len(ids):
            raise InputError(f"DenseTable got {len(ids)} ids but {matrix.shape[0]} rows; pass one row per id.")
        self._ids = list(ids)
        self._matrix = normalise_rows(matrix)

    @classmethod
    def empty(cls, dim: int) -> DenseTable:
        return cls([], np.zeros((0, dim), dtype=np.float32))

    def __len__(self) -> int:
        return len(self._ids)

    @property
    def dim(self) -> int:
        return int(self._matrix.shape[1])

    @property
    def ids(self) -> list[str]:
        return self._ids

    @property
    def matrix(self) -> Matrix:
        return self._matrix

    def share(self, matrix: Matrix) -> None:
        """Use ``matrix`` (equal values, e.g. a slice of a space-wide stack) as storage instead of the own copy."""
        if matrix.shape != self._matrix.shape or matrix.dtype != np.float32:
            raise InputError(f"DenseTable.share needs a float32 matrix of shape {self._matrix.shape}.")
        self._matrix = matrix

    def scores(self, qvec: npt.NDArray[np.floating]) -> Scores:
        """Cosine of every row with the (normalised) query vector, in build order."""
        q = query_vector(qvec, self.dim)
        if len(self._ids) == 0:
            return np.zeros(0, dtype=np.float32)
        out: Scores = self._matrix @ q
        return out

    def search(self, qvec: npt.NDArray[np.floating], k: int, mask: Mask | None = None) -> list[tuple[str, float]]:
        """The ``k`` rows most similar to ``qvec`` (inside ``mask`` when given), best first."""
        scores = self.scores(qvec)
        rows = top_k(scores, k, mask)
        return [(self._ids[r], float(scores[r])) for r in rows]
