"""The pgvector backend of :class:`tmem.index.backend.VectorIndex`: a space's vectors in PostgreSQL, searched by
cosine distance with an HNSW index (approximate; graphs over float2 ``halfvec`` copies of the vectors by default) or
exactly, whichever fits the part's size.

Table ``vector_index`` (created on first use, keyed by (tenant, space) like every store table, deleted with its
space) holds one row per entry and embedder (``model_id``). pgvector's HNSW index needs a fixed dimension, and a
filter on the part inside one shared graph costs both recall and time (measured: bench/results/scale.md), so there is one partial expression index per
(dimension, part) in use: ``USING hnsw ((vec::vector(D)) vector_cosine_ops) WHERE dim = D AND part = 'P'``, created
after the first rows of that part are written (a bulk build, not row-by-row insertion).

Search plan: a part (or group of parts) with fewer than ``exact_below`` entries in the space is scanned exactly
(the btree on the primary key narrows to the space; the ORDER BY expression deliberately does not match the HNSW
index); a larger one goes through HNSW with ``hnsw.iterative_scan = relaxed_order`` so that the space filter cannot
starve the result, and ``hnsw.ef_search`` = ``ef_search`` (the recall/latency knob): session settings the pool makes
once per connection (:func:`tmem.store.pg_vector.configure_session`); another ``ef_search`` costs one ``SET LOCAL``.
Run several searches inside ``store.transaction()`` to make them one round trip each, on one connection and one
snapshot (the retriever does so for every search). Filtered top-k with an ``allowed`` id list is always exact (the
list is short: scenes admitted by the topic prefilter, items of the kept scenes).

Ties: column ``ord`` holds each entry's place in its part in the in-process backend's order
(:func:`tmem.index.backend.part_order`: node order, views grouped by host), and exact scans break equal distances by
it, so that both backends rank a space alike (LoCoMo conv-26: identical retrieval records). ``sync`` rewrites ``ord``
of kept rows whose place changed. The approximate path ranks by distance alone.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from tmem.errors import StoreError
from tmem.index.backend import Entry, Hit, HostHit, SyncReport, changes, part_order
from tmem.index.dense import Matrix, query_vector, unit_rows
from tmem.scope import Scope
from tmem.store.pg_vector import DEFAULT_EF_SEARCH
from tmem.store.postgres import PostgresStore

_LOCK_KEY = 7_460_135_002
_SCHEMA = """
CREATE TABLE IF NOT EXISTS vector_index (
    tenant TEXT NOT NULL,
    space TEXT NOT NULL,
    model_id TEXT NOT NULL,
    part TEXT NOT NULL,
    id TEXT NOT NULL,
    host TEXT NOT NULL,
    view TEXT NOT NULL,
    text_hash TEXT NOT NULL,
    dim INTEGER NOT NULL,
    ord INTEGER NOT NULL DEFAULT 0,
    vec vector NOT NULL,
    CHECK (tenant = (CASE WHEN strpos(space, '/') > 0 THEN split_part(space, '/', 1) ELSE '' END)),
    PRIMARY KEY (tenant, space, model_id, part, id),
    FOREIGN KEY (tenant, space) REFERENCES spaces(tenant, name) ON DELETE CASCADE
)
"""
_SCOPE = "tenant = %s AND space = %s AND model_id = %s"
_PART = re.compile(r"^[a-z][a-z_.]{0,40}$")  # parts are inlined into SQL (partial-index predicates): a fixed vocabulary


def _part_sql(part: str) -> str:
    if not _PART.match(part):
        raise ValueError(f"Bad index part name {part!r}: lower-case letters, '.' and '_' only.")
    return f"'{part}'"


# Parts searched together share one HNSW graph: the item trigger route asks for the best hosts over Entity and Bridge
# views at once, so one scan of their joint graph replaces one scan per family (bench/results/scale.md). A search of
# one of them alone goes through the same graph with the part as a filter (iterative scan).
GROUPS: tuple[tuple[str, ...], ...] = (("views.bridge", "views.entity"),)


# HNSW build parameters of every graph. pgvector's default ef_construction (64) left views unreachable in the joint
# view graph at 1M views: recall@50 of the hosts 0.930 at ef_search 400 and no higher at 800 (the scan returned 95-100
# of the exact top-100 views, missing some at ranks 10-20); rebuilt with 128, 0.999 at ef_search 200 and 400
# (bench/results/scale.md, bench/scale_pg1m.py).
HNSW_BUILD = "m = 16, ef_construction = 128"


def graph_of(part: str, grouped: bool = True) -> tuple[str, ...]:
    """The parts whose entries share ``part``'s HNSW graph (sorted)."""
    for group in GROUPS if grouped else ():
        if part in group:
            return group
    return (part,)


