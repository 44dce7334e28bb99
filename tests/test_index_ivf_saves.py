"""Saved IVF parts (tmem.index.ivf_saves): a fresh in-process index restores its approximate parts from disk instead
of reading and training them, answers exactly like the index that saved them, and falls back to a full load when a
save is missing, damaged or of other entries; dropping a space's saved indices removes its IVF saves."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from tests.test_retrieve_fixtures import SPACE, CountingEmbedder, make_store
from tmem.index.backend import Hit, HostHit, MemoryVectorIndex, view_part
from tmem.index.ivf_saves import IvfSaves, space_folder
from tmem.index.lexical import LexicalStore
from tmem.index.space import SpaceIndex, cached_vectorizer, index_space, load_space
from tmem.scope import Scope

PARTS = ("topic", "scene", "item", "turn")


def _load(root: Path, embedded: list[int]) -> tuple[SpaceIndex, IvfSaves]:
    store = make_store()
    embedder = CountingEmbedder()
    inner = cached_vectorizer(store, Scope.local(SPACE), embedder)

    def vectorize(texts: Sequence[str]) -> npt.NDArray[np.float32]:
        embedded.append(len(texts))
        return inner(texts)

    saves = IvfSaves(root, Scope.local(SPACE), embedder.model_id)
    index = index_space(
        load_space(store, Scope.local(SPACE)), MemoryVectorIndex(embedder.dim, approx_above=1), vectorize, saves=saves
    )
    store.close()
    return index, saves


def _answers(index: SpaceIndex) -> list[list[Hit] | list[HostHit]]:
    rng = np.random.default_rng(3)
    out: list[list[Hit] | list[HostHit]] = []
    for _ in range(5):
        q = rng.normal(size=index.vectors.dim).astype(np.float32)
        q /= np.linalg.norm(q)
        out += [index.vectors.top_k(part, q, 5) for part in PARTS]
        out.append(index.vectors.top_hosts([view_part("entity"), view_part("bridge")], q, 5))
    return out


def _scores(index: SpaceIndex) -> list[list[float]]:
    """The answers' scores only: a part trained again may order equal cosines otherwise (faiss's k-means sums in
    threads), so a rebuilt part is compared by what it found, not by the order of ties."""
    return [[round(h.score, 4) for h in hits] for hits in _answers(index)]


def test_a_fresh_index_restores_its_saved_parts(tmp_path: Path) -> None:
    first_embedded: list[int] = []
    first, saves = _load(tmp_path, first_embedded)
    assert isinstance(first.vectors, MemoryVectorIndex)
    parts = first.vectors.approximate_parts
    assert len(parts) >= 4 and saves.saves == len(parts) and saves.loads == 0 and sum(first_embedded) > 0
    embedded: list[int] = []
    second, again = _load(tmp_path, embedded)
    assert again.loads == len(parts) and again.saves == 0
    assert sum(embedded) == 0  # nothing read from the store's vectors or embedded: every part came from its save
    assert _answers(second) == _answers(first)


def test_a_damaged_or_foreign_save_costs_a_full_load(tmp_path: Path) -> None:
    _load(tmp_path, [])
    damaged = sorted(space_folder(tmp_path, Scope.local(SPACE)).glob("*/*/ivf.faiss"))[0]
    damaged.write_bytes(damaged.read_bytes()[:100])
    embedded: list[int] = []
    index, saves = _load(tmp_path, embedded)
    assert saves.loads == len(index.vectors.approximate_parts) - 1 and saves.saves == 1 and sum(embedded) > 0
    items = [e for e in index.entries if e.part == "item"]  # part order: one entry per host, in entry order
    assert saves.load(index.vectors.dim, "item", items) is not None
    assert saves.load(index.vectors.dim, "item", items[1:]) is None  # other entries: another digest
    other = IvfSaves(tmp_path, Scope.local(SPACE), "another-model")  # another embedder's vectors are never taken
    assert other.load(index.vectors.dim, "item", items) is None


def test_dropping_a_space_removes_its_ivf_saves(tmp_path: Path) -> None:
    _load(tmp_path, [])
    assert space_folder(tmp_path, Scope.local(SPACE)).is_dir()
    LexicalStore(tmp_path).drop(Scope.local(SPACE))
    assert not space_folder(tmp_path, Scope.local(SPACE)).exists()


def test_a_save_with_bad_metadata_or_keys_costs_a_full_load(tmp_path: Path) -> None:
    first, _ = _load(tmp_path, [])
    folders = sorted(p.parent for p in space_folder(tmp_path, Scope.local(SPACE)).glob("*/*/ivf.faiss"))
    (folders[0] / "complete.json").write_text('{"part": "x"}', encoding="utf-8")  # no trained_on
    np.save(folders[1] / "keys.npy", np.zeros(len(np.load(folders[1] / "keys.npy")), dtype=np.int64))  # repeated
    embedded: list[int] = []
    index, saves = _load(tmp_path, embedded)
    assert saves.loads == len(index.vectors.approximate_parts) - 2 and saves.saves == 2 and sum(embedded) > 0
    assert _scores(index) == _scores(first)
