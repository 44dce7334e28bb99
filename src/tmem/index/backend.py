"""Vector index backends behind one small protocol, so that the cascade never depends on where vectors live.

A :class:`VectorIndex` holds the vectors of ONE space, in named parts: the node parts (``topic``, ``scene``, ``item``,
``turn``: one entry per node, ``host`` = the node's id) and one part per trigger family (``views.entity`` ...: one
entry per view, ``host`` = the hosting item or scene). It answers the two queries of the cascade:

- :meth:`VectorIndex.top_k`: the ``k`` entries of one part most similar to the query, optionally only among
  ``allowed`` ids (a filtered top-k: scenes admitted by the topic prefilter, items of the kept scenes);
- :meth:`VectorIndex.top_hosts`: the ``k`` hosts whose best view (max cosine over their views, across the given
  parts) is most similar to the query, with the part and view that gave the max (paper §3.3).

Updates are incremental: :meth:`VectorIndex.sync` takes the entries a space should hold and writes only what changed
(new or re-texted entries; gone entries are removed), keyed by the text hash, so a build that adds one session
touches only that session's vectors.

Backends: :class:`MemoryVectorIndex` (in process, exact below 200k entries a part, IVF above; the default with SQLite) and
:class:`tmem.index.pgvector.PgVectorIndex` (pgvector HNSW with cosine distance, used with PostgreSQL).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import numpy as np
import numpy.typing as npt

from tmem.errors import InputError
from tmem.index.dense import Matrix, query_vector, unit_rows
from tmem.index.ivf import IvfPart
from tmem.index.topk import Scores, top_k

if TYPE_CHECKING:
    from tmem.index.ivf_saves import IvfSaves

NODE_PARTS = ("topic", "scene", "item", "turn")
# A part of this many entries or more is searched approximately (IVF over float16; bench/results/scale.md).
APPROX_ABOVE = 200_000


def view_part(family: str) -> str:
    """The part name of a trigger family's views (``views.entity``)."""
    return f"views.{family}"


@dataclass(frozen=True, slots=True)
class Entry:
    """One vector of the index: ``part``, its ``id`` (unique in the part), its ``host`` (the node it scores), the
    ``view`` name (empty for nodes) and the ``text_hash`` of the text it embeds (to detect changes)."""

    part: str
    id: str
    host: str
    view: str
    text_hash: str


@dataclass(frozen=True, slots=True)
class Hit:
    id: str
    score: float


@dataclass(frozen=True, slots=True)
class HostHit:
    host: str
    score: float
    part: str
    view: str


@dataclass(frozen=True)
class SyncReport:
    """What :meth:`VectorIndex.sync` wrote: entries added or re-embedded, removed, and left as they were."""

    written: int
    removed: int
    kept: int


class VectorIndex(Protocol):
    """The vectors of one space (see the module docstring)."""

    @property
    def dim(self) -> int: ...

    def sync(self, entries: Sequence[Entry], vectors: Matrix) -> SyncReport:
        """Make the index hold exactly ``entries`` (row n of ``vectors`` is entry n's vector): write new and changed
        entries, remove the ones not listed, keep the rest untouched."""
        ...

    def known(self) -> dict[tuple[str, str], str]:
        """(part, id) -> text hash of every entry held (so a caller embeds only what :meth:`sync` will write)."""
        ...

    def count(self, part: str) -> int: ...

    def top_k(
        self, part: str, qvec: npt.NDArray[np.floating], k: int, allowed: Sequence[str] | None = None
    ) -> list[Hit]:
        """Best ``k`` entries of ``part`` by cosine, best first; only ids in ``allowed`` when given."""
        ...

    def top_hosts(
        self, parts: Sequence[str], qvec: npt.NDArray[np.floating], k: int, allowed: Sequence[str] | None = None
    ) -> list[HostHit]:
        """Best ``k`` hosts by the max cosine over their entries in ``parts``, best first, with the part and view that
        gave the max. Ties: a deterministic order of the backend's (in-process: entry order; pgvector: host id)."""
        ...


def changes(held: dict[tuple[str, str], str], entries: Sequence[Entry]) -> tuple[list[int], list[tuple[str, str]], int]:
    """(rows of ``entries`` to write, (part, id) keys to remove, number kept) for an incremental sync."""
    wanted = {(e.part, e.id): n for n, e in enumerate(entries)}
    if len(wanted) != len(entries):
        raise ValueError("VectorIndex.sync got the same (part, id) twice; every entry needs a distinct id.")
    write = [n for n, e in enumerate(entries) if held.get((e.part, e.id)) != e.text_hash]
    remove = [key for key in held if key not in wanted]
    return write, remove, len(entries) - len(write)


