"""Routes as types (issue 24 part 5): the route table, presets as overrides, and `auto` resolution that keeps what a
caller set explicitly."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tmem.retrieve.config import PRESETS, RetrievalConfig

# Every preset's effective config, and what it resolves to on each kind of space and under a budgeted context, as
# they were before presets became override tables (generated once at 4e66a10; never regenerate it to make this pass).
PINNED = Path(__file__).parent / "fixtures" / "preset_configs.json"


def _effective(cfg: RetrievalConfig) -> dict[str, Any]:
    d = cfg.model_dump(mode="json")
    for key in ("anchorless_routes", "disabled"):
        d[key] = sorted(d[key])
    return d


def _variants(cfg: RetrievalConfig) -> dict[str, RetrievalConfig]:
    return {
        "preset": cfg,
        "extractive_space": cfg.for_space(True),
        "llm_space": cfg.for_space(False),
        "context_500": cfg.replace(context_depth=25).for_space(False).deepened(),
    }


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets_equal_their_pinned_effective_configs(name: str) -> None:
    pinned = json.loads(PINNED.read_text())
    assert {k.split("/")[0] for k in pinned} == set(PRESETS)  # no preset added or lost without pinning it
    for label, cfg in _variants(PRESETS[name]).items():
        assert _effective(cfg) == pinned[f"{name}/{label}"], f"{name}/{label}"
