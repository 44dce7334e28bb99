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

Backends: :class:`MemoryVectorIndex` (exact, in process; the default with SQLite) and
:class:`tmem.index.pgvector.PgVectorIndex` (pgvector HNSW with cosine distance, used with PostgreSQL).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from tmem.index.dense import Matrix, normalise_rows, query_vector
from tmem.index.topk import Scores, top_k

NODE_PARTS = ("topic", "scene", "item", "turn")


def view_part(family: str) -> str:
    """The part name of a trigger family's views (``views.entity``)."""
    return f"views.{family}"


@dataclass(frozen=True)
class Entry:
    """One vector of the index: ``part``, its ``id`` (unique in the part), its ``host`` (the node it scores), the
    ``view`` name (empty for nodes) and the ``text_hash`` of the text it embeds (to detect changes)."""

    part: str
    id: str
    host: str
    view: str
    text_hash: str


@dataclass(frozen=True)
class Hit:
    id: str
    score: float


@dataclass(frozen=True)
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
        """Best ``k`` hosts by the max cosine over their entries in ``parts``, best first (ties: host id)."""
        ...


def changes(held: dict[tuple[str, str], str], entries: Sequence[Entry]) -> tuple[list[int], list[tuple[str, str]], int]:
    """(rows of ``entries`` to write, (part, id) keys to remove, number kept) for an incremental sync."""
    wanted = {(e.part, e.id): n for n, e in enumerate(entries)}
    if len(wanted) != len(entries):
        raise ValueError("VectorIndex.sync got the same (part, id) twice; every entry needs a distinct id.")
    write = [n for n, e in enumerate(entries) if held.get((e.part, e.id)) != e.text_hash]
    remove = [key for key in held if key not in wanted]
    return write, remove, len(entries) - len(write)


class _Part:
    """One part of the in-process index: rows grouped by host, so a per-host max is one ``reduceat``."""

    def __init__(self, rows: list[tuple[Entry, npt.NDArray[np.float32]]], dim: int) -> None:
        rows = sorted(rows, key=lambda r: (r[0].host, r[0].id))
        self.entries = [e for e, _ in rows]
        self.pos = {e.id: n for n, e in enumerate(self.entries)}
        self.matrix: Matrix = (
            normalise_rows(np.stack([v for _, v in rows])) if rows else np.zeros((0, dim), dtype=np.float32)
        )
        hosts = [e.host for e in self.entries]
        self.starts = np.array([n for n in range(len(hosts)) if n == 0 or hosts[n] != hosts[n - 1]], dtype=np.intp)
        self.hosts = [hosts[n] for n in self.starts.tolist()]


class MemoryVectorIndex:
    """Exact cosine search in process memory (float32, one matrix per part)."""

    def __init__(self, dim: int) -> None:
        self._dim = dim
        self._parts: dict[str, _Part] = {}
        self._hashes: dict[tuple[str, str], str] = {}

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def nbytes(self) -> int:
        """Bytes held by the vectors (what an LRU cache bounded by memory counts)."""
        return sum(p.matrix.nbytes for p in self._parts.values())

    def known(self) -> dict[tuple[str, str], str]:
        return dict(self._hashes)

    def sync(self, entries: Sequence[Entry], vectors: Matrix) -> SyncReport:
        if vectors.shape != (len(entries), self._dim):
            raise ValueError(f"sync got {len(entries)} entries but vectors of shape {vectors.shape}.")
        write, remove, kept = changes(self._hashes, entries)
        touched = {entries[n].part for n in write} | {part for part, _ in remove}
        for part in touched:
            old = self._parts.get(part)
            rows: dict[str, tuple[Entry, npt.NDArray[np.float32]]] = {}
            if old is not None:
                rows = {e.id: (e, old.matrix[n]) for n, e in enumerate(old.entries)}
            for key in remove:
                if key[0] == part:
                    rows.pop(key[1], None)
            for n in write:
                if entries[n].part == part:
                    rows[entries[n].id] = (entries[n], np.asarray(vectors[n], dtype=np.float32))
            self._parts[part] = _Part(list(rows.values()), self._dim)
        for key in remove:
            self._hashes.pop(key, None)
        for n in write:
            self._hashes[(entries[n].part, entries[n].id)] = entries[n].text_hash
        return SyncReport(written=len(write), removed=len(remove), kept=kept)

    def count(self, part: str) -> int:
        p = self._parts.get(part)
        return 0 if p is None else len(p.entries)

    def top_k(
        self, part: str, qvec: npt.NDArray[np.floating], k: int, allowed: Sequence[str] | None = None
    ) -> list[Hit]:
        p = self._parts.get(part)
        if p is None or not p.entries:
            return []
        scores = p.matrix @ query_vector(qvec, self._dim)
        mask = None
        if allowed is not None:
            mask = np.zeros(len(p.entries), dtype=np.bool_)
            mask[[p.pos[i] for i in allowed if i in p.pos]] = True
        return [Hit(p.entries[r].id, float(scores[r])) for r in top_k(scores, k, mask)]

    def top_hosts(
        self, parts: Sequence[str], qvec: npt.NDArray[np.floating], k: int, allowed: Sequence[str] | None = None
    ) -> list[HostHit]:
        q = query_vector(qvec, self._dim)
        best: dict[str, tuple[float, str, int]] = {}  # host -> (score, part, host row in that part)
        cosines: dict[str, Scores] = {}
        allow = None if allowed is None else set(allowed)
        for name in parts:
            p = self._parts.get(name)
            if p is None or not p.entries:
                continue
            cos = cosines[name] = p.matrix @ q
            host_max = np.fmax.reduceat(cos, p.starts)
            for r in top_k(host_max, k if allow is None else len(p.hosts)).tolist():
                host = p.hosts[r]
                if allow is not None and host not in allow:
                    continue
                score = float(host_max[r])
                if host not in best or score > best[host][0]:
                    best[host] = (score, name, r)
        out: list[HostHit] = []
        for host, (score, name, r) in sorted(best.items(), key=lambda x: (-x[1][0], x[0]))[:k]:
            p = self._parts[name]
            lo = int(p.starts[r])
            hi = int(p.starts[r + 1]) if r + 1 < len(p.starts) else len(p.entries)
            out.append(HostHit(host, score, name, p.entries[lo + int(np.argmax(cosines[name][lo:hi]))].view))
        return out
