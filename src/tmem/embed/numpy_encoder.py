"""A query encoder without torch: the forward pass of a BERT sentence-transformers model in numpy.

Loading torch and sentence-transformers takes seconds, which made every ``tmem search`` slow although a query is a
few words (issue 19 part 5). For a query-sized call, :class:`SentenceTransformerEmbedder` encodes with this module
instead when the model folder is one it computes exactly: a ``BertModel`` (absolute positions, GELU) read from
``model.safetensors``, followed by mean pooling and normalisation - the default all-MiniLM-L6-v2 is one. The result is
the same embedding (tests/test_embed_numpy.py compares the two encoders: cosine > 0.99999); builds keep torch, which
is faster on large batches.

Each text is encoded alone (no padding, so no attention mask), truncated to the model's ``max_seq_length`` exactly as
sentence-transformers truncates. The weights are read by :func:`read_safetensors` (the format is an 8-byte header
length, a JSON header of dtype, shape and byte offsets, then the raw little-endian tensors).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from tmem.errors import EmbeddingError

F32 = npt.NDArray[np.float32]
_DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64}


def read_safetensors(path: Path) -> dict[str, npt.NDArray[Any]]:
    """Every tensor of a ``.safetensors`` file, as read-only numpy arrays over one memory map."""
    raw = np.memmap(path, dtype=np.uint8, mode="r")
    size = int.from_bytes(raw[:8].tobytes(), "little")
    header: dict[str, Any] = json.loads(raw[8 : 8 + size].tobytes())
    header.pop("__metadata__", None)
    base = 8 + size
    tensors: dict[str, npt.NDArray[Any]] = {}
    for name, spec in header.items():
        dtype = _DTYPES.get(spec["dtype"])
        if dtype is None:
            raise EmbeddingError(
                f"{path}: tensor {name} has dtype {spec['dtype']}, which the numpy encoder cannot read."
            )
        start, stop = spec["data_offsets"]
        tensors[name] = raw[base + start : base + stop].view(dtype).reshape(spec["shape"])
    return tensors


def _json(path: Path) -> Any:
    return json.loads(path.read_text())


def supported(folder: Path) -> bool:
    """Whether ``folder`` is a sentence-transformers model this encoder computes exactly."""
    try:
        modules = [m["type"].rsplit(".", 1)[-1] for m in _json(folder / "modules.json")]
        config = _json(folder / "config.json")
        pooling = _json(folder / "1_Pooling" / "config.json")
    except (OSError, ValueError, KeyError, TypeError):
        return False
    mean_only = pooling.get("pooling_mode_mean_tokens") and not any(
        v for k, v in pooling.items() if k.startswith("pooling_mode_") and k != "pooling_mode_mean_tokens"
    )
    return (
        modules == ["Transformer", "Pooling", "Normalize"]
        and bool(mean_only)
        and config.get("model_type") == "bert"
        and config.get("hidden_act") == "gelu"
        and config.get("position_embedding_type", "absolute") == "absolute"
        and (folder / "model.safetensors").is_file()
        and (folder / "tokenizer.json").is_file()
    )


def _erf(x: F32) -> F32:
    """The error function (Abramowitz & Stegun 7.1.26 in float64; absolute error below 1.5e-7)."""
    z = np.abs(x.astype(np.float64))
    t = 1.0 / (1.0 + 0.3275911 * z)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    out = 1.0 - poly * np.exp(-z * z)
    signed: F32 = (np.sign(x) * out).astype(np.float32)
    return signed


def _layer_norm(x: F32, weight: F32, bias: F32, eps: float) -> F32:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    out: F32 = (x - mean) / np.sqrt(var + eps) * weight + bias
    return out


class NumpyBertEncoder:
    """Mean-pooled, normalised embeddings of a BERT sentence-transformers folder (see :func:`supported`)."""

    def __init__(self, folder: Path) -> None:
        from tokenizers import Tokenizer

        config = _json(folder / "config.json")
        settings = (
            _json(folder / "sentence_bert_config.json") if (folder / "sentence_bert_config.json").exists() else {}
        )
        self.heads = int(config["num_attention_heads"])
        self.layers = int(config["num_hidden_layers"])
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        limit = min(int(settings.get("max_seq_length") or 512), int(config["max_position_embeddings"]))
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length=limit)
        self.max_seq_length = limit
        self.dim = int(config["hidden_size"])
        self.w = read_safetensors(folder / "model.safetensors")
        self._prefix = "" if "embeddings.word_embeddings.weight" in self.w else "bert."

    def _p(self, name: str) -> F32:
        tensor: F32 = self.w[self._prefix + name]
        return tensor

    def _dense(self, x: F32, name: str) -> F32:
        out: F32 = x @ self._p(f"{name}.weight").T + self._p(f"{name}.bias")
        return out

    def encode_one(self, text: str) -> F32:
        ids = np.asarray(self.tokenizer.encode(text).ids, dtype=np.int64)
        n = len(ids)
        x = self._p("embeddings.word_embeddings.weight")[ids]
        x = (
            x
            + self._p("embeddings.position_embeddings.weight")[:n]
            + self._p("embeddings.token_type_embeddings.weight")[0]
        )
        x = _layer_norm(x, self._p("embeddings.LayerNorm.weight"), self._p("embeddings.LayerNorm.bias"), self.eps)
        width = x.shape[1] // self.heads
        scale = np.float32(1.0 / math.sqrt(width))
        for i in range(self.layers):
            at = f"encoder.layer.{i}"
            q, k, v = (
                self._dense(x, f"{at}.attention.self.{part}").reshape(n, self.heads, width).transpose(1, 0, 2)
                for part in ("query", "key", "value")
            )
            scores = (q @ k.transpose(0, 2, 1)) * scale
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            scores /= scores.sum(axis=-1, keepdims=True)
            context = (scores @ v).transpose(1, 0, 2).reshape(n, -1)
            attended = self._dense(context, f"{at}.attention.output.dense") + x
            x = _layer_norm(
                attended,
                self._p(f"{at}.attention.output.LayerNorm.weight"),
                self._p(f"{at}.attention.output.LayerNorm.bias"),
                self.eps,
            )
            hidden = self._dense(x, f"{at}.intermediate.dense")
            hidden = hidden * np.float32(0.5) * (np.float32(1.0) + _erf(hidden / np.float32(math.sqrt(2.0))))
            x = _layer_norm(
                self._dense(hidden, f"{at}.output.dense") + x,
                self._p(f"{at}.output.LayerNorm.weight"),
                self._p(f"{at}.output.LayerNorm.bias"),
                self.eps,
            )
        pooled = x.mean(axis=0)
        norm = float(np.linalg.norm(pooled))
        out: F32 = (pooled / max(norm, 1e-12)).astype(np.float32)
        return out

    def encode(self, texts: list[str]) -> F32:
        """One row per text. BLAS runs on one thread here: the matrices of one query are small, and a thread pool
        spread over busy cores made an encode 20 times slower (0.6 s against 0.03 s, measured under load)."""
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=1, user_api="blas"):
            return np.stack([self.encode_one(t) for t in texts]).astype(np.float32)


def numpy_encoder(folder: str) -> NumpyBertEncoder | None:
    """The numpy encoder of a model folder, None when the folder is not one it computes exactly."""
    path = Path(folder)
    return NumpyBertEncoder(path) if supported(path) else None
