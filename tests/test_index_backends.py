"""The vector index backends (in-process and pgvector) answer the protocol's two queries identically to a brute-force
reference, update incrementally, and keep spaces apart."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import numpy.typing as npt
import pytest

from tmem.index.backend import Entry, MemoryVectorIndex, VectorIndex, view_part
from tmem.scope import Scope
from tmem.store.base import Store

DIM = 16
ENTITY, BRIDGE = view_part("entity"), view_part("bridge")


def _corpus(seed: int, n_items: int = 60) -> tuple[list[Entry], npt.NDArray[np.float32]]:
    rng = np.random.default_rng(seed)
    entries: list[Entry] = []
    for n in range(n_items):
        entries.append(Entry("item", f"i{n:03d}", f"i{n:03d}", "", f"h-item-{n}"))
        for v, part in enumerate((ENTITY, ENTITY, BRIDGE)):
            if (n + v) % 5:  # some items lack some views
                entries.append(Entry(part, f"t{n:03d}:{v}", f"i{n:03d}", f"view{v}", f"h-{n}-{v}"))
    vectors = rng.normal(size=(len(entries), DIM)).astype(np.float32)
    return entries, vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def _exact_hosts(
    entries: list[Entry], vectors: npt.NDArray[np.float32], parts: set[str], q: npt.NDArray[np.float32], k: int
) -> list[tuple[str, float]]:
    best: dict[str, float] = {}
    for e, v in zip(entries, vectors, strict=True):
        if e.part in parts:
            best[e.host] = max(best.get(e.host, -2.0), float(v @ q))
    return sorted(best.items(), key=lambda x: (-x[1], x[0]))[:k]


@pytest.fixture(params=["memory", pytest.param("pgvector", marks=pytest.mark.postgres)])
def make_index(request: pytest.FixtureRequest) -> Iterator[tuple[str, object]]:
    if request.param == "memory":
        yield "memory", None
        return
    from tmem.store.postgres import PostgresStore

    store = PostgresStore.open(request.getfixturevalue("pg_url"))
    yield "pgvector", store
    store.close()


def _index(kind: tuple[str, object], space: str, exact_below: int = 20_000) -> VectorIndex:
    name, store = kind
    if name == "memory":
        return MemoryVectorIndex(DIM)
    from tmem.index.pgvector import PgVectorIndex
    from tmem.store.postgres import PostgresStore

    assert isinstance(store, PostgresStore)
    store.ensure_space(Scope.local(space))
    return PgVectorIndex(store, Scope.local(space), "test-model", DIM, exact_below=exact_below)


def test_queries_match_brute_force(make_index: tuple[str, object]) -> None:
    entries, vectors = _corpus(1)
    index = _index(make_index, "a")
    report = index.sync(entries, vectors)
    assert (report.written, report.removed, report.kept) == (len(entries), 0, 0)
    q = vectors[5] + 0.1 * vectors[40]
    q = q / np.linalg.norm(q)
    items = [(e, v) for e, v in zip(entries, vectors, strict=True) if e.part == "item"]
    exact = sorted(((e.id, float(v @ q)) for e, v in items), key=lambda x: (-x[1], x[0]))
    got = index.top_k("item", q, 10)
    assert [h.id for h in got] == [i for i, _ in exact[:10]]
    assert np.allclose([h.score for h in got], [s for _, s in exact[:10]], atol=1e-5)
    allowed = [e.id for e, _ in items[::3]]
    got = index.top_k("item", q, 5, allowed)
    assert [h.id for h in got] == [i for i, _ in exact if i in set(allowed)][:5]
    hosts = index.top_hosts([ENTITY, BRIDGE], q, 7)
    ref = _exact_hosts(entries, vectors, {ENTITY, BRIDGE}, q, 7)
    assert [h.host for h in hosts] == [h for h, _ in ref]
    assert np.allclose([h.score for h in hosts], [s for _, s in ref], atol=1e-5)
    for h in hosts:  # the part and view named are the ones that gave the max
        (e,) = [e for e in entries if e.host == h.host and e.part == h.part and e.view == h.view]
        assert abs(float(vectors[entries.index(e)] @ q) - h.score) < 1e-5
    only = {ref[3][0], ref[5][0]}
    assert {h.host for h in index.top_hosts([ENTITY, BRIDGE], q, 7, sorted(only))} == only
    assert index.top_k("scene", q, 5) == [] and index.top_hosts([view_part("horizon")], q, 5) == []


def test_sync_is_incremental(make_index: tuple[str, object]) -> None:
    entries, vectors = _corpus(2)
    index = _index(make_index, "a")
    index.sync(entries, vectors)
    changed = Entry(entries[0].part, entries[0].id, entries[0].host, "", "new-hash")
    new = Entry("item", "i999", "i999", "", "h-new")
    rest = entries[2:]  # entries[1] is gone
    fresh = np.full(DIM, 0.25, dtype=np.float32)  # unit length, unlike any random corpus vector
    moved = np.vstack([vectors[1], vectors[2:], fresh]).astype(np.float32)
    report = index.sync([changed, *rest, new], moved)
    assert (report.written, report.removed, report.kept) == (2, 1, len(rest))
    assert index.known()[("item", "i999")] == "h-new" and (entries[1].part, entries[1].id) not in index.known()
    assert index.top_k("item", fresh, 1)[0].id == "i999"
    assert index.top_k("item", vectors[1], 1)[0].id == entries[0].id  # re-embedded with entries[1]'s vector
    assert index.count("item") == sum(1 for e in [changed, *rest, new] if e.part == "item")


def test_pgvector_keeps_spaces_apart_and_goes_with_its_space(pg_url: str) -> None:
    from tmem.index.pgvector import PgVectorIndex
    from tmem.store.postgres import PostgresStore

    store = PostgresStore.open(pg_url)
    entries, vectors = _corpus(3, n_items=10)
    for space in ("acme/a", "b"):
        store.ensure_space(Scope.local(space))
        PgVectorIndex(store, Scope.local(space), "m", DIM).sync(entries, vectors)
    a = PgVectorIndex(store, Scope.local("acme/a"), "m", DIM)
    a.sync(entries[:5], vectors[:5])
    assert a.count("item") < PgVectorIndex(store, Scope.local("b"), "m", DIM).count("item")
    assert PgVectorIndex(store, Scope.local("acme/a"), "other-model", DIM).count("item") == 0  # per embedder
    store.delete_space(Scope.local("b"))
    assert store._rows("SELECT COUNT(*) FROM vector_index WHERE space = 'b'") == [(0,)]
    store.close()


def _plan(store: Store, sql: str, param: object) -> str:
    with store.transaction():  # a small table is cheaper to scan: ask whether the index CAN serve the query
        store._exec("SET LOCAL enable_seqscan = off")  # type: ignore[attr-defined]
        return "\n".join(r[0] for r in store._rows("EXPLAIN " + sql, (param,)))  # type: ignore[attr-defined]


@pytest.mark.postgres
@pytest.mark.parametrize(("halfvec", "grouped"), [(False, False), (True, False), (True, True)])
def test_pgvector_hnsw_recall_against_exact(pg_url: str, halfvec: bool, grouped: bool) -> None:
    """The approximate path (HNSW, forced by exact_below=0) finds what the exact path finds, with float4 and float2
    (halfvec) graphs, one graph per part or one joint graph of Entity and Bridge views; the planner uses the kind's
    and layout's own indices; a switch of kind or layout builds the new graphs at the next sync and drops the old."""
    from tmem.index.pgvector import PgVectorIndex
    from tmem.store.postgres import PostgresStore

    store = PostgresStore.open(pg_url)
    store.ensure_space(Scope.local("a"))
    entries, vectors = _corpus(4, n_items=600)
    PgVectorIndex(store, Scope.local("a"), "m", DIM, exact_below=0, halfvec=not halfvec, grouped=not grouped).sync(
        entries, vectors
    )
    approx = PgVectorIndex(store, Scope.local("a"), "m", DIM, exact_below=0, halfvec=halfvec, grouped=grouped)
    approx.sync(entries, vectors)
    h = "h" if halfvec else ""
    names = {r[0] for r in store._rows("SELECT indexname FROM pg_indexes WHERE tablename LIKE 'vector_index'")}
    views = (
        {f"vector_index_hnsw_{h}{DIM}_views_bridge_views_entity"}
        if grouped
        else {f"vector_index_hnsw_{h}{DIM}_views_bridge", f"vector_index_hnsw_{h}{DIM}_views_entity"}
    )
    assert {n for n in names if n.startswith("vector_index_hnsw")} == {f"vector_index_hnsw_{h}{DIM}_item", *views}
    options = store._rows(
        "SELECT c.relname, c.reloptions FROM pg_class c WHERE c.relname LIKE 'vector_index_hnsw%%' AND c.relkind = 'i'"
    )
    assert {name: sorted(opts) for name, opts in options} == {
        name: ["ef_construction=128", "m=16"] for name in {f"vector_index_hnsw_{h}{DIM}_item", *views}
    }  # the build parameters measured at 1M views (HNSW_BUILD), not pgvector's default ef_construction 64
    dist = approx._approx_dist()
    item_sql = f"SELECT id FROM vector_index WHERE part = 'item' AND dim = {DIM} ORDER BY {dist} LIMIT 10"
    assert f"vector_index_hnsw_{h}{DIM}_item" in _plan(store, item_sql, vectors[0])
    views_sql = (
        f"SELECT host FROM vector_index WHERE part IN ('views.bridge', 'views.entity') AND dim = {DIM} "
        f"ORDER BY {dist} LIMIT 10"
    )
    if grouped:
        assert f"vector_index_hnsw_{h}{DIM}_views_bridge_views_entity" in _plan(store, views_sql, vectors[0])
        one_sql = f"SELECT host FROM vector_index WHERE part = 'views.entity' AND dim = {DIM} ORDER BY {dist} LIMIT 10"
        assert f"vector_index_hnsw_{h}{DIM}_views_bridge_views_entity" in _plan(store, one_sql, vectors[0])
    exact = MemoryVectorIndex(DIM)
    exact.sync(entries, vectors)
    rng = np.random.default_rng(9)
    found = total = 0
    for _ in range(20):
        q = rng.normal(size=DIM).astype(np.float32)
        for parts in ([ENTITY, BRIDGE], [ENTITY], [BRIDGE]):  # one family alone (split_item_triggers) too
            want = {h.host for h in exact.top_hosts(parts, q, 10)}
            got = approx.top_hosts(parts, q, 10)
            found += len(want & {h.host for h in got})
            total += len(want)
            assert {h.part for h in got} <= set(parts)
        want_items = {h.id for h in exact.top_k("item", q, 10)}
        found += len(want_items & {h.id for h in approx.top_k("item", q, 10)})
        total += len(want_items)
    assert found / total >= 0.95
    store.close()