def part_order(entries: Sequence[Entry]) -> dict[str, list[int]]:
    """Rows of each part (parts in the order of their first entry) in the order every backend ranks ties by: grouped
    by host, hosts in the order of their first entry, a host's rows in entry order."""
    by_part: dict[str, list[int]] = {}
    for n, e in enumerate(entries):
        by_part.setdefault(e.part, []).append(n)
    for rows in by_part.values():
        first: dict[str, int] = {}
        for n in rows:
            first.setdefault(entries[n].host, n)
        rows.sort(key=lambda n: first[entries[n].host])  # stable: a host's rows keep their entry order
    return by_part


class _Part:
    """One part of the in-process index: a slice of the stacked matrix, rows grouped by host (so a per-host max is one
    ``reduceat``), hosts in the order of their first entry."""

    def __init__(self, entries: list[Entry], lo: int) -> None:
        self.entries = entries
        self.lo, self.hi = lo, lo + len(entries)
        self.pos = {e.id: n for n, e in enumerate(entries)}
        hosts = [e.host for e in entries]
        self.starts = np.array([n for n in range(len(hosts)) if n == 0 or hosts[n] != hosts[n - 1]], dtype=np.intp)
        self.hosts = [hosts[n] for n in self.starts.tolist()]
        self.host_row = {h: r for r, h in enumerate(self.hosts)}


@dataclass(frozen=True)
class _Layout:
    """Everything a search reads, replaced as one object by :meth:`MemoryVectorIndex.sync` (searches running on
    another thread keep the layout they started with). ``approx``: the parts held in an IVF index instead of rows of
    ``matrix`` (their ``_Part`` still lists the entries; its ``lo``/``hi`` span no rows)."""

    matrix: Matrix
    parts: dict[str, _Part]
    host_rank: dict[str, int]
    approx: dict[str, IvfPart] = field(default_factory=dict)


def _layout(
    dim: int,
    entries: Sequence[Entry],
    fill: Callable[[Matrix, npt.NDArray[np.intp]], None],
    approx: dict[str, IvfPart] | None = None,
) -> _Layout:
    """Parts in the order of their first entry; inside a part, rows grouped by host (hosts in the order of their first
    entry, rows of a host in entry order). ``fill(matrix, order)`` writes entry ``order[r]``'s vector into row r.
    Parts in ``approx`` get no rows."""
    approx = approx or {}
    host_rank: dict[str, int] = {}
    for n, e in enumerate(entries):
        host_rank.setdefault(e.host, n)
    parts: dict[str, _Part] = {}
    order: list[int] = []
    for name, rows in part_order(entries).items():
        if name in approx:
            parts[name] = _Part([entries[n] for n in rows], len(order))
            parts[name].hi = parts[name].lo
            continue
        parts[name] = _Part([entries[n] for n in rows], len(order))
        order += rows
    matrix = np.empty((len(order), dim), dtype=np.float32)
    if order:
        fill(matrix, np.asarray(order, dtype=np.intp))
    return _Layout(matrix, parts, host_rank, approx)


def _unit_in_place(matrix: Matrix, rows: npt.NDArray[np.intp], block: int = 65_536) -> None:
    """Scale the given rows of ``matrix`` to unit length (rows already of unit length within 1e-4 are kept bit for
    bit), a block at a time (no full-size temporary)."""
    for lo in range(0, rows.shape[0], block):
        idx = rows[lo : lo + block]
        part = matrix[idx]
        norms = np.sqrt(np.einsum("ij,ij->i", part, part))
        if np.any(norms == 0) or not np.all(np.isfinite(norms)):
            raise InputError("A zero or non-finite vector cannot be indexed; every row needs a usable embedding.")
        off = np.abs(norms - 1.0) > 1e-4
        if np.any(off):
            matrix[idx[off]] = part[off] / norms[off, None]


