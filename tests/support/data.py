"""Where the dev data lies: ``shared/`` sits beside the repository checkout (here and in CI)."""

from __future__ import annotations

import json
from pathlib import Path

SHARED_DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
DEV_LOCOMO = SHARED_DATA / "locomo10.dev.json"
DEV_PLUS = SHARED_DATA / "locomo_plus.dev.json"


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
