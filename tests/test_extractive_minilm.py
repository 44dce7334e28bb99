"""The extractive build with the real default embedder (all-MiniLM-L6-v2, offline) on a slice of one dev conversation:
an incremental build equals a full one even though the two embed in different batches."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.test_extractive_build import DEV, SPACE, conversation, snapshot, store_with
from tmem.construct.check import check_space
from tmem.construct.extractive import build_extractive
from tmem.construct.extractive.segment import MAX_TURNS, MIN_TURNS
from tmem.scope import Scope

pytestmark = pytest.mark.skipif(not DEV.exists(), reason="dev data not present")


@pytest.mark.slow
async def test_real_minilm_incremental_equals_full_on_a_slice() -> None:
    from tmem.embed.sentence import SentenceTransformerEmbedder

    embedder = SentenceTransformerEmbedder()
    full = store_with(2)
    await build_extractive(full, Scope.local(SPACE), embedder=embedder)
    inc = store_with(1)
    await build_extractive(inc, Scope.local(SPACE), embedder=embedder)
    store_with(2, start=1, store=inc)
    await build_extractive(inc, Scope.local(SPACE), embedder=embedder)
    assert snapshot(inc) == snapshot(full)
    sizes = Counter(len(sc.turn_ids) for sc in full.scenes(Scope.local(SPACE)))
    session_sizes = [len(x.turns) for x in conversation().sessions[:2]]
    assert sum(n * c for n, c in sizes.items()) == sum(session_sizes)
    assert max(sizes) <= MAX_TURNS and min(sizes) >= min(MIN_TURNS, *session_sizes)
    assert check_space(full, Scope.local(SPACE)).ok