class MemoryVectorIndex:
    """Cosine search in process memory. A part under ``approx_above`` entries is exact: float32, every such part in
    one stacked matrix, so that all the lookups of one search cost a single matrix-vector product (the cosines of the
    last query are kept and sliced per part). A part of ``approx_above`` entries or more is held in an IVF index over
    float16 vectors (:class:`tmem.index.ivf.IvfPart`: half the bytes, a few lists visited per query) and stays so
    while it has entries; None keeps every part exact.

    Ties are broken by entry order (the order of the entries given to :meth:`sync`; for ``top_hosts`` the position of
    each host's first entry), so a caller that lists its nodes in a stable order gets a stable ranking. Approximate
    parts rank by score alone."""

    def __init__(self, dim: int, approx_above: int | None = APPROX_ABOVE) -> None:
        if approx_above is not None and approx_above < 1:
            raise ValueError(f"approx_above must be >= 1 or None, got {approx_above}.")
        self._dim = dim
        self._approx_above = approx_above
        self._state = _layout(dim, [], lambda m, o: None)
        self._last: tuple[_Layout, bytes, Scores] | None = None

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def nbytes(self) -> int:
        """Bytes held by the vectors (what an LRU cache bounded by memory counts)."""
        return int(self._state.matrix.nbytes) + sum(a.nbytes for a in self._state.approx.values())

    @property
    def matrix(self) -> Matrix:
        """Every vector of the exact parts in one stack (parts in the order of their first entry)."""
        return self._state.matrix

    @property
    def approximate_parts(self) -> list[str]:
        """The parts held in an IVF index."""
        return list(self._state.approx)

    def copy(self) -> MemoryVectorIndex:
        """A second index sharing this one's (immutable) vectors: sync the copy to update a space while searches keep
        reading the original."""
        twin = MemoryVectorIndex(self._dim, self._approx_above)
        twin._state = self._state
        return twin

    def known(self) -> dict[tuple[str, str], str]:
        # derived on demand (a sync's business), not kept: a dict per entry would cost ~250 bytes each at 1M entries
        return {(e.part, e.id): e.text_hash for p in self._state.parts.values() for e in p.entries}

    def _approx_names(self, old: _Layout, entries: Sequence[Entry]) -> set[str]:
        sizes: dict[str, int] = {}
        for e in entries:
            sizes[e.part] = sizes.get(e.part, 0) + 1
        above = self._approx_above
        if above is None:
            return set()
        # hysteresis: an approximate part turns exact again only under half the threshold
        return {name for name, n in sizes.items() if n >= above or (name in old.approx and 2 * n >= above)}

    def sync(self, entries: Sequence[Entry], vectors: Matrix) -> SyncReport:
        if vectors.shape != (len(entries), self._dim):
            raise ValueError(f"sync got {len(entries)} entries but vectors of shape {vectors.shape}.")
        vectors = np.asarray(vectors, dtype=np.float32)  # no copy when already float32
        old = self._state
        write, remove, kept = changes(self.known(), entries)
        is_new = np.zeros(len(entries), dtype=np.bool_)
        is_new[write] = True
        approx = {
            name: _sync_approx(self._dim, old, name, entries, vectors, is_new)
            for name in self._approx_names(old, entries)
        }

        def fill(matrix: Matrix, order: npt.NDArray[np.intp]) -> None:
            if len(write) == len(entries):  # a full build: no temporary copy of the vectors
                if np.array_equal(order, np.arange(len(order))):
                    np.copyto(matrix, vectors)  # entries already grouped (as SpaceIndex lists them)
                else:
                    np.take(vectors, order, axis=0, out=matrix)
                new_rows = np.arange(len(order), dtype=np.intp)
            else:
                new_rows = np.flatnonzero(is_new[order])
                old_rows = np.flatnonzero(~is_new[order])
                if new_rows.shape[0]:
                    matrix[new_rows] = vectors[order[new_rows]]
                kept = [entries[n] for n in order[old_rows]]
                exact = [r for r, e in enumerate(kept) if e.part not in old.approx]
                src = [_old_row(old, kept[r]) for r in exact]
                matrix[old_rows[exact]] = old.matrix[np.asarray(src, dtype=np.intp)]
                for name, ivf in old.approx.items():  # a part back under half the threshold: out of its IVF
                    back = [r for r, e in enumerate(kept) if e.part == name]
                    if back:
                        matrix[old_rows[back]] = ivf.vectors([kept[r].id for r in back])
            _unit_in_place(matrix, new_rows)

        self._state = _layout(self._dim, entries, fill, approx)
        self._last = None
        return SyncReport(written=len(write), removed=len(remove), kept=kept)

    def restore(self, entries: Sequence[Entry], saves: IvfSaves) -> int:
        """Before the first :meth:`sync` of a fresh index: take every part of ``entries`` that would be approximate
        and has a save of exactly its entries from ``saves`` (so the sync neither reads nor trains it). Returns the
        number of entries restored."""
        if self._state.parts or self._approx_above is None:
            return 0
        restored: dict[str, IvfPart] = {}
        held: list[Entry] = []
        for name, rows in part_order(entries).items():
            if len(rows) >= self._approx_above:
                part = [entries[n] for n in rows]
                ivf = saves.load(self._dim, name, part)
                if ivf is not None:
                    restored[name] = ivf
                    held += part
        if restored:
            self._state = _layout(self._dim, held, lambda m, o: None, restored)
        return len(held)

    def save(self, saves: IvfSaves) -> None:
        """Save every approximate part (a part already saved with the same entries is skipped)."""
        for name, ivf in self._state.approx.items():
            saves.save(name, self._state.parts[name].entries, ivf)

    def count(self, part: str) -> int:
        p = self._state.parts.get(part)
        return 0 if p is None else len(p.entries)

    def _cosines(self, state: _Layout, qvec: npt.NDArray[np.floating]) -> Scores:
        """Cosine of the query with every vector (one product per distinct query, reused by the next lookups)."""
        q = query_vector(qvec, self._dim)
        key = q.tobytes()
        last = self._last
        if last is not None and last[0] is state and last[1] == key:
            return last[2]
        cos: Scores = state.matrix @ q
        self._last = (state, key, cos)
        return cos

    def top_k(
        self, part: str, qvec: npt.NDArray[np.floating], k: int, allowed: Sequence[str] | None = None
    ) -> list[Hit]:
        state = self._state
        p = state.parts.get(part)
        if p is None or not p.entries:
            query_vector(qvec, self._dim)
            return []
        ivf = state.approx.get(part)
        if ivf is not None:
            among = None if allowed is None else [ivf.pos[i] for i in allowed if i in ivf.pos]
            keys, scores = ivf.search(query_vector(qvec, self._dim), k, among)
            return [Hit(str(ivf.entries[key]), float(s)) for key, s in zip(keys.tolist(), scores.tolist(), strict=True)]
        scores = self._cosines(state, qvec)[p.lo : p.hi]
        mask = None
        if allowed is not None:
            mask = np.zeros(len(p.entries), dtype=np.bool_)
            mask[[p.pos[i] for i in allowed if i in p.pos]] = True
        return [Hit(p.entries[r].id, float(scores[r])) for r in top_k(scores, k, mask)]

    def top_hosts(
        self, parts: Sequence[str], qvec: npt.NDArray[np.floating], k: int, allowed: Sequence[str] | None = None
    ) -> list[HostHit]:
        state = self._state
        present = [(name, p) for name in parts if (p := state.parts.get(name)) is not None and p.entries]
        if k <= 0 or not present:
            query_vector(qvec, self._dim)
            return []
        allow = None if allowed is None else set(allowed)
        exact = [(name, p) for name, p in present if name not in state.approx]
        cos = self._cosines(state, qvec) if exact else np.zeros(0, dtype=np.float32)
        host_max: dict[str, Scores] = {}
        best: dict[str, float] = {}
        found: dict[tuple[str, str], tuple[float, str]] = {}  # (part, host) -> (score, view) of approximate parts
        for name, p in present:
            ivf = state.approx.get(name)
            if ivf is not None:
                for host, (score, view) in _approx_hosts(ivf, query_vector(qvec, self._dim), k, allow).items():
                    found[(name, host)] = (score, view)
                    if host not in best or score > best[host]:
                        best[host] = score
                continue
            hm = host_max[name] = np.fmax.reduceat(cos[p.lo : p.hi], p.starts)
            # a host of the overall top k is in the top k of the part that gives its max
            rows = top_k(hm, k).tolist() if allow is None else [r for r, h in enumerate(p.hosts) if h in allow]
            for r in rows:
                host, score = p.hosts[r], float(hm[r])
                if host not in best or score > best[host]:
                    best[host] = score
        out: list[HostHit] = []
        for host, score in sorted(best.items(), key=lambda x: (-x[1], state.host_rank[x[0]]))[:k]:
            out.append(_host_hit(present, host_max, found, cos, host, score))
        return out


