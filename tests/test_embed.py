"""Embedding layer: the real default model offline, the store-backed cache, the OpenAI-compatible backend."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tmem.embed import (
    CachedEmbedder,
    EmbeddingResult,
    HashEmbedder,
    OpenAIEmbedder,
    SentenceTransformerEmbedder,
    make_embedder,
)
from tmem.embed.sentence import load_sentence_transformer, resolve_model
from tmem.errors import ConfigError, EmbeddingError
from tmem.scope import Scope
from tmem.settings import Settings
from tmem.store.sqlite import SQLiteStore

# --------------------------------------------------------------------------------------------- the default model


@pytest.fixture(scope="module")
def minilm() -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder()


def test_default_model_encodes_offline(minilm: SentenceTransformerEmbedder) -> None:
    texts = ["My dog loves long walks.", "The puppy enjoys going for a stroll.", "I filed my tax return late."]
    result = minilm.embed(texts)
    assert "all-MiniLM-L6-v2" in result.model_id == minilm.model_id
    assert result.vectors.dtype == np.float32
    assert result.vectors.shape == (3, 384) and minilm.dim == 384
    np.testing.assert_allclose(np.linalg.norm(result.vectors, axis=1), 1.0, atol=1e-5)
    sims = result.vectors @ result.vectors.T
    assert sims[0, 1] > sims[0, 2] + 0.2  # a real sentence model, not a hash: paraphrase beats unrelated text
    assert minilm.embed([]).vectors.shape == (0, 384)
    # the loader cache: a second embedder of the same model reuses the loaded model
    again = SentenceTransformerEmbedder("all-MiniLM-L6-v2", batch_size=2)
    target, _ = resolve_model("all-MiniLM-L6-v2")
    assert load_sentence_transformer(target) is load_sentence_transformer(target)
    np.testing.assert_allclose(again.embed(texts).vectors, result.vectors, atol=1e-5)


def test_unloadable_model_says_how_to_fix(tmp_path: Path) -> None:
    embedder = SentenceTransformerEmbedder(str(tmp_path))  # a folder that holds no model
    with pytest.raises(EmbeddingError, match="TMEM_EMBED_MODEL"):
        embedder.embed(["hello"])


def test_loading_a_model_leaves_the_process_environment_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    with pytest.raises(EmbeddingError, match="offline"):
        SentenceTransformerEmbedder("no-such-org/no-such-model").embed(["hello"])
    assert "HF_HUB_OFFLINE" not in os.environ


# --------------------------------------------------------------------------------------------- the cache


class CountingEmbedder:
    """Wraps a real embedder and records every batch it is asked to embed."""

    def __init__(self, inner: HashEmbedder) -> None:
        self.inner = inner
        self.batches: list[list[str]] = []

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: Sequence[str]) -> EmbeddingResult:
        self.batches.append(list(texts))
        return self.inner.embed(texts)


@pytest.fixture
def store() -> Iterator[SQLiteStore]:
    s = SQLiteStore.open(":memory:")
    s.ensure_space(Scope.local("a"))
    s.ensure_space(Scope.local("b"))
    yield s
    s.close()


def test_cache_embeds_only_misses_and_keeps_order(store: SQLiteStore) -> None:
    counting = CountingEmbedder(HashEmbedder(64))
    cached = CachedEmbedder(counting, store, Scope.local("a"))
    first = cached.embed(["red apple", "green pear", "red apple"])
    assert counting.batches == [["red apple", "green pear"]]
    direct = HashEmbedder(64).embed(["red apple", "green pear", "red apple"]).vectors
    np.testing.assert_array_equal(first.vectors, direct)
    assert first.model_id == "hash-64"

    second = cached.embed(["green pear", "blue plum", "red apple", "blue plum"])
    assert counting.batches[1:] == [["blue plum"]]
    np.testing.assert_array_equal(
        second.vectors, HashEmbedder(64).embed(["green pear", "blue plum", "red apple", "blue plum"]).vectors
    )
    cached.embed(["red apple", "blue plum"])
    assert len(counting.batches) == 2  # everything cached: no call at all

    # a new process (new wrapper) over the same store pays nothing either
    again = CountingEmbedder(HashEmbedder(64))
    CachedEmbedder(again, store, Scope.local("a")).embed(["red apple", "green pear", "blue plum"])
    assert again.batches == []


def test_cache_is_per_space_and_per_model(store: SQLiteStore) -> None:
    CachedEmbedder(HashEmbedder(64), store, Scope.local("a")).embed(["red apple"])
    other_space = CountingEmbedder(HashEmbedder(64))
    CachedEmbedder(other_space, store, Scope.local("b")).embed(["red apple"])
    assert other_space.batches == [["red apple"]]
    other_model = CountingEmbedder(HashEmbedder(32))
    result = CachedEmbedder(other_model, store, Scope.local("a")).embed(["red apple"])
    assert other_model.batches == [["red apple"]] and result.vectors.shape == (1, 32)


def test_cache_of_nothing(store: SQLiteStore) -> None:
    counting = CountingEmbedder(HashEmbedder(64))
    assert CachedEmbedder(counting, store, Scope.local("a")).embed([]).vectors.shape == (0, 64)
    assert counting.batches == []


# --------------------------------------------------------------------------------------------- OpenAI-compatible


class _EmbeddingsHandler(BaseHTTPRequestHandler):
    """Answers POST /v1/embeddings with unnormalised vectors, in reverse order (the client must sort by index)."""

    requests: list[dict[str, Any]]

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), **body})  # type: ignore[attr-defined]
        if body["model"] == "missing-model":
            self._send(404, {"error": {"message": "model 'missing-model' not found", "type": "invalid_request"}})
            return
        data = [
            {"object": "embedding", "index": i, "embedding": [float(len(text)), 3.0, 4.0]}
            for i, text in enumerate(body["input"])
        ]
        self._send(200, {"object": "list", "model": body["model"], "data": data[::-1],
                         "usage": {"prompt_tokens": 1, "total_tokens": 1}})  # fmt: skip

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        raw = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        return


@pytest.fixture
def server() -> Iterator[ThreadingHTTPServer]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _EmbeddingsHandler)
    httpd.requests = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()
    thread.join()


def _url(httpd: ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{httpd.server_address[1]}/v1"


def test_openai_embedder_batches_sorts_and_normalises(server: ThreadingHTTPServer) -> None:
    embedder = OpenAIEmbedder("nomic-embed", base_url=_url(server), api_key="sk-test", batch_size=2, max_retries=0)
    texts = ["a", "bbb", "cc", "dddd", "e"]
    result = embedder.embed(texts)
    requests = server.requests  # type: ignore[attr-defined]
    assert [r["input"] for r in requests] == [["a", "bbb"], ["cc", "dddd"], ["e"]]
    assert {r["model"] for r in requests} == {"nomic-embed"}
    assert requests[0]["path"] == "/v1/embeddings" and requests[0]["auth"] == "Bearer sk-test"
    expected = np.array([[len(t), 3.0, 4.0] for t in texts], dtype=np.float32)
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    np.testing.assert_allclose(result.vectors, expected, rtol=1e-6)
    assert result.vectors.dtype == np.float32
    assert result.model_id == embedder.model_id == "openai:nomic-embed"
    assert embedder.dim == 3 and len(requests) == 3  # known from the last call, no probe


def test_openai_embedder_probes_dim_and_reports_errors(server: ThreadingHTTPServer) -> None:
    embedder = OpenAIEmbedder("nomic-embed", base_url=_url(server), max_retries=0)
    assert embedder.dim == 3
    assert server.requests[0]["auth"] == "Bearer no-key"  # type: ignore[attr-defined]
    broken = OpenAIEmbedder("missing-model", base_url=_url(server), max_retries=0)
    with pytest.raises(EmbeddingError, match=r"missing-model.*TMEM_EMBED_BASE_URL"):
        broken.embed(["hello"])


# --------------------------------------------------------------------------------------------- settings


def test_make_embedder_follows_settings(store: SQLiteStore, server: ThreadingHTTPServer) -> None:
    hashed = make_embedder(Settings(embed_backend="hash"))
    assert isinstance(hashed, HashEmbedder)
    cached = make_embedder(Settings(embed_backend="hash"), store=store, space=Scope.local("a"))
    assert isinstance(cached, CachedEmbedder) and cached.model_id == hashed.model_id
    local = make_embedder(Settings())
    assert isinstance(local, SentenceTransformerEmbedder) and "all-MiniLM-L6-v2" in local.model_id
    remote = make_embedder(Settings(embed_backend="openai", embed_model="nomic-embed", embed_base_url=_url(server)))
    assert isinstance(remote, OpenAIEmbedder) and remote.embed(["x"]).vectors.shape == (1, 3)
    with pytest.raises(ConfigError, match="TMEM_EMBED_BASE_URL"):
        make_embedder(Settings(embed_backend="openai", embed_model="nomic-embed"))
    with pytest.raises(ConfigError, match="both store and space"):
        make_embedder(Settings(embed_backend="hash"), store=store)


# --------------------------------------------------------------------------------------------- the shared stub


def test_openai_embedder_retries_transient_faults_and_cache_stops_requests(store: SQLiteStore) -> None:
    from tests.support.openai_stub import OpenAIStub, stub_vector

    with OpenAIStub(embedding_faults=["500", "429:retry-after=0"], embedding_dim=16) as stub:
        embedder = OpenAIEmbedder("stub-embed", base_url=stub.base_url, batch_size=8, max_retries=2)
        cached = CachedEmbedder(embedder, store, Scope.local("a"))
        texts = [f"turn number {n}" for n in range(10)] + ["turn number 3"]
        result = cached.embed(texts)
        statuses = [r.status for r in stub.embedding_requests]
        assert statuses == [500, 429, 200, 200]  # two transient faults retried, then 10 distinct texts in 2 batches
        expected = np.stack([stub_vector(t, 16) for t in texts])
        np.testing.assert_allclose(result.vectors, expected, atol=1e-6)
        cached.embed(list(reversed(texts)))
        assert len(stub.embedding_requests) == 4  # everything cached: no new request

    with OpenAIStub(embedding_faults=["401"]) as stub:
        denied = OpenAIEmbedder("stub-embed", base_url=stub.base_url, max_retries=2)
        with pytest.raises(EmbeddingError, match="stub-embed"):
            denied.embed(["hello"])
        assert len(stub.embedding_requests) == 1  # not transient: no retry


# --------------------------------------------------------------------------------------------- import cost


def test_import_tmem_loads_no_model_backend() -> None:
    """``import tmem`` (hence every CLI command) must not pay for the openai SDK, bm25s/scipy or torch up front."""
    import subprocess
    import sys

    heavy = ["openai", "bm25s", "scipy", "torch", "sentence_transformers"]
    code = f"import sys, tmem, tmem.cli.main; print([m for m in {heavy!r} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_wrapping_a_cached_embedder_again_adds_no_second_cache(store: SQLiteStore) -> None:
    counting = CountingEmbedder(HashEmbedder(64))
    once = CachedEmbedder(counting, store, Scope.local("a"))
    twice = CachedEmbedder(once, store, Scope.local("a"))
    assert twice.inner is counting  # one cache lookup per batch, not two
    twice.embed(["red apple"])
    assert counting.batches == [["red apple"]]
    elsewhere = CachedEmbedder(once, store, Scope.local("b"))  # another space: the inner cache must stay in the chain
    assert elsewhere.inner is once
