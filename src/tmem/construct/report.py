"""What a build reports back."""

from __future__ import annotations

from pydantic import BaseModel, Field

# Store state keys every build maintains live in tmem.util.state (the retriever and the CLI read them too).
from tmem.util.state import STATE_MODE, STATE_SESSIONS

__all__ = ["STATE_MODE", "STATE_SESSIONS", "BuildReport", "StageReport"]


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
