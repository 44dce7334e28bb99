"""The query encoder's thread setting: applied to query-sized calls only, restored afterwards, set from Settings."""

from __future__ import annotations

import pytest
import torch

from tmem.embed import make_embedder
from tmem.embed.sentence import QUERY_BATCH, SentenceTransformerEmbedder, torch_threads
from tmem.settings import Settings


def test_torch_threads_switches_and_restores() -> None:
    before = torch.get_num_threads()
    target = 1 if before != 1 else 2
    with torch_threads(target):
        assert torch.get_num_threads() == target
    assert torch.get_num_threads() == before
    with torch_threads(None):
        assert torch.get_num_threads() == before


def test_query_threads_apply_to_queries(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int] = []
    emb = SentenceTransformerEmbedder(query_threads=1, numpy_queries=False)  # queries through torch, as before
    model = emb._model()
    real = model.encode

    def spy(*args: object, **kwargs: object) -> object:
        seen.append(torch.get_num_threads())
        return real(*args, **kwargs)

    monkeypatch.setattr(model, "encode", spy)
    before = torch.get_num_threads()
    vec = emb.embed(["Where did Caroline go?"]).vectors
    assert vec.shape == (1, 384)
    emb.embed([f"text {n}" for n in range(QUERY_BATCH + 1)])  # a build-sized batch keeps torch's default
    assert seen == [1, before]
    assert torch.get_num_threads() == before


def test_setting_reaches_the_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings().embed_threads == 1
    monkeypatch.setenv("TMEM_EMBED_THREADS", "0")
    emb = make_embedder(Settings())
    assert isinstance(emb, SentenceTransformerEmbedder) and emb.query_threads is None
    monkeypatch.setenv("TMEM_EMBED_THREADS", "3")
    emb = make_embedder(Settings())
    assert isinstance(emb, SentenceTransformerEmbedder) and emb.query_threads == 3
    with pytest.raises(ValueError, match="query_threads"):
        SentenceTransformerEmbedder(query_threads=-1)
