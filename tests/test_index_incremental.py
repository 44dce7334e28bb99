"""Incremental index updates: after a build that adds sessions, an index updated in place (only new, changed and gone
entries touched) answers exactly like an index built from scratch, on both vector backends."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.stage_replies import SMALL_WINDOWS as OPTIONS
from tests.support.stage_replies import dev_space, scripted_reply
from tmem.construct.pipeline import build_space
from tmem.embed.hashing import HashEmbedder
from tmem.index.backend import Entry, MemoryVectorIndex, view_part
from tmem.index.factory import open_vector_index, persistent_vectors
from tmem.index.space import SpaceIndex, load_space
from tmem.ingest.importer import import_spaces
from tmem.llm.scripted import scripted_llm
from tmem.retrieve.cascade import Retriever
from tmem.retrieve.config import RetrievalConfig
from tmem.scope import Scope
from tmem.store import open_store
from tmem.store.base import Store

SPACE = "conv-30"
SESSIONS = 6
QUERIES = ("When did they go hiking?", "What does she paint?", "job interview nervous", "family dinner plans")
DIM = 8
PARTS = ("item", view_part("entity"), view_part("bridge"))


def _entries(keys: list[tuple[int, int]]) -> tuple[list[Entry], npt.NDArray[np.float32]]:
    """Entries of items ``n`` with ``views`` views each; the vector depends on (id, text version) only."""
    entries: list[Entry] = []
    rows = []
    for n, version in keys:
        entries.append(Entry("item", f"i{n}", f"i{n}", "", f"v{version}"))
        rows.append(np.random.default_rng(1000 * n + version).normal(size=DIM))
        for v in range(n % 3):
            part = PARTS[1 + v % 2]
            entries.append(Entry(part, f"t{n}:{v}", f"i{n}", f"view{v}", f"v{version}"))
            rows.append(np.random.default_rng(1000 * n + 100 * (v + 1) + version).normal(size=DIM))
    return entries, np.asarray(rows, dtype=np.float32).reshape(len(entries), DIM)


states = st.lists(
    st.dictionaries(st.integers(0, 30), st.integers(0, 2), min_size=1, max_size=25).map(lambda d: sorted(d.items())),
    min_size=2,
    max_size=5,
)


@settings(max_examples=40, deadline=None)
@given(steps=states, seed=st.integers(0, 2**16))
def test_in_process_incremental_sync_equals_a_fresh_index(steps: list[list[tuple[int, int]]], seed: int) -> None:
    rolling = MemoryVectorIndex(DIM)
    rng = np.random.default_rng(seed)
    for keys in steps:
        entries, vectors = _entries(keys)
        before = rolling.known()
        report = rolling.sync(entries, vectors)
        assert report.written == sum(1 for e in entries if before.get((e.part, e.id)) != e.text_hash)
        fresh = MemoryVectorIndex(DIM)
        fresh.sync(entries, vectors)
        assert np.array_equal(rolling.matrix, fresh.matrix)
        for _ in range(3):
            q = rng.normal(size=DIM).astype(np.float32)
            assert rolling.top_k("item", q, 7) == fresh.top_k("item", q, 7)
            assert rolling.top_hosts(PARTS[1:], q, 5) == fresh.top_hosts(PARTS[1:], q, 5)


async def _build(store: Store) -> None:
    await build_space(
        store, Scope.local(SPACE), llm=scripted_llm(store, fn=scripted_reply), embedder=HashEmbedder(), options=OPTIONS
    )


def _answers(retriever: Retriever) -> list[object]:
    cfg = RetrievalConfig.preset("paper").replace(gate=None)
    return [retriever.search(Scope.local(SPACE), q, cfg).model_dump(mode="json") for q in QUERIES]


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cuts=st.sets(st.integers(min_value=1, max_value=SESSIONS - 1), min_size=1, max_size=2).map(sorted))
async def test_a_build_updates_the_index_incrementally(cuts: list[int], store_url: str) -> None:
    """A retriever kept across builds updates its cached index from the previous one and answers like a fresh one;
    with pgvector the database holds exactly the entries of a full index of the space."""
    store = open_store(store_url)
    if store.has_space(Scope.local(SPACE)):  # hypothesis runs every example on the same database
        store.delete_space(Scope.local(SPACE))
    embedder = HashEmbedder()
    kept = Retriever(store, embedder)
    for n, (start, stop) in enumerate(zip([0, *cuts], [*cuts, SESSIONS], strict=True)):
        import_spaces(store, [dev_space(SPACE, slice(start, stop))], source="dev")
        await _build(store)
        updated = kept.index(Scope.local(SPACE))
        assert updated.synced is not None
        if n and not persistent_vectors(store):  # the previous index's vectors were taken over, not re-read
            assert updated.synced.kept > 0 and updated.synced.written < len(updated.entries)
        assert _answers(kept) == _answers(Retriever(store, embedder))
        if persistent_vectors(store):
            from tmem.index.pgvector import PgVectorIndex

            assert isinstance(updated.vectors, PgVectorIndex)  # the database serves the cascade's lookups
            full = SpaceIndex(load_space(store, Scope.local(SPACE)), MemoryVectorIndex(embedder.dim))
            held = open_vector_index(store, Scope.local(SPACE), embedder).known()
            assert held == {(e.part, e.id): e.text_hash for e in full.entries}
    store.close()