def test_the_store_protocol_is_enough_to_build_an_index(store_url: str) -> None:
    """Vectors for either backend come through the store's embedding cache (one text embedded once)."""
    from tmem.store import open_store

    store: Store = open_store(store_url)
    store.ensure_space(Scope.local("a"))
    entries, vectors = _corpus(5, n_items=5)
    store.put_embeddings(Scope.local("a"), "m", {e.text_hash: v for e, v in zip(entries, vectors, strict=True)})
    cached = store.get_embeddings(Scope.local("a"), "m", [e.text_hash for e in entries])
    index = MemoryVectorIndex(DIM)
    index.sync(entries, np.stack([cached[e.text_hash] for e in entries]))
    assert index.top_k("item", vectors[0], 1)[0].id == entries[0].id
    store.close()


def test_the_store_says_where_its_vectors_live(store_url: str) -> None:
    """The index backend follows the store's capability: pgvector where the database keeps the vectors."""
    from tmem.embed.hashing import HashEmbedder
    from tmem.index.factory import open_vector_index, persistent_vectors
    from tmem.index.pgvector import PgVectorIndex
    from tmem.scope import Scope
    from tmem.store import open_store

    store: Store = open_store(store_url)
    store.ensure_space(Scope.local("a"))
    host = store.vector_host()
    in_database = store_url.startswith("postgresql")
    assert (host is store) == in_database and (host is None) != in_database
    assert persistent_vectors(store) == in_database
    index = open_vector_index(store, Scope.local("a"), HashEmbedder(DIM))
    assert isinstance(index, PgVectorIndex if in_database else MemoryVectorIndex)
    store.close()