def _index_name(dim: int, parts: str | tuple[str, ...], kind: str = "vector") -> str:
    half = "h" if kind == "halfvec" else ""
    names = (parts,) if isinstance(parts, str) else parts
    return f"vector_index_hnsw_{half}{dim}_{'_'.join(p.replace('.', '_') for p in names)}"


def _parts_sql(parts: Sequence[str]) -> str:
    """``part = 'p'`` or ``part IN ('p', 'q')`` (sorted: the form of the graphs' index predicates)."""
    ordered = sorted(set(parts))
    if len(ordered) == 1:
        return f"part = {_part_sql(ordered[0])}"
    return f"part IN ({', '.join(_part_sql(p) for p in ordered)})"


class PgVectorIndex:
    """One space's vectors for one embedder in PostgreSQL (see the module docstring)."""

    def __init__(
        self,
        store: PostgresStore,
        space: Scope,
        model_id: str,
        dim: int,
        *,
        exact_below: int = 20_000,
        ef_search: int = DEFAULT_EF_SEARCH,
        halfvec: bool = True,
        keep_other_kind: bool = False,
        grouped: bool = True,
    ) -> None:
        if not 0 < dim <= 2000:
            raise StoreError(f"pgvector's HNSW index takes 1..2000 dimensions; this embedder has {dim}.")
        self._store = store
        self._space = space
        self._model = model_id
        self._dim = dim
        self._exact_below = exact_below
        self._ef_search = ef_search
        # The HNSW graphs' element type: 'halfvec' (float2, the default: at 100k views 0.58x the latency of float4
        # graphs at the same recall and 0.6x their size, bench/results/scale.md) or 'vector' (float4). Each kind has
        # its own partial indices, built at the next sync; building one drops the other kind's (every insert would
        # pay for both graphs) unless ``keep_other_kind`` (the bench compares them on one table).
        self._kind = "halfvec" if halfvec else "vector"
        self._keep_other = keep_other_kind
        self._grouped = grouped  # False: one graph per part, as before the joint view graphs (the bench compares)
        self._key: tuple[str, ...] = (space.tenant, space.key, model_id)
        self._counts: dict[str, int] = {}
        self.ensure_schema(store, dim)
        self._refresh_counts()

    @staticmethod
    def ensure_schema(store: PostgresStore, dim: int) -> None:
        """Create the table if missing, or add the ``ord`` column to a table made before it (once, under an advisory
        lock)."""
        if store._rows(
            "SELECT 1 FROM information_schema.columns WHERE table_name = 'vector_index' AND column_name = 'ord'"
        ):
            return
        with store.transaction():
            store._exec("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
            store._exec(_SCHEMA)
            store._exec("ALTER TABLE vector_index ADD COLUMN IF NOT EXISTS ord INTEGER NOT NULL DEFAULT 0")

    def _ensure_graph(self, parts: tuple[str, ...]) -> None:
        """The HNSW index of (dim, parts), built once for the whole table (every space shares it). Building it drops
        the graphs it replaces: the other kind's, and the per-part graphs of a group (unless ``keep_other_kind``)."""
        name = _index_name(self._dim, parts, self._kind)
        store = self._store
        if store._rows("SELECT 1 FROM pg_indexes WHERE indexname = %s", (name,)):
            return
        with store.transaction():
            store._exec("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
            store._exec(
                f"CREATE INDEX IF NOT EXISTS {name} ON vector_index USING hnsw ((vec::{self._kind}({self._dim})) "
                f"{self._kind}_cosine_ops) WITH ({HNSW_BUILD}) WHERE dim = {self._dim} AND {_parts_sql(parts)}"
            )
            if not self._keep_other:
                other = "vector" if self._kind == "halfvec" else "halfvec"
                stale = {_index_name(self._dim, parts, other)}
                if len(parts) > 1:  # a joint graph replaces its parts' own graphs
                    replaced: list[tuple[str, ...]] = [(part,) for part in parts]
                else:  # a part's own graph replaces the joint graph it was in
                    replaced = [group for group in GROUPS if parts[0] in group]
                for graph in replaced:
                    stale |= {_index_name(self._dim, graph, kind) for kind in ("vector", "halfvec")}
                for old in sorted(stale):
                    store._exec(f"DROP INDEX IF EXISTS {old}")

    @property
    def dim(self) -> int:
        return self._dim

    def _refresh_counts(self) -> None:
        rows = self._store._rows(f"SELECT part, COUNT(*) FROM vector_index WHERE {_SCOPE} GROUP BY part", self._key)
        self._counts = {str(p): int(n) for p, n in rows}

    def count(self, part: str) -> int:
        return self._counts.get(part, 0)

    def known(self) -> dict[tuple[str, str], str]:
        return {key: h for key, (h, _) in self._held().items()}

    def _held(self) -> dict[tuple[str, str], tuple[str, int]]:
        rows = self._store._rows(f"SELECT part, id, text_hash, ord FROM vector_index WHERE {_SCOPE}", self._key)
        return {(str(p), str(i)): (str(h), int(o)) for p, i, h, o in rows}

    # ------------------------------------------------------------------ writes
    def sync(self, entries: Sequence[Entry], vectors: Matrix) -> SyncReport:
        if vectors.shape != (len(entries), self._dim):
            raise ValueError(f"sync got {len(entries)} entries but vectors of shape {vectors.shape}.")
        for part in {e.part for e in entries}:
            _part_sql(part)
        store = self._store
        with store.transaction():
            # Every search refreshes its space's index, so readers of one space sync it at the same time: one at a
            # time, each against what the one before it committed (READ COMMITTED: _held reads after the lock).
            store._exec(
                "SELECT pg_advisory_xact_lock(hashtext('tmem.vector_index'), hashtext(%s))", ("|".join(self._key),)
            )
            held = self._held()
            write, remove, kept = changes({key: h for key, (h, _) in held.items()}, entries)
            # ``ord``: the entry's place in its part in the in-process backend's tie order (exact searches break ties
            # by it)
            ords = [0] * len(entries)
            for rows in part_order(entries).values():
                for at, n in enumerate(rows):
                    ords[n] = at
            fresh = set(write)
            moved = [
                (e.part, e.id, ords[n])
                for n, e in enumerate(entries)
                if n not in fresh and held[(e.part, e.id)][1] != ords[n]
            ]
            unit = unit_rows(vectors[write]) if write else np.zeros((0, self._dim), dtype=np.float32)
            drop: dict[str, list[str]] = {}
            for part, ident in [*remove, *((entries[n].part, entries[n].id) for n in write)]:
                drop.setdefault(part, []).append(ident)
            for part, ids in drop.items():
                store._exec(
                    f"DELETE FROM vector_index WHERE {_SCOPE} AND part = %s AND id = ANY(%s)", (*self._key, part, ids)
                )
            if moved:
                store._exec(
                    "UPDATE vector_index v SET ord = u.ord FROM unnest(%s::text[], %s::text[], %s::int[]) "
                    "AS u(part, id, ord) WHERE v.tenant = %s AND v.space = %s AND v.model_id = %s "
                    "AND v.part = u.part AND v.id = u.id",
                    ([m[0] for m in moved], [m[1] for m in moved], [m[2] for m in moved], *self._key),
                )
            if write:
                with (
                    store._transaction_driver() as conn,
                    conn.cursor() as cur,
                    cur.copy(
                        "COPY vector_index (tenant, space, model_id, part, id, host, view, text_hash, dim, ord, vec) "
                        "FROM STDIN (FORMAT BINARY)"
                    ) as copy,
                ):
                    copy.set_types([*["text"] * 8, "int4", "int4", "vector"])
                    for row, n in enumerate(write):
                        e = entries[n]
                        copy.write_row(
                            (
                                *self._key,
                                e.part,
                                e.id,
                                e.host,
                                e.view,
                                e.text_hash,
                                self._dim,
                                ords[n],
                                unit[row],
                            )
                        )
        for graph in sorted({graph_of(e.part, self._grouped) for e in entries}):  # also one written under another
            self._ensure_graph(graph)  # kind or layout before
        self._refresh_counts()
        return SyncReport(written=len(write), removed=len(remove), kept=kept)

    # ------------------------------------------------------------------ queries
    def _search(self, sql: str, params: Sequence[Any], approximate: bool, limit: int) -> list[tuple[Any, ...]]:
        store = self._store
        if not approximate or self._ef_search == DEFAULT_EF_SEARCH:
            return store._rows(sql, params)  # the pool set the session's HNSW settings when it opened the connection
        with store.transaction():
            store._exec("SELECT set_config('hnsw.ef_search', %s, true)", (str(self._ef_search),))
            return store._rows(sql, params)

    def _approx_dist(self) -> str:
        """The distance expression that matches the parts' HNSW indices (so the planner uses them)."""
        return f"vec::{self._kind}({self._dim}) <=> %b::vector::{self._kind}({self._dim})"

    def top_k(
        self, part: str, qvec: npt.NDArray[np.floating], k: int, allowed: Sequence[str] | None = None
    ) -> list[Hit]:
        if k <= 0 or self.count(part) == 0:
            return []
        q = query_vector(qvec, self._dim)
        where = f"{_SCOPE} AND part = {_part_sql(part)} AND dim = {self._dim}"
        params: list[Any] = [*self._key]
        if allowed is not None:
            where += " AND id = ANY(%s)"
            params.append(list(allowed))
        approximate = allowed is None and self.count(part) >= self._exact_below
        dist = self._approx_dist() if approximate else "vec <=> %b"
        order = dist if approximate else f"{dist}, ord"  # a tie-breaker would keep the planner off the HNSW index
        rows = self._search(
            f"SELECT id, 1 - ({dist}) AS score, ord FROM vector_index WHERE {where} ORDER BY {order} LIMIT {int(k)}",
            [q, *params, q],
            approximate,
            k,
        )
        # ties as the in-process backend breaks them: by the entry's place in its part
        return [Hit(str(i), float(s)) for i, s, _ in sorted(rows, key=lambda r: (-float(r[1]), int(r[2])))]

    def top_hosts(
        self, parts: Sequence[str], qvec: npt.NDArray[np.floating], k: int, allowed: Sequence[str] | None = None
    ) -> list[HostHit]:
        size = sum(self.count(p) for p in parts)
        if k <= 0 or size == 0:
            return []
        q = query_vector(qvec, self._dim)
        if allowed is not None or size < self._exact_below:
            # ties as in process: the first listed part, then the place in the part (hosts' rows are contiguous there)
            listed = "CASE part " + " ".join(f"WHEN {_part_sql(x)} THEN {n}" for n, x in enumerate(parts)) + " END"
            where = f"{_SCOPE} AND part IN ({', '.join(_part_sql(p) for p in parts)}) AND dim = {self._dim}"
            params: list[Any] = [*self._key]
            if allowed is not None:
                where += " AND host = ANY(%s)"
                params.append(list(allowed))
            rows = self._search(
                "SELECT host, part, view, score FROM (SELECT DISTINCT ON (host) host, part, view, ord, "
                f"1 - (vec <=> %b) AS score FROM vector_index WHERE {where} "
                f"ORDER BY host, vec <=> %b, {listed}, ord) best ORDER BY score DESC, ord LIMIT %s",
                [q, *params, q, k],
                False,
                k,
            )
            return [HostHit(str(h), float(s), str(p), str(v)) for h, p, v, s in rows]
        # Approximate, one scan per HNSW graph (parts of a group share one, GROUPS): a host in the overall top k is in
        # the top k of the graph that gave its max, so merging the graphs' top k by host is exact up to recall.
        by_graph: dict[tuple[str, ...], list[str]] = {}
        for part in parts:
            by_graph.setdefault(graph_of(part, self._grouped), []).append(part)
        best: dict[str, HostHit] = {}
        for members in by_graph.values():
            for hit in self._graph_hosts(members, q, k):
                if hit.host not in best or hit.score > best[hit.host].score:
                    best[hit.host] = hit
        return sorted(best.values(), key=lambda x: (-x.score, x.host))[:k]

    def _graph_hosts(self, parts: Sequence[str], q: npt.NDArray[np.float32], k: int) -> list[HostHit]:
        """The k best hosts over ``parts`` (of one HNSW graph) through that graph: nearest views, grouped by host,
        widened until k distinct hosts are found."""
        size = sum(self.count(p) for p in parts)
        if size == 0:
            return []
        dist = self._approx_dist()
        where = f"{_SCOPE} AND {_parts_sql(parts)} AND dim = {self._dim}"
        limit = max(2 * k, 32)
        while True:
            rows = self._search(
                f"SELECT host, part, view, 1 - ({dist}) AS score FROM vector_index WHERE {where} "
                f"ORDER BY {dist} LIMIT {limit}",
                [q, *self._key, q],
                True,
                limit,
            )
            best: dict[str, HostHit] = {}
            for h, p, v, s in rows:
                if str(h) not in best or float(s) > best[str(h)].score:
                    best[str(h)] = HostHit(str(h), float(s), str(p), str(v))
            if len(best) >= k or len(rows) < limit or limit >= size:
                return sorted(best.values(), key=lambda x: (-x.score, x.host))[:k]
            limit *= 2
