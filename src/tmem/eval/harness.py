"""What every evaluation run shares: the memory store, building spaces, the retriever, variants, the manifest.

Memories live in the memory directory (``--dir``; by default ``OUT/memory``) and are reused: importing is
idempotent and a build only does what is missing, so a rerun of an evaluation pays nothing twice.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from collections.abc import Sequence
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from tmem.construct.options import BuildOptions
from tmem.construct.pipeline import build_space
from tmem.construct.report import BuildReport
from tmem.embed.base import Embedder, EmbeddingResult
from tmem.embed.texts import turn_embedding_text
from tmem.errors import ConfigError
from tmem.index.space import scene_text
from tmem.ingest.importer import import_spaces
from tmem.ingest.types import SpaceInput
from tmem.llm.base import LLM
from tmem.retrieve.config import SWITCHES, RetrievalConfig
from tmem.scope import Scope
from tmem.settings import Settings
from tmem.store.base import Store
from tmem.util.text import text_hash

SWEEPABLE = {"kT": "k_topics", "kS": "k_scenes", "kI": "k_items", "R": "item_trigger_top"}


class MemoEmbedder:
    """Remembers query vectors within one run, so ablation and sweep variants embed each question once."""

    def __init__(self, inner: Embedder) -> None:
        self._inner = inner
        self._memo: dict[str, np.ndarray[Any, np.dtype[np.float32]]] = {}

    @property
    def model_id(self) -> str:
        return self._inner.model_id

    @property
    def dim(self) -> int:
        return self._inner.dim

    def prime(self, texts: Sequence[str]) -> None:
        """Embed many queries in one batch (far faster than one by one on CPU)."""
        todo = list(dict.fromkeys(t for t in texts if t not in self._memo))
        if todo:
            vectors = self._inner.embed(todo).vectors
            self._memo.update(zip(todo, vectors, strict=True))

    def embed(self, texts: Sequence[str]) -> EmbeddingResult:
        if len(texts) > 8:  # index building: pass through (the index caches node vectors in the store)
            return self._inner.embed(texts)
        self.prime(texts)
        rows = [self._memo[t] for t in texts]
        matrix = np.stack(rows) if rows else np.zeros((0, self.dim), dtype=np.float32)
        return EmbeddingResult(vectors=matrix.astype(np.float32, copy=False), model_id=self.model_id)


class Variant(BaseModel):
    """One retrieval configuration evaluated in a run."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(description="'full', 'w/o HT', 'kT=5', ...")
    config: RetrievalConfig


def parse_variants(base: RetrievalConfig, ablate: str | None, sweep: Sequence[str]) -> list[Variant]:
    """``full`` first, then one variant per ablation switch (``SL,IC,ET+BT``; ``ST+HT`` removes both) and per
    sweep point (``kT=5,10,15,20``)."""
    variants = [Variant(name="full", config=base)]
    for part in [p.strip() for p in (ablate or "").split(",") if p.strip()]:
        switches = [part] if part in SWITCHES else part.split("+")
        variants.append(Variant(name=f"w/o {part}", config=base.without(*switches)))
    for spec in sweep:
        name, sep, values = spec.partition("=")
        name = name.strip()
        if not sep or name not in SWEEPABLE:
            raise ConfigError(f"--sweep {spec!r}: write NAME=V1,V2,... with NAME one of {', '.join(SWEEPABLE)}")
        for raw in values.split(","):
            try:
                value = int(raw)
            except ValueError:
                raise ConfigError(f"--sweep {spec!r}: {raw!r} is not an integer") from None
            variants.append(Variant(name=f"{name}={value}", config=base.replace(**{SWEEPABLE[name]: value})))
    return variants


async def prepare_spaces(
    store: Store,
    spaces: Sequence[SpaceInput],
    *,
    llm: LLM | None,
    embedder: Embedder,
    options: BuildOptions | None = None,
    progress: bool = False,
    seed_from: dict[str, str] | None = None,
) -> list[BuildReport]:
    """Import (idempotent) and build (incremental, resumable) every space; extractive when ``llm`` is None.

    ``seed_from`` maps a space to an already built space whose cached embeddings it may reuse.
    """
    import_spaces(store, spaces, source="evaluation harness")
    reports = []
    for space in spaces:
        source = (seed_from or {}).get(space.name)
        if source is not None:
            seed_embeddings(store, Scope.local(source), Scope.local(space.name), embedder.model_id)
        reports.append(
            await build_space(
                store,
                Scope.local(space.name),
                llm=llm,
                embedder=embedder,
                options=options or BuildOptions(),
                progress=progress,
            )
        )
    return reports