def test_exact_ties_follow_entry_order_on_both_backends(make_index: tuple[str, object]) -> None:
    """Equal cosines are ranked by the entries' order (node order in a space; views listed in the order of their
    hosts, as SpaceIndex lists them), also after a sync that reorders them, so that both backends rank a space
    alike."""
    v = np.zeros(DIM, dtype=np.float32)
    v[0] = 1.0
    other = np.zeros(DIM, dtype=np.float32)
    other[1] = 1.0
    entries = [Entry("item", i, i, "", "h") for i in ("c", "a", "b")]
    entries += [Entry(ENTITY, f"{h}:0", h, "concept", "h") for h in ("c", "a", "b")]
    entries += [Entry(BRIDGE, f"{h}:1", h, "bridge", "h") for h in ("c", "a", "b")]
    index = _index(make_index, "ties")
    index.sync(entries, np.stack([v] * len(entries)))
    assert [h.id for h in index.top_k("item", v, 3)] == ["c", "a", "b"]
    assert [h.id for h in index.top_k("item", v, 2, ["b", "a"])] == ["a", "b"]
    assert [(h.host, h.part) for h in index.top_hosts([ENTITY, BRIDGE], v, 3)] == [
        ("c", ENTITY),
        ("a", ENTITY),
        ("b", ENTITY),
    ]
    reordered = [entries[2], entries[0], entries[1], Entry("item", "d", "d", "", "h"), *entries[3:]]
    vectors = np.stack([v, v, v, other] + [v] * (len(entries) - 3))
    index.sync(reordered, vectors)
    assert [h.id for h in index.top_k("item", v, 4)] == ["b", "c", "a", "d"]


