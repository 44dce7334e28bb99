"""Selecting the best rows of a score vector: deterministic, NaN-aware, optionally masked.

Ties are broken by row position (the order the index was built in), so that the same index and query always give the
same ranking on every machine.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

Scores = npt.NDArray[np.float32]
Mask = npt.NDArray[np.bool_]
Rows = npt.NDArray[np.intp]


def top_k(scores: Scores, k: int, mask: Mask | None = None, *, positive_only: bool = False) -> Rows:
    """Rows of the ``k`` highest scores, best first; NaN rows and rows outside ``mask`` are never returned.

    ``positive_only`` also drops rows scoring ``<= 0`` (a BM25 score of zero means no query token matched).
    """
    if k <= 0 or scores.shape[0] == 0:
        return np.empty(0, dtype=np.intp)
    valid = ~np.isnan(scores)
    if mask is not None:
        if mask.shape != scores.shape:
            raise ValueError(f"mask shape {mask.shape} does not match scores shape {scores.shape}")
        valid &= mask
    if positive_only:
        valid &= scores > 0
    rows = np.flatnonzero(valid)
    if rows.shape[0] == 0:
        return rows
    values = scores[rows]
    if rows.shape[0] > k:
        # argpartition is O(n); ties at the cut are resolved below by keeping every row at the cut value.
        cut = np.partition(values, rows.shape[0] - k)[rows.shape[0] - k]
        keep = values >= cut
        rows, values = rows[keep], values[keep]
    order = np.lexsort((rows, -values.astype(np.float64)))
    return rows[order][:k]