def seed_embeddings(store: Store, source: Scope, target: Scope, model_id: str) -> int:
    """Copy cached vectors of every text ``source`` holds (turns, node texts, trigger views) into ``target``'s cache.

    A stitched LoCoMo-Plus space repeats its LoCoMo conversation almost verbatim; when that conversation is already
    built in the same memory directory, this saves re-embedding it. Vectors are keyed by (model id, text hash), so
    a copied vector is exactly the one the target would compute; texts not found are simply embedded later.
    """
    if not store.has_space(source) or not store.has_space(target):
        return 0
    texts = [turn_embedding_text(t) for t in store.turns(source)]
    texts += [t.label for t in store.topics(source)]
    texts += [scene_text(s) for s in store.scenes(source)]
    texts += [i.text for i in store.items(source)]
    texts += [v.text for trig in store.triggers(source) for v in trig.views]
    hashes = list(dict.fromkeys(text_hash(t) for t in texts))
    found = store.get_embeddings(source, model_id, hashes)
    if found:
        store.put_embeddings(target, model_id, found)
    return len(found)


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def source_revision() -> str | None:
    """The git commit of the tmem checkout this code runs from, with ``+dirty`` when src/ has uncommitted changes;
    None when tmem is not running from a git checkout (an installed wheel)."""
    root = Path(__file__).resolve().parents[3]
    if not (root / ".git").exists():
        return None
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, check=True, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--", "src"],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):  # no git binary, or not a usable repository: unknown revision
        return None
    return head + ("+dirty" if dirty else "")


class Manifest(BaseModel):
    """What a results folder was made with (written as manifest.json)."""

    tmem_version: str
    source_revision: str | None = Field(default=None, description="git commit of the checkout ('+dirty' if changed).")
    command: str
    benchmark: str
    mode: str = Field(description="'retrieval-only' or 'qa'.")
    build_mode: str = Field(description="'llm' or 'extractive'.")
    models: dict[str, str | None]
    embed_model: str
    preset: str
    variants: list[str]
    runs: int | None = Field(default=None, description="Judge runs per answer (QA only).")
    prompt: str | None = Field(default=None, description="Answer prompt: 'short', 'cot' or 'reply' (QA only).")
    stitch: str | None = Field(default=None, description="LoCoMo-Plus stitching mode: 'shared' or 'per-probe'.")
    data_files: dict[str, str] = Field(description="Path -> sha256.")
    settings: dict[str, Any] = Field(description="Settings with secrets removed.")
    started_at: str = Field(description="Wall-clock time of the run (bookkeeping only).")


def make_manifest(
    *,
    command: str,
    benchmark: str,
    mode: str,
    settings: Settings,
    models: dict[str, str | None],
    embedder: Embedder,
    preset: str,
    variants: Sequence[Variant],
    data_files: Sequence[Path],
    runs: int | None = None,
    prompt: str | None = None,
    stitch: str | None = None,
) -> Manifest:
    safe = settings.model_dump(mode="json", exclude={"llm_api_key"})
    return Manifest(
        tmem_version=version("tmem"),
        source_revision=source_revision(),
        command=command,
        benchmark=benchmark,
        mode=mode,
        build_mode="extractive" if models.get("build") is None else "llm",
        models=models,
        embed_model=embedder.model_id,
        preset=preset,
        variants=[v.name for v in variants],
        runs=runs,
        prompt=prompt,
        stitch=stitch,
        data_files={str(p): file_sha256(p) for p in data_files},
        settings=safe,
        started_at=datetime.now(UTC).isoformat(timespec="seconds"),
    )


def write_manifest(out: Path, manifest: Manifest) -> Path:
    """Write ``manifest.json``; a rerun into a folder made with other data or models is refused (mixing results)."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "manifest.json"
    if path.exists():
        old = json.loads(path.read_text(encoding="utf-8"))
        new = manifest.model_dump(mode="json")
        # Data files are compared by content (sha256), not by the path they were given with.
        old["data_files"] = sorted(old.get("data_files", {}).values())
        new["data_files"] = sorted(new["data_files"].values())
        # Records are keyed by (variant, question) alone, so everything that changes what a record means is compared.
        for key in ("benchmark", "mode", "data_files", "models", "embed_model", "preset", "runs", "prompt", "stitch"):
            if old.get(key) != new[key]:
                raise ConfigError(
                    f"{path} was written by a run with a different {key} ({old.get(key)!r}); resuming would mix "
                    "results: pass another --out or delete that folder."
                )
    path.write_text(manifest.model_dump_json(indent=2) + "\n", encoding="utf-8")
    return path