def _recall(exact: MemoryVectorIndex, approx: MemoryVectorIndex, seed: int, n: int = 20) -> float:
    rng = np.random.default_rng(seed)
    found = total = 0
    for _ in range(n):
        q = rng.normal(size=DIM).astype(np.float32)
        q /= np.linalg.norm(q)
        want = {h.host for h in exact.top_hosts([ENTITY, BRIDGE], q, 10)}
        found += len(want & {h.host for h in approx.top_hosts([ENTITY, BRIDGE], q, 10)})
        want_items = {h.id for h in exact.top_k("item", q, 10)}
        found += len(want_items & {h.id for h in approx.top_k("item", q, 10)})
        total += len(want) + len(want_items)
    return found / total


def test_in_process_approximate_parts_find_what_exact_finds() -> None:
    """Parts at or over ``approx_above`` go to an IVF over float16 vectors: it finds the exact answers (recall), its
    scores are the cosines within the codes' error, the part and view it names gave that score, and a filtered search
    stays inside its allowed ids."""
    entries, vectors = _corpus(4, n_items=600)
    exact = MemoryVectorIndex(DIM, approx_above=None)
    exact.sync(entries, vectors)
    approx = MemoryVectorIndex(DIM, approx_above=1)
    approx.sync(entries, vectors)
    assert sorted(approx.approximate_parts) == sorted({e.part for e in entries}) and approx.matrix.shape[0] == 0
    assert approx.nbytes < exact.nbytes and approx.known() == exact.known()
    assert _recall(exact, approx, seed=9) >= 0.95
    q = vectors[7]
    by_key = {(e.part, e.host, e.view): n for n, e in enumerate(entries)}
    for h in approx.top_hosts([ENTITY, BRIDGE], q, 10):
        assert abs(float(vectors[by_key[(h.part, h.host, h.view)]] @ q) - h.score) < 0.02
    got = approx.top_k("item", q, 5)
    assert got[0].id == entries[7].host and abs(got[0].score - float(vectors[7] @ q)) < 0.02
    allowed = [e.id for e in entries if e.part == "item"][::7]
    want = [h.id for h in exact.top_k("item", q, 4, allowed)]
    assert [h.id for h in approx.top_k("item", q, 4, allowed)] == want
    hosts = sorted({e.host for e in entries})[::9]
    assert {h.host for h in approx.top_hosts([ENTITY, BRIDGE], q, 50, hosts)} <= set(hosts)
    assert approx.top_k("scene", q, 5) == [] and approx.top_hosts([view_part("horizon")], q, 5) == []