def _host_hit(
    present: list[tuple[str, _Part]],
    host_max: dict[str, Scores],
    found: dict[tuple[str, str], tuple[float, str]],
    cos: Scores,
    host: str,
    score: float,
) -> HostHit:
    """The part that gave ``host`` its max (the first listed among equals) and in it the host's first best view."""
    for name, p in present:
        if name not in host_max:
            hit = found.get((name, host))
            if hit is not None and hit[0] == score:
                return HostHit(host, score, name, hit[1])
            continue
        r = p.host_row.get(host)
        if r is None or float(host_max[name][r]) != score:
            continue
        lo = int(p.starts[r])
        hi = int(p.starts[r + 1]) if r + 1 < len(p.starts) else len(p.entries)
        view_cos = cos[p.lo + lo : p.lo + hi]
        return HostHit(host, score, name, p.entries[lo + int(np.argmax(view_cos))].view)
    raise AssertionError(f"host {host!r} scored {score} in no part")  # unreachable: best only holds found scores


def _approx_hosts(
    ivf: IvfPart, q: npt.NDArray[np.float32], k: int, allow: set[str] | None
) -> dict[str, tuple[float, str]]:
    """Host -> (best score, its view) for the ``k`` best hosts of an approximate part: views are fetched best first,
    4 per wanted host, more when fewer than ``k`` distinct hosts came back (hosts with many close views)."""
    if allow is not None:
        among = [key for h in allow for key in ivf.host_keys.get(h, ())]
        keys, scores = ivf.search(q, len(among), among)
        want = len(among)
    else:
        want = 4 * k
    while True:
        if allow is None:
            keys, scores = ivf.search(q, want)
        hosts: dict[str, tuple[float, str]] = {}
        for key, s in zip(keys.tolist(), scores.tolist(), strict=True):
            host = ivf.host_of[key]
            if host not in hosts:
                hosts[host] = (float(s), ivf.view_of[key])
        if allow is not None or len(hosts) >= k or want >= len(ivf) or len(keys) < want:
            return hosts
        want *= 4


