"""What a build reports back."""

from __future__ import annotations

import json

from pydantic import BaseModel, Field

# Store state keys every build maintains live in tmem.util.state (the retriever and the CLI read them too).
from tmem.util.state import STATE_FAILED, STATE_FALLBACK, STATE_MODE, STATE_SESSIONS

__all__ = [
    "EXIT_INCOMPLETE",
    "STATE_FAILED",
    "STATE_FALLBACK",
    "STATE_MODE",
    "STATE_SESSIONS",
    "BuildReport",
    "FailedUnit",
    "StageReport",
    "load_failed",
    "load_fallback",
]

EXIT_INCOMPLETE = 4  # `tmem build` (and `tmem check`) exit status when units failed and the memory is incomplete


class FailedUnit(BaseModel):
    """One unit of work (a segmentation window, a topic batch, an item chunk, a trigger batch, a persona) whose
    replies stayed invalid after the LLM layer's retries. The build finished everything that does not depend on it;
    a rerun retries exactly these units (their requests were not cached, the rest were)."""

    stage: str
    unit: str = Field(description="Stable name of the unit, e.g. 'items:Hobbies matters:D3:1' or 'persona:Caroline'.")
    refs: list[str] = Field(default_factory=list, description="Turns, scenes, items or speakers the unit covers.")
    reason: str = Field(description="The last validation error.")


class StageReport(BaseModel):
    stage: str
    created: int = Field(default=0, description="Nodes created by this run of the stage.")
    updated: int = 0
    skipped: int = Field(default=0, description="Work found already done (checkpoint or cache).")
    llm_calls: int = Field(default=0, description="LLM requests sent (cache hits excluded).")
    cached_calls: int = 0
    seconds: float = 0.0


class BuildReport(BaseModel):
    space: str
    mode: str
    stages: list[StageReport] = Field(default_factory=list)
    seconds: float = 0.0
    descriptive_only: bool = Field(default=False, description="True in extractive mode: no Bridge, Horizon or persona.")
    counts: dict[str, int] = Field(default_factory=dict, description="Nodes per type after the build.")
    failed: list[FailedUnit] = Field(
        default_factory=list, description="Units left undone (the build is incomplete; rerun it to retry them)."
    )
    fallback: dict[str, str] = Field(
        default_factory=dict, description="Scenes segmented without the model by this build: scene id -> reason."
    )

    @property
    def complete(self) -> bool:
        return not self.failed


def load_failed(state: dict[str, str]) -> list[FailedUnit]:
    """The failed units recorded by the last build (state key ``build.failed``)."""
    raw = state.get(STATE_FAILED)
    return [FailedUnit.model_validate(u) for u in json.loads(raw)] if raw else []


def load_fallback(state: dict[str, str]) -> dict[str, str]:
    """Scenes segmented without the model (state key ``build.fallback``): scene id -> reason."""
    raw = state.get(STATE_FALLBACK)
    loaded: dict[str, str] = json.loads(raw) if raw else {}
    return loaded
