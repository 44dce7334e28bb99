"""Small pure functions of the cascade: reciprocal rank fusion, the NaN-aware max and the cosine gate.

RRF (paper §3.4): ``score(d) = sum over lists m of 1 / (k0 + rank_m(d))`` with 1-based ranks. Sums use
``math.fsum`` so that the result does not depend on the order of the input lists, not even in the last bit.
Ties are broken by the best (lowest) rank a document reached in any list, then by id.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from tmem.retrieve.types import Route

DEFAULT_K0 = 60


def rrf(lists: Sequence[Sequence[str]], k0: int = DEFAULT_K0) -> list[tuple[str, float]]:
    """Fuse ranked id lists (best first) into one ``(id, score)`` list, best first.

    An id repeated within one list counts once, at its first position; later ids move up (ranks are positions in
    the list without repeats).
    """
    if k0 < 0:
        raise ValueError(f"k0 must be >= 0, got {k0}")
    parts: dict[str, list[float]] = {}
    best: dict[str, int] = {}
    for ranked in lists:
        for rank, doc in enumerate(dict.fromkeys(ranked), start=1):
            parts.setdefault(doc, []).append(1.0 / (k0 + rank))
            best[doc] = min(best.get(doc, rank), rank)
    fused = [(doc, math.fsum(sorted(p))) for doc, p in parts.items()]
    fused.sort(key=lambda kv: (-kv[1], best[kv[0]], kv[0]))
    return fused


def nanmax(values: Iterable[float]) -> float | None:
    """The largest value ignoring NaN; None when there is no non-NaN value (the host is absent, not zero)."""
    best: float | None = None
    for v in values:
        if math.isnan(v):
            continue
        if best is None or v > best:
            best = v
    return best


@dataclass(frozen=True)
class Ranked:
    """One entry of a named ranked list: the id, the list's own score, and for trigger lists the view and gate."""

    id: str
    score: float
    view: str | None = None
    gate: float | None = None


def gate(entries: Sequence[Ranked], threshold: float | None) -> list[Ranked]:
    """Entries whose score reaches ``threshold`` (kept in order, each annotated with the gate); all when None."""
    return split_gate(entries, threshold)[0]


def split_gate(entries: Sequence[Ranked], threshold: float | None) -> tuple[list[Ranked], list[Ranked]]:
    """``(kept, fell)``: the entries reaching ``threshold`` and those under it (NaN included), both in order and
    annotated with the gate; everything is kept when the threshold is None."""
    if threshold is None:
        return list(entries), []
    kept: list[Ranked] = []
    fell: list[Ranked] = []
    for e in entries:
        target = kept if not math.isnan(e.score) and e.score >= threshold else fell
        target.append(Ranked(e.id, e.score, e.view, threshold))
    return kept, fell


@dataclass(frozen=True)
class Fused:
    """A fused hit: its RRF score and the route it took in every list that reached it."""

    id: str
    score: float
    routes: list[Route]


def fuse(lists: Mapping[str, Sequence[Ranked]], k0: int = DEFAULT_K0) -> list[Fused]:
    """RRF over named lists, keeping each hit's routes (list name, rank, score, view, gate), best first."""
    names = sorted(lists)
    fused = rrf([[e.id for e in lists[name]] for name in names], k0)
    routes: dict[str, list[Route]] = {}
    for name in names:
        firsts: dict[str, Ranked] = {}
        for e in lists[name]:
            firsts.setdefault(e.id, e)
        for rank, e in enumerate(firsts.values(), start=1):
            routes.setdefault(e.id, []).append(
                Route(name=name, rank=rank, score=float(e.score), view=e.view, gate=e.gate)
            )
    return [Fused(doc, score, routes[doc]) for doc, score in fused]
