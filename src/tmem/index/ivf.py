"""Approximate search for the large parts of the in-process index: an inverted file (IVF) over float16 vectors (faiss
``IndexIVFScalarQuantizer`` with ``QT_fp16``, inner product on unit vectors = cosine).

Why this shape (measured in bench/results/scale.md): exact float32 search over 1.3M vectors is bound by memory
bandwidth (570 ms a query on a 2-core box, 1.9 GiB of vectors); an IVF over float16 holds half the bytes, trains and
fills in about a minute (no graph to build, unlike HNSW), and visits only the ``nprobe`` lists nearest the query.
8-bit codes would hold a quarter, but their rounding alone capped recall@50 at 0.980-0.983 whatever ``nprobe``
(measured at 667k vectors), against 1.000 for float16. The part's entries keep stable int64 keys (their place in
:attr:`IvfPart.entries`), so an update removes and adds only what changed, with the trained quantiser kept; a part
that has grown to twice its training size, or shrunk to half, is retrained.

Scores are cosines of the float16 vectors (error ~1e-3); ties rank by distance alone, as on pgvector.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from tmem.index.dense import Matrix
from tmem.util.extras import require_extra

if TYPE_CHECKING:
    from tmem.index.backend import Entry

DEFAULT_NPROBE = 64  # lists visited per query (recall@50 >= 0.98 measured at 1M views: bench/results/scale.md)
_TRAIN_PER_LIST = 50  # training sample: this many vectors per list (faiss warns under 39)
_KMEANS_ITER = 10
_RETRAIN_GROWTH = 2  # retrain when the part holds this many times the vectors it was trained on


def faiss_module() -> Any:
    """The faiss module, imported on first use (small spaces never need it)."""
    require_extra(
        "scale",
        "Approximate search (index parts of TMEM_APPROX_ABOVE entries or more, docs/scaling.md)",
        "Or raise TMEM_APPROX_ABOVE above the space's size to search every part exactly.",
    )
    import faiss

    return faiss


def list_count(n: int) -> int:
    """IVF lists for ``n`` vectors: 2 sqrt(n), at least 1 and at most ``n``. Training costs about the square of the
    list count; 4 sqrt(n) (faiss's usual start) took 180 s at 1M views here, see bench/results/scale.md."""
    return max(1, min(n, round(2 * math.sqrt(n))))


@dataclass
class IvfPart:
    """One part's vectors in an IVF index. ``entries[key]`` is the entry id stored under ``key`` (None once
    removed); ``host_of[key]`` its host."""

    dim: int
    index: Any  # faiss.IndexIVFScalarQuantizer
    entries: list[str | None]
    host_of: list[str]
    view_of: list[str]
    trained_on: int
    nprobe: int = DEFAULT_NPROBE
    pos: dict[str, int] = field(default_factory=dict)

    @classmethod
    def build(
        cls, dim: int, ids: Sequence[str], hosts: Sequence[str], views: Sequence[str], vectors: Matrix, seed: int = 0
    ) -> IvfPart:
        faiss = faiss_module()
        n = len(ids)
        nlist = list_count(n)
        quantiser = faiss.IndexFlatIP(dim)
        index = faiss.IndexIVFScalarQuantizer(
            quantiser, dim, nlist, faiss.ScalarQuantizer.QT_fp16, faiss.METRIC_INNER_PRODUCT
        )
        index.cp.niter = _KMEANS_ITER
        index.cp.seed = seed
        rng = np.random.default_rng(seed)
        take = min(n, _TRAIN_PER_LIST * nlist)
        sample = vectors if take == n else vectors[np.sort(rng.choice(n, take, replace=False))]
        index.train(np.ascontiguousarray(sample, dtype=np.float32))
        part = cls(dim, index, [], [], [], trained_on=n)
        part.add(ids, hosts, views, vectors)
        return part

    @classmethod
    def restore(cls, dim: int, index: Any, entries: Sequence[Entry], keys: Sequence[int], trained_on: int) -> IvfPart:
        """A saved IVF holding ``entries`` (``keys[n]`` is entry n's key in ``index``)."""
        size = max(keys, default=-1) + 1
        ids: list[str | None] = [None] * size
        hosts, views = [""] * size, [""] * size
        for e, key in zip(entries, keys, strict=True):
            ids[key], hosts[key], views[key] = e.id, e.host, e.view
        pos = {e.id: key for e, key in zip(entries, keys, strict=True)}
        return cls(dim, index, ids, hosts, views, trained_on, pos=pos)

    @property
    def nbytes(self) -> int:
        """Bytes of the codes and centroids (what the index cache counts)."""
        index = self.index
        return int(index.ntotal * index.code_size + index.nlist * self.dim * 4)

    def __len__(self) -> int:
        return len(self.pos)

    def clone(self) -> IvfPart:
        """An independent copy (an update of the copy leaves searches on this one unchanged)."""
        twin = IvfPart(
            self.dim,
            faiss_module().clone_index(self.index),
            list(self.entries),
            list(self.host_of),
            list(self.view_of),
            self.trained_on,
            self.nprobe,
            dict(self.pos),
        )
        return twin

    def needs_retraining(self, n: int) -> bool:
        """Whether a part of ``n`` entries has outgrown (or shrunk away from) the lists it was trained with."""
        return n > _RETRAIN_GROWTH * self.trained_on or _RETRAIN_GROWTH * n < self.trained_on

    def relabel(self, ident: str, host: str, view: str) -> None:
        """Give entry ``ident`` another host or view (its vector unchanged)."""
        key = self.pos[ident]
        self.host_of[key], self.view_of[key] = host, view
        self.__dict__.pop("host_keys", None)

    def add(self, ids: Sequence[str], hosts: Sequence[str], views: Sequence[str], vectors: Matrix) -> None:
        if not len(ids):
            return
        lo = len(self.entries)
        keys = np.arange(lo, lo + len(ids), dtype=np.int64)
        self.index.add_with_ids(np.ascontiguousarray(vectors, dtype=np.float32), keys)
        self.entries.extend(ids)
        self.host_of.extend(hosts)
        self.view_of.extend(views)
        self.pos.update({i: lo + n for n, i in enumerate(ids)})
        self.__dict__.pop("host_keys", None)

    def remove(self, ids: Sequence[str]) -> None:
        keys = [self.pos.pop(i) for i in ids]
        if not keys:
            return
        self.index.remove_ids(np.asarray(keys, dtype=np.int64))
        for k in keys:
            self.entries[k] = None
        self.__dict__.pop("host_keys", None)

    def vectors(self, ids: Sequence[str]) -> Matrix:
        """The decoded vectors of ``ids`` (unit length again; for a retraining), read through a copy of the index so
        that searches on this one are untouched."""
        faiss = faiss_module()
        twin = faiss.clone_index(self.index)
        twin.set_direct_map_type(faiss.DirectMap.Hashtable)
        out = twin.reconstruct_batch(np.asarray([self.pos[i] for i in ids], dtype=np.int64))
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        unit: Matrix = (out / np.where(norms > 0, norms, 1.0)).astype(np.float32)
        return unit

    @cached_property
    def host_keys(self) -> dict[str, list[int]]:
        """Keys of each host's entries (built on the first filtered host search only)."""
        out: dict[str, list[int]] = {}
        for key, entry in enumerate(self.entries):
            if entry is not None:
                out.setdefault(self.host_of[key], []).append(key)
        return out

    def search(
        self, q: npt.NDArray[np.float32], k: int, among: Sequence[int] | None = None
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """(keys, cosines) of the ``k`` best entries, best first; with ``among``, only those keys, all lists visited
        (a filtered search is exact over its keys)."""
        faiss = faiss_module()
        index = self.index
        k = min(k, len(self.pos) if among is None else len(among))
        if k <= 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        if among is None:
            params = faiss.SearchParametersIVF(nprobe=min(self.nprobe, index.nlist))
        else:
            selector = faiss.IDSelectorBatch(np.asarray(among, dtype=np.int64))
            params = faiss.SearchParametersIVF(sel=selector, nprobe=index.nlist)
        scores, keys = index.search(q.reshape(1, -1), k, params=params)
        found = keys[0] >= 0
        return keys[0][found].astype(np.int64), scores[0][found].astype(np.float32)
