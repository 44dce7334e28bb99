"""The optional reranker: a small protocol and its sentence-transformers CrossEncoder implementation.

The paper reranks with bge-reranker-v2-m3. No reranker weights ship with tmem and none can be downloaded here, so the
reranker is off unless a model name or local path is configured (TMEM_RERANKER_MODEL or ``--reranker``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from tmem.errors import ConfigError


class Reranker(Protocol):
    """Scores (query, text) pairs; higher is more relevant. One score per text, in order."""

    @property
    def model_id(self) -> str: ...

    def score(self, query: str, texts: Sequence[str]) -> list[float]: ...


class CrossEncoderReranker:
    """A sentence-transformers CrossEncoder, loaded on first use."""

    def __init__(self, model: str, batch_size: int = 32) -> None:
        self._name = model
        self._batch_size = batch_size
        self._model: Any = None

    @property
    def model_id(self) -> str:
        return self._name

    def _load(self) -> Any:
        if self._model is None:
            looks_local = self._name.startswith((".", "/", "~"))  # hub names never start so
            if looks_local and not Path(self._name).expanduser().exists():
                raise ConfigError(
                    f"The reranker folder {self._name!r} does not exist. Point TMEM_RERANKER_MODEL at a local "
                    "CrossEncoder folder, or unset it to search without a reranker."
                )
            from sentence_transformers import CrossEncoder

            try:
                # local_files_only: a folder or a model already in the local HF cache; the hub is never contacted.
                self._model = CrossEncoder(self._name, local_files_only=True)
            except OSError as exc:  # missing local path or no hub access: a configuration problem
                raise ConfigError(
                    f"Cannot load the reranker {self._name!r} ({exc}). Point TMEM_RERANKER_MODEL at a local "
                    "CrossEncoder folder, or unset it to search without a reranker."
                ) from exc
        return self._model

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        if not texts:
            return []
        model = self._load()
        scores = model.predict([(query, t) for t in texts], batch_size=self._batch_size, show_progress_bar=False)
        return [float(s) for s in scores]
