"""Where the dev data lies: ``shared/`` sits beside the repository checkout (here and in CI)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tmem.store.sqlite import SQLiteStore

SHARED_DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
DEV_LOCOMO = SHARED_DATA / "locomo10.dev.json"
DEV_PLUS = SHARED_DATA / "locomo_plus.dev.json"
LLM_BUILT = SHARED_DATA / "llm-built"  # the current LLM-built memories; previous/ holds the builds before them
LLM_BUILT_SPACES = ("d26-plus", "d30-plus", "d41-plus", "d42-plus")


def locomo_slice(path: Path, sessions: int = 2) -> Path:
    """Write the first dev LoCoMo conversation's first ``sessions`` sessions (no questions) to ``path``, a LoCoMo
    file the importer reads; returns ``path``."""
    sample = json.loads(DEV_LOCOMO.read_text(encoding="utf-8"))[0]
    conv = sample["conversation"]
    keep = {"speaker_a": conv["speaker_a"], "speaker_b": conv["speaker_b"]}
    for n in range(1, sessions + 1):
        keep[f"session_{n}"] = conv[f"session_{n}"]
        keep[f"session_{n}_date_time"] = conv[f"session_{n}_date_time"]
    path.write_text(json.dumps([{"sample_id": sample["sample_id"], "conversation": keep, "qa": []}]), encoding="utf-8")
    return path


def open_llm_built(name: str, folder: Path, *, previous: bool = False) -> SQLiteStore:
    """A store opened on a copy, in ``folder``, of the LLM-built memory ``name`` (never the shipped file in place);
    the test is skipped where the dev data is not on the machine."""
    shipped = (LLM_BUILT / "previous" if previous else LLM_BUILT) / f"{name}.db"
    if not shipped.exists():
        pytest.skip(f"the LLM-built dev memory {shipped} is not on this machine")
    copy = folder / "tmem.db"
    shutil.copyfile(shipped, copy)
    return SQLiteStore.open(copy)
