"""Topic-shift segmentation of one session from turn embeddings (TextTiling with embeddings).

The rule is Hearst's TextTiling (1997) with sentence embeddings in place of word counts; nothing in it is fitted to
any data set:

1. Gap similarity: for each gap ``g`` between turn ``g-1`` and turn ``g``, the cosine between the mean vector of the
   ``WINDOW`` turns before the gap and the mean vector of the ``WINDOW`` turns after it (fewer at the session edges).
2. Smoothing: a centred moving average of width 3 over the gap similarities.
3. Depth: at each valley (a gap whose smoothed similarity is not above either neighbour's), depth is the climb to the
   highest point reached by walking uphill on the left plus the same on the right (Hearst's depth score).
4. Boundaries: valleys whose depth is at least ``mean - std / 2`` of the session's valley depths (Hearst's relative
   cutoff) and at least ``MIN_DEPTH`` (an absolute floor in cosine units, so that a flat curve with noise ripples is
   not cut: the relative cutoff alone always cuts somewhere), accepted deepest first, skipping any that would leave a
   scene shorter than ``MIN_TURNS``.
5. Length cap: a scene longer than ``MAX_TURNS`` is split at its lowest-similarity gap that keeps both parts at least
   ``MIN_TURNS`` long, recursively.

Session breaks always close a scene in the extractive mode, so segmentation never looks across sessions; this keeps
an incremental build identical to a full one.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["MAX_TURNS", "MIN_DEPTH", "MIN_TURNS", "WINDOW", "gap_similarities", "segment_session"]

WINDOW = 3
MIN_DEPTH = 0.05
MIN_TURNS = 4
MAX_TURNS = 24

FloatArray = npt.NDArray[np.float64]


def _unit(v: FloatArray) -> FloatArray:
    norm = float(np.linalg.norm(v))
    return v / norm if norm > 0 else v


def gap_similarities(vectors: npt.NDArray[np.float32], window: int = WINDOW) -> FloatArray:
    """Cosine between the windows either side of each gap; element ``g - 1`` is the gap before turn ``g``."""
    n = vectors.shape[0]
    v = vectors.astype(np.float64)
    sims = np.zeros(max(n - 1, 0), dtype=np.float64)
    for g in range(1, n):
        left = _unit(v[max(0, g - window) : g].mean(axis=0))
        right = _unit(v[g : min(n, g + window)].mean(axis=0))
        sims[g - 1] = float(left @ right)
    return sims


def _smooth(sims: FloatArray) -> FloatArray:
    if sims.size < 3:
        return sims.copy()
    out = np.empty_like(sims)
    for i in range(sims.size):
        lo, hi = max(0, i - 1), min(sims.size, i + 2)
        out[i] = sims[lo:hi].mean()
    return out


def _depths(smoothed: FloatArray) -> dict[int, float]:
    """Depth score of each valley, keyed by gap index (0-based into ``smoothed``)."""
    depths: dict[int, float] = {}
    m = smoothed.size
    for i in range(m):
        here = smoothed[i]
        if (i > 0 and smoothed[i - 1] < here) or (i < m - 1 and smoothed[i + 1] < here):
            continue  # not a valley
        left = here
        j = i - 1
        while j >= 0 and smoothed[j] >= left:
            left = smoothed[j]
            j -= 1
        right = here
        j = i + 1
        while j < m and smoothed[j] >= right:
            right = smoothed[j]
            j += 1
        depths[i] = float((left - here) + (right - here))
    return depths


def _fits(boundaries: list[int], cut: int, n: int, min_turns: int) -> bool:
    edges = sorted([0, n, *boundaries])
    for k in range(len(edges) - 1):
        if edges[k] < cut < edges[k + 1]:
            return cut - edges[k] >= min_turns and edges[k + 1] - cut >= min_turns
    return False


def _cap(start: int, end: int, smoothed: FloatArray, min_turns: int, max_turns: int) -> list[int]:
    """Extra boundaries (turn indices) splitting [start, end) into parts of at most ``max_turns``."""
    if end - start <= max_turns:
        return []
    # allowed cut positions (the turn where the new scene starts); non-empty because max_turns >= 2 * min_turns
    candidates = range(start + min_turns, end - min_turns + 1)
    cut = min(candidates, key=lambda c: (smoothed[c - 1], c))
    return [
        *_cap(start, cut, smoothed, min_turns, max_turns),
        cut,
        *_cap(cut, end, smoothed, min_turns, max_turns),
    ]


def segment_session(
    vectors: npt.NDArray[np.float32],
    *,
    window: int = WINDOW,
    min_turns: int = MIN_TURNS,
    max_turns: int = MAX_TURNS,
) -> list[tuple[int, int]]:
    """Split a session's turns (rows of ``vectors``, L2-normalised) into scenes: ``[(start, end), ...]``, end exclusive.

    The ranges cover ``0..n`` exactly, in order; every range holds at least one turn and at most ``max_turns``.
    """
    if min_turns < 1 or max_turns < 2 * min_turns:
        raise ValueError("segment_session needs min_turns >= 1 and max_turns >= 2 * min_turns")
    n = int(vectors.shape[0])
    if n == 0:
        return []
    smoothed = _smooth(gap_similarities(vectors, window))
    boundaries: list[int] = []
    depths = _depths(smoothed)
    if depths:
        values = np.array(list(depths.values()), dtype=np.float64)
        cutoff = float(values.mean() - values.std() / 2)
        ranked = sorted(depths.items(), key=lambda kv: (-kv[1], kv[0]))
        for gap, depth in ranked:
            cut = gap + 1  # the new scene starts at turn gap + 1
            if depth >= MIN_DEPTH and depth >= cutoff and _fits(boundaries, cut, n, min_turns):
                boundaries.append(cut)
    edges = sorted([0, n, *boundaries])
    for k in range(len(edges) - 1):
        boundaries.extend(_cap(edges[k], edges[k + 1], smoothed, min_turns, max_turns))
    edges = sorted([0, n, *boundaries])
    return [(edges[k], edges[k + 1]) for k in range(len(edges) - 1)]
