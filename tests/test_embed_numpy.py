"""The torch-free query encoder: the same vectors as sentence-transformers, and a query needs no torch at all."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tmem.embed.numpy_encoder import NumpyBertEncoder, numpy_encoder, read_safetensors, supported
from tmem.embed.sentence import QUERY_BATCH, SentenceTransformerEmbedder, resolve_model
from tmem.errors import EmbeddingError
from tmem.settings import Settings

SRC = str(Path(__file__).resolve().parents[1] / "src")
MODEL = Path(resolve_model("all-MiniLM-L6-v2")[0])


@pytest.fixture(scope="module")
def encoders() -> tuple[NumpyBertEncoder, SentenceTransformerEmbedder]:
    fast = numpy_encoder(str(MODEL))
    assert fast is not None
    return fast, SentenceTransformerEmbedder(numpy_queries=False)


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.asarray((a * b).sum(axis=1))


def test_the_numpy_encoder_gives_sentence_transformers_vectors(
    encoders: tuple[NumpyBertEncoder, SentenceTransformerEmbedder],
) -> None:
    fast, torch_path = encoders
    texts = [
        "Where did Caroline go last week?",
        "",
        "Émigré café naïve résumé; 日本語 текст 😀",
        "word " * 600,  # longer than the model's 256 tokens: truncated the same way
        "A",
    ]
    ours = fast.encode(texts)
    theirs = torch_path.embed(texts).vectors
    assert ours.shape == theirs.shape == (5, 384) and ours.dtype == np.float32
    assert _cosines(ours, theirs).min() > 0.99999
    assert np.abs(ours - theirs).max() < 1e-4


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(text=st.text(min_size=0, max_size=300))
def test_any_text_encodes_the_same(encoders: tuple[NumpyBertEncoder, SentenceTransformerEmbedder], text: str) -> None:
    fast, torch_path = encoders
    ours, theirs = fast.encode([text]), torch_path.embed([text]).vectors
    assert _cosines(ours, theirs)[0] > 0.99999


def test_the_embedder_uses_it_for_queries_only(encoders: tuple[NumpyBertEncoder, SentenceTransformerEmbedder]) -> None:
    emb = SentenceTransformerEmbedder()
    assert emb.dim == 384
    query = emb.embed(["Where did Caroline go?"]).vectors
    assert emb._numpy is not None and emb._numpy is not False  # the numpy path answered
    batch = emb.embed([f"turn {n}" for n in range(QUERY_BATCH + 1)]).vectors  # a build batch: torch
    assert batch.shape == (QUERY_BATCH + 1, 384)
    assert _cosines(query, encoders[1].embed(["Where did Caroline go?"]).vectors)[0] > 0.99999
    assert not Settings(embed_numpy_queries=False).embed_numpy_queries


def test_a_query_in_a_fresh_process_never_imports_torch() -> None:
    """What makes `tmem search` answer at once: encoding a query loads neither torch nor sentence-transformers."""
    code = (
        "import sys; from tmem.embed.sentence import SentenceTransformerEmbedder; "
        "v = SentenceTransformerEmbedder().embed(['where did she go?']).vectors; "
        "print(v.shape, sorted(m for m in ('torch', 'sentence_transformers', 'transformers') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env={"PYTHONPATH": SRC, "PATH": ""}, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "(1, 384) []"


def test_unsupported_folders_fall_back_to_torch(tmp_path: Path) -> None:
    assert supported(MODEL)
    assert not supported(tmp_path)  # nothing there
    for name in ("modules.json", "config.json", "sentence_bert_config.json", "tokenizer.json"):
        (tmp_path / name).write_bytes((MODEL / name).read_bytes())
    (tmp_path / "1_Pooling").mkdir()
    pooling = json.loads((MODEL / "1_Pooling" / "config.json").read_text())
    (tmp_path / "1_Pooling" / "config.json").write_text(json.dumps({**pooling, "pooling_mode_cls_token": True}))
    (tmp_path / "model.safetensors").write_bytes(b"")
    assert not supported(tmp_path)  # CLS pooling is not computed here
    (tmp_path / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
    assert supported(tmp_path)
    config = json.loads((MODEL / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "hidden_act": "relu"}))
    assert not supported(tmp_path) and numpy_encoder(str(tmp_path)) is None


def test_safetensors_reader(tmp_path: Path) -> None:
    weights = read_safetensors(MODEL / "model.safetensors")
    assert weights["embeddings.word_embeddings.weight"].shape == (30522, 384)
    header = json.dumps({"x": {"dtype": "BF16", "shape": [1], "data_offsets": [0, 2]}}).encode()
    odd = tmp_path / "odd.safetensors"
    odd.write_bytes(len(header).to_bytes(8, "little") + header + b"\0\0")
    with pytest.raises(EmbeddingError, match="BF16"):
        read_safetensors(odd)
