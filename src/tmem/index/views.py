"""Trigger-aware indices (paper §3.3): every trigger view is embedded on its own, and a host's score for a family is
the NaN-aware max over the cosines of its views. Hosts without views are absent (NaN), never scored zero.

Rows of a :class:`ViewTable` are grouped by host, so the per-host max is one ``np.fmax.reduceat`` over the cosine
vector: the whole family costs one matrix-vector product plus a linear pass, whatever the number of views.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from tmem.index.dense import DenseTable, Matrix
from tmem.index.topk import Scores
from tmem.models import TriggerFamily

Vectorize = Callable[[Sequence[str]], Matrix]
IntArray = npt.NDArray[np.intp]


@dataclass(frozen=True)
class ViewRow:
    """One view to index: its host (position in the host list), the family and the view's name and text."""

    host: int
    family: TriggerFamily
    view: str
    text: str


class ViewTable:
    """All views of one trigger family, grouped by host."""

    def __init__(self, family: TriggerFamily, n_hosts: int, hosts: IntArray, views: list[str], matrix: Matrix) -> None:
        # ``hosts`` is non-decreasing (rows grouped by host); ``views`` names each row.
        self.family = family
        self.n_hosts = n_hosts
        self._views = views
        self._table = DenseTable([f"{h}:{v}" for h, v in zip(hosts.tolist(), views, strict=True)], matrix)
        if hosts.shape[0]:
            change = np.flatnonzero(np.diff(hosts)) + 1
            self._starts: IntArray = np.concatenate([np.zeros(1, dtype=np.intp), change]).astype(np.intp)
        else:
            self._starts = np.zeros(0, dtype=np.intp)
        self._hosts_present: IntArray = hosts[self._starts] if hosts.shape[0] else np.zeros(0, dtype=np.intp)
        self._ends: IntArray = np.append(self._starts[1:], hosts.shape[0]).astype(np.intp)

    @classmethod
    def build(
        cls, family: TriggerFamily, n_hosts: int, rows: Sequence[ViewRow], vectorize: Vectorize, dim: int
    ) -> ViewTable:
        mine = sorted((r for r in rows if r.family == family and r.text.strip()), key=lambda r: r.host)
        hosts = np.array([r.host for r in mine], dtype=np.intp)
        matrix = vectorize([r.text for r in mine]) if mine else np.zeros((0, dim), dtype=np.float32)
        return cls(family, n_hosts, hosts, [r.view for r in mine], matrix)

    def __len__(self) -> int:
        """Number of views."""
        return len(self._table)

    @property
    def hosts_with_views(self) -> int:
        return int(self._starts.shape[0])

    @property
    def matrix(self) -> Matrix:
        return self._table.matrix

    def share(self, matrix: Matrix) -> None:
        self._table.share(matrix)

    def host_scores(self, qvec: npt.NDArray[np.floating], cos: Scores | None = None) -> Scores:
        """One score per host (length ``n_hosts``): the NaN-aware max cosine over its views, NaN without views.

        ``cos`` are the views' cosines when already computed (one product over the whole space's stack)."""
        out = np.full(self.n_hosts, np.nan, dtype=np.float32)
        if len(self._table) == 0:
            return out
        if cos is None:
            cos = self._table.scores(qvec)
        out[self._hosts_present] = np.fmax.reduceat(cos, self._starts)
        return out

    def best_view(self, cos: Scores, host: int) -> str | None:
        """Name of the host's view with the highest cosine in ``cos`` (the one that gave its score)."""
        where = np.searchsorted(self._hosts_present, host)
        if where >= self._hosts_present.shape[0] or self._hosts_present[where] != host:
            return None
        lo, hi = int(self._starts[where]), int(self._ends[where])
        # a host has a handful of views: plain Python beats numpy's per-call overhead here
        best, best_at = -math.inf, -1
        for at, value in enumerate(cos[lo:hi].tolist(), start=lo):
            if value > best:  # NaN compares False: skipped
                best, best_at = value, at
        return self._views[best_at] if best_at >= 0 else None

    def cosines(self, qvec: npt.NDArray[np.floating]) -> Scores:
        return self._table.scores(qvec)