def _old_row(old: _Layout, e: Entry) -> int:
    p = old.parts[e.part]
    return p.lo + p.pos[e.id]


def _sync_approx(
    dim: int, old: _Layout, name: str, entries: Sequence[Entry], vectors: Matrix, is_new: npt.NDArray[np.bool_]
) -> IvfPart:
    """The IVF part ``name`` holding exactly its entries among ``entries``: the old IVF updated (gone and re-texted
    entries removed, new ones added), or built afresh from the exact rows and new vectors (first time over the
    threshold, or grown past its training size)."""
    rows = [n for n, e in enumerate(entries) if e.part == name]
    prev = old.approx.get(name)
    if prev is not None and not prev.needs_retraining(len(rows)):
        moved = [
            entries[n]
            for n in rows
            if not is_new[n]
            and (key := prev.pos.get(entries[n].id)) is not None
            and (prev.host_of[key], prev.view_of[key]) != (entries[n].host, entries[n].view)
        ]
        if not moved and not any(is_new[n] for n in rows) and len(rows) == len(prev):
            return prev  # unchanged: shared with the previous layout (an IvfPart is only mutated as a fresh clone)
        ivf = prev.clone()
        for e in moved:
            ivf.relabel(e.id, e.host, e.view)
        wanted = {entries[n].id for n in rows}
        ivf.remove(
            [i for i in list(ivf.pos) if i not in wanted]
            + [entries[n].id for n in rows if is_new[n] and entries[n].id in ivf.pos]
        )
        add = [n for n in rows if entries[n].id not in ivf.pos]
        ivf.add(
            [entries[n].id for n in add],
            [entries[n].host for n in add],
            [entries[n].view for n in add],
            unit_rows(vectors[add]) if add else np.zeros((0, dim), dtype=np.float32),
        )
        return ivf
    matrix = np.empty((len(rows), dim), dtype=np.float32)
    new = [r for r, n in enumerate(rows) if is_new[n]]
    if new:
        matrix[new] = unit_rows(vectors[[rows[r] for r in new]])
    kept = [r for r, n in enumerate(rows) if not is_new[n]]
    if kept:
        ids = [entries[rows[r]].id for r in kept]
        matrix[kept] = (
            prev.vectors(ids) if prev is not None else old.matrix[[_old_row(old, entries[rows[r]]) for r in kept]]
        )
    return IvfPart.build(
        dim, [entries[n].id for n in rows], [entries[n].host for n in rows], [entries[n].view for n in rows], matrix
    )
