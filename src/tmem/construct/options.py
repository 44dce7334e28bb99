"""Knobs of LLM-mode construction. Each group size trades calls against prompt size and model attention; the
defaults meet the cost target (<= 300 calls, <= 0.5M prompt tokens per LoCoMo conversation, all four trigger
families). See docs/construction.md for measured figures and the trade-offs."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator


class BuildOptions(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    segment_window: int = Field(
        default=48,
        ge=2,
        description="Turns shown to the boundary detector per call. Larger: fewer calls, more re-read tail tokens.",
    )
    max_scene_turns: int = Field(
        default=30,
        ge=1,
        description="Longest allowed scene in turns (enforced by validation). Must not exceed segment_window.",
    )
    topic_scenes_per_call: int = Field(
        default=6,
        ge=1,
        description="New scenes admitted to topics per call, in arrival order. Larger: fewer calls, each call must "
        "keep more decisions consistent.",
    )
    item_scenes_per_call: int = Field(
        default=8,
        ge=1,
        description="New scenes of one topic read per extraction call (a topic gaining more is done in order, each "
        "chunk seeing the items of the previous ones). Larger: fewer calls, longer prompts.",
    )
    item_existing_max: int = Field(
        default=80,
        ge=0,
        description="Most recent existing items of a topic shown to the extractor for duplicate/update detection.",
    )
    items_per_trigger_call: int = Field(
        default=10,
        ge=1,
        description="Items given Entity+Bridge triggers per call. Each item still gets its own N tuples.",
    )
    item_triggers_n: int = Field(default=3, ge=1, le=8, description="Entity+Bridge tuples (N) per item.")
    scenes_per_trigger_call: int = Field(
        default=5,
        ge=1,
        description="Scenes given Scene+Horizon triggers per call. Each scene still gets its own triggers.",
    )
    horizon_max: int = Field(default=5, ge=2, le=10, description="Most Horizon dimensions per scene (at least 2).")
    persona_items_per_call: int = Field(
        default=300,
        ge=1,
        description="Items read per persona call; a speaker with more is folded chunk by chunk.",
    )
    concurrency: int = Field(default=8, ge=1, description="Concurrent LLM requests within a stage.")
    few_rounds: bool | None = Field(
        default=None,
        description="Plan the build in few rounds (one per stage): sessions (cut into windows) are segmented in "
        "parallel, topics are assigned to many scenes per request, a topic's item chunks and a persona's chunks are "
        "read in parallel. None: on in batch mode (a Batch API round may take a day), off live (the sequential plan "
        "lets scenes span session breaks and keeps incremental builds identical to full ones).",
    )
    topic_scenes_per_round_call: int = Field(
        default=80,
        ge=1,
        description="Few-rounds plan: scenes assigned to topics per request (requests run in parallel; labels opened "
        "by two requests with the same wording are one topic).",
    )
    fallback: bool = Field(
        default=True,
        description="A segmentation window whose replies stay invalid after the retries is segmented without the "
        "model (split at session breaks and every max_scene_turns turns; marked in state build.fallback) instead of "
        "being left for a rerun.",
    )
    batch_out: Path | None = Field(
        default=None,
        description="Batch protocol: stop at the first stage with uncached requests and write them here (JSONL).",
    )

    @property
    def plan_few_rounds(self) -> bool:
        return self.few_rounds if self.few_rounds is not None else self.batch_out is not None

    @model_validator(mode="after")
    def _window_holds_a_scene(self) -> BuildOptions:
        if self.max_scene_turns > self.segment_window:
            raise ValueError(
                f"max_scene_turns ({self.max_scene_turns}) must not exceed segment_window ({self.segment_window}): "
                "raise the window or lower the maximum scene length"
            )
        return self
