"""Embeddings from any OpenAI-compatible ``/v1/embeddings`` endpoint (OpenAI, vLLM, Ollama, LM Studio, ...).

Inputs are sent in batches; vectors come back in input order (the response's ``index`` decides, not its order) and
are L2-normalised here, since not every server normalises. Retries of transient failures are the SDK's own
(``max_retries``); whatever still fails becomes an EmbeddingError saying what to check.

The ``openai`` SDK is imported when an embedder is created, not with this module: it takes about half a second to
import, and ``import tmem`` (every CLI command) should not pay for a backend it may never use.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from tmem.embed.base import EmbeddingResult, Matrix, clip_texts
from tmem.errors import EmbeddingError

if TYPE_CHECKING:
    import openai

# Local servers (Ollama, vLLM, llama.cpp) ignore the key, but the SDK insists on one.
_NO_KEY = "no-key"


def normalise_rows(vectors: Matrix) -> Matrix:
    """Divide each row by its L2 norm; an all-zero row is an error (it cannot be compared)."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    if vectors.shape[0] and float(norms.min()) == 0.0:
        raise EmbeddingError("The embedding endpoint returned an all-zero vector; check the model it serves.")
    out: Matrix = (vectors / norms).astype(np.float32)
    return out


# OpenAI's embedding models read at most 8,191 tokens; 8,000 characters stay under it even for scripts that spend a
# token or more per character.
REMOTE_MAX_CHARS = 8_000


class OpenAIEmbedder:
    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        batch_size: int = 128,
        timeout: float = 60.0,
        max_retries: int = 3,
        dim: int | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self._model = model
        self._base_url = base_url
        self._batch_size = batch_size
        self._dim = dim
        import openai

        self._client: openai.OpenAI = openai.OpenAI(
            api_key=api_key or _NO_KEY, base_url=base_url, timeout=timeout, max_retries=max_retries
        )

    @property
    def model_id(self) -> str:
        return f"openai:{self._model}"

    @property
    def dim(self) -> int:
        """The vector size; asked of the endpoint with one short probe when not given to the constructor."""
        if self._dim is None:
            self._dim = int(self._request(["dimension probe"]).shape[1])
        return self._dim

    def _request(self, batch: list[str]) -> Matrix:
        import openai

        try:
            response = self._client.embeddings.create(model=self._model, input=batch, encoding_format="float")
        except openai.OpenAIError as exc:
            where = self._base_url or "the default OpenAI endpoint"
            raise EmbeddingError(
                f"The embeddings endpoint {where} failed for model {self._model!r}: {exc}. Check "
                "TMEM_EMBED_BASE_URL, the API key and TMEM_EMBED_MODEL."
            ) from exc
        rows = sorted(response.data, key=lambda d: d.index)
        if len(rows) != len(batch) or [d.index for d in rows] != list(range(len(batch))):
            raise EmbeddingError(
                f"The embeddings endpoint returned {len(rows)} vectors for {len(batch)} inputs; check that it "
                "supports batched input."
            )
        matrix = np.asarray([d.embedding for d in rows], dtype=np.float32)
        if matrix.ndim != 2 or matrix.shape[1] == 0:
            raise EmbeddingError("The embeddings endpoint returned vectors of no or uneven size.")
        return matrix

    def embed(self, texts: Sequence[str]) -> EmbeddingResult:
        if not texts:
            return EmbeddingResult(vectors=np.zeros((0, self.dim), dtype=np.float32), model_id=self.model_id)
        clipped = clip_texts(texts, REMOTE_MAX_CHARS, self.model_id)
        parts = [
            self._request(clipped[start : start + self._batch_size]) for start in range(0, len(texts), self._batch_size)
        ]
        widths = {p.shape[1] for p in parts}
        if len(widths) != 1 or (self._dim is not None and widths != {self._dim}):
            raise EmbeddingError(f"The embeddings endpoint returned vectors of sizes {sorted(widths)}; expected one.")
        self._dim = widths.pop()
        return EmbeddingResult(vectors=normalise_rows(np.vstack(parts)), model_id=self.model_id)
