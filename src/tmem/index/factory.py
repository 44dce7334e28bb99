"""Which vector backend serves a space, decided in this one place from the store, and the index lifecycle: load a
space's index (reusing what a previous index of the space already holds) and bring it up to date after a build.

- SQLite (and any other store): :class:`tmem.index.backend.MemoryVectorIndex`, exact, in the searching process. The
  vectors come from the store's embedding cache; after a build only new or re-texted entries are read or embedded,
  the rest are taken over from the previous index of the space.
- PostgreSQL: :class:`tmem.index.pgvector.PgVectorIndex`: the vectors live in the database (HNSW per part), a
  searching process holds none. A build writes only its new or changed entries (:func:`refresh_space`), so a
  worker's first search after it writes nothing.
"""

from __future__ import annotations

import sys

from tqdm import tqdm

from tmem.embed.base import Embedder
from tmem.index.backend import APPROX_ABOVE, MemoryVectorIndex, SyncReport, VectorIndex, changes
from tmem.index.ivf_saves import IvfSaves
from tmem.index.lexical import LexicalStore
from tmem.index.space import SpaceIndex, SpaceRecords, cached_vectorizer, index_space, load_space, refresh_vectors
from tmem.scope import Scope
from tmem.store.base import Store


def persistent_vectors(store: Store) -> bool:
    """Whether ``store``'s spaces keep their vectors in the database (pgvector) rather than in each process."""
    return store.vector_host() is not None


def open_vector_index(
    store: Store, space: Scope, embedder: Embedder, approx_above: int | None = APPROX_ABOVE
) -> VectorIndex:
    """The vector backend for ``space`` of ``store``: pgvector with PostgreSQL, in-process otherwise (parts of
    ``approx_above`` entries or more held approximately; None: every part exact)."""
    host = store.vector_host()
    if host is not None:
        from tmem.index.pgvector import PgVectorIndex

        return PgVectorIndex(host, space, embedder.model_id, embedder.dim)
    return MemoryVectorIndex(embedder.dim, approx_above)


def _reusable(
    previous: SpaceIndex | None, store: Store, space: Scope, embedder: Embedder, approx_above: int | None
) -> VectorIndex:
    """A vector index to update for ``space``: a copy of the previous in-process one (searches running on the
    previous index keep reading it unchanged), else a fresh one of the store's backend."""
    if previous is not None and isinstance(previous.vectors, MemoryVectorIndex) and previous.dim == embedder.dim:
        return previous.vectors.copy()
    return open_vector_index(store, space, embedder, approx_above)


def load_index(
    store: Store,
    space: Scope,
    embedder: Embedder,
    previous: SpaceIndex | None = None,
    *,
    lexical: LexicalStore | None = None,
    approx_above: int | None = APPROX_ABOVE,
) -> SpaceIndex:
    """The index of ``space`` as the store holds it now. With ``previous`` (an older index of the same space, same
    embedder) the update is incremental: only entries that are new or whose text changed are embedded (through the
    store's cache) and written; removed ones are dropped. With ``lexical``, BM25 indices are loaded from (or saved
    to) that store of saved indices instead of being rebuilt, and so are the in-process index's approximate parts
    (:mod:`tmem.index.ivf_saves`, beside them). In process, parts of ``approx_above`` entries or more are held
    approximately (:class:`tmem.index.backend.MemoryVectorIndex`)."""
    records = load_space(store, space)
    vectors = _reusable(previous, store, space, embedder, approx_above)
    saves = None if lexical is None else IvfSaves(lexical.root, space, embedder.model_id)
    index = index_space(records, vectors, cached_vectorizer(store, space, embedder), lexical=lexical, saves=saves)
    index.bm25, index.turn_bm25  # noqa: B018 -- built now, once, under the caller's lock, not by the first searches
    return index


def refresh_space(
    store: Store,
    space: Scope,
    embedder: Embedder,
    records: SpaceRecords | None = None,
    *,
    progress: bool = False,
) -> SyncReport:
    """After a build (either mode): embed every text the index will hold (node texts, trigger views, turns) through
    the store's cache, so that the first search of any later process embeds only its query, and, with pgvector,
    write the new and changed entries to the database (removing the gone ones). With ``progress``, a bar on stderr
    counts the texts part by part (only those not cached yet are embedded). Returns what the backend wrote; for the
    in-process backend that is every entry of a throwaway index."""
    recs = records if records is not None else load_space(store, space)
    vectors = open_vector_index(store, space, embedder)
    if isinstance(vectors, MemoryVectorIndex):  # thrown away: only the cache fill counts, so no IVF part to train
        vectors = MemoryVectorIndex(embedder.dim, approx_above=None)
    index = SpaceIndex(recs, vectors)
    vectorize = cached_vectorizer(store, space, embedder)
    todo = len(changes(index.vectors.known(), index.entries)[0]) if progress else 0
    bar = tqdm(total=todo, desc=f"index vectors {space.key}", unit="text", file=sys.stderr, disable=not progress)

    def advance(part: str, n: int) -> None:
        bar.set_postfix_str(part, refresh=False)
        bar.update(n)

    try:
        return refresh_vectors(index.vectors, index.entries, index.entry_texts, vectorize, advance)
    finally:
        bar.close()
