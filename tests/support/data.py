"""Where the dev data lies: ``shared/`` sits beside the repository checkout (here and in CI)."""

from __future__ import annotations

from pathlib import Path

SHARED_DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
DEV_LOCOMO = SHARED_DATA / "locomo10.dev.json"
DEV_PLUS = SHARED_DATA / "locomo_plus.dev.json"