def test_in_process_approximate_parts_update_incrementally() -> None:
    """A part crosses the threshold (built from the exact rows kept), grows past twice its training size (retrained
    from its decoded vectors), loses and re-texts entries, shrinks under half its training size (retrained), and
    turns exact again under half the threshold: each step answers like an exact index of the same entries."""
    entries, vectors = _corpus(6, n_items=500)
    rolling = MemoryVectorIndex(DIM, approx_above=120)
    steps = ((60, False), (150, True), (500, True), (400, True), (100, True), (50, False))
    for step, (cut, approximate) in enumerate(steps):
        keep = [n for n, e in enumerate(entries) if int(e.host[1:]) < cut]
        sub = [entries[n] for n in keep]
        vecs = vectors[keep].copy()
        if step == 3:  # re-text one item: a new vector under the same id
            sub[0] = Entry(sub[0].part, sub[0].id, sub[0].host, "", "re-texted")
            vecs[0] = vectors[-1]
        before = rolling.known()
        report = rolling.sync(sub, vecs)
        assert report.written == sum(1 for e in sub if before.get((e.part, e.id)) != e.text_hash)
        assert rolling.known() == {(e.part, e.id): e.text_hash for e in sub}
        assert rolling.count("item") == sum(1 for e in sub if e.part == "item")
        exact = MemoryVectorIndex(DIM, approx_above=None)
        exact.sync(sub, vecs)
        assert _recall(exact, rolling, seed=step) >= 0.95
        assert ("item" in rolling.approximate_parts) == approximate
        if step == 3:
            assert rolling.top_k("item", vectors[-1], 1)[0].id == entries[0].id


def test_in_process_approximate_parts_follow_a_new_host_or_view() -> None:
    """An entry that keeps its text but moves to another host (or view) is reported under the new one, also when a
    host loses every view, as on the exact path."""
    entries, vectors = _corpus(7, n_items=300)
    index = MemoryVectorIndex(DIM, approx_above=50)
    index.sync(entries, vectors)
    gone = entries[1].host  # every view of this host moves to a new host "moved"
    moved = [
        Entry(e.part, e.id, "moved", "renamed", e.text_hash) if e.host == gone and e.part != "item" else e
        for e in entries
    ]
    n = next(n for n, e in enumerate(moved) if e.host == "moved")
    report = index.sync(moved, np.zeros_like(vectors))  # nothing re-texted: no vector is read
    assert report.written == 0
    hit = index.top_hosts([ENTITY, BRIDGE], vectors[n], 1)[0]
    assert (hit.host, hit.view) == ("moved", "renamed")
    assert [h.host for h in index.top_hosts([ENTITY, BRIDGE], vectors[n], 3, ["moved"])] == ["moved"]
    assert gone not in {h.host for h in index.top_hosts([ENTITY, BRIDGE], vectors[n], 20)}
