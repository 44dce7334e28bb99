"""Typed search results. Every hit carries its routes: which lists reached it, its rank in each, the fused score
and any gate values, so that "why was this recalled?" always has an answer."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from tmem.models import Item, Persona, Scene, Turn
from tmem.retrieve.layout import ContextLayout


class Route(BaseModel):
    """One ranked list that reached a hit."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(
        description="e.g. 'topic.bm25', 'scene.dense', 'scene.trigger.horizon', 'item.trigger.bridge', 'item.scene'"
    )
    rank: int = Field(ge=1, description="1-based rank of the hit in that list.")
    score: float = Field(description="The list's own score (BM25 score, cosine, ...).")
    view: str | None = Field(default=None, description="Trigger view that gave the max score, for trigger routes.")
    gate: float | None = Field(default=None, description="Gate threshold applied on this route, if any.")


class GateMiss(BaseModel):
    """A host that a gated trigger route reached within its top list but whose cosine fell under the gate, so it
    was dropped from that route before fusion (it may still be a hit through another route)."""

    model_config = ConfigDict(frozen=True)

    route: str = Field(description="The gated route, e.g. 'item.trigger' or 'scene.trigger.scene'.")
    host_kind: Literal["item", "scene"]
    host_id: str
    rank: int = Field(ge=1, description="1-based rank in the route's list before the gate.")
    score: float = Field(description="The best view cosine, under the gate.")
    view: str | None = None
    gate: float


class SceneHit(BaseModel):
    model_config = ConfigDict(frozen=True)

    kind: Literal["scene"] = "scene"
    scene: Scene
    turns: list[Turn] = Field(description="The scene's raw dated turns (the evidence handed to the QA model).")
    score: float = Field(description="Fused score used for the final ranking.")
    routes: list[Route]
    topic_ids: list[str] = Field(default_factory=list, description="Surviving topics that admitted the scene.")


class ItemHit(BaseModel):
    model_config = ConfigDict(frozen=True)

    kind: Literal["item"] = "item"
    item: Item
    source_scenes: list[Scene]
    source_turn_ids: list[str] = Field(description="Turn ids of the item's source turns, or of its source scenes.")
    score: float
    routes: list[Route]


class TurnHit(BaseModel):
    """A raw turn reached by the turn route (BM25 + dense over every raw turn) or by the unbuilt-turn route (the same
    over the turns no build holds yet), fused."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["turn"] = "turn"
    turn: Turn
    scene_id: str | None = Field(default=None, description="The scene holding the turn (None before a build).")
    score: float
    routes: list[Route]


class SearchResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    space: str
    query: str
    preset: str
    scenes: list[SceneHit]
    items: list[ItemHit]
    turns: list[TurnHit] = Field(
        default_factory=list, description="Raw turns of the turn route (when it is on) and of the unbuilt-turn route."
    )
    personas: list[Persona] = Field(default_factory=list, description="Returned beside the evidence, off budget.")
    topics: list[tuple[str, float]] = Field(default_factory=list, description="Surviving topics (id, fused score).")
    disabled: list[str] = Field(default_factory=list, description="Ablation switches that were off.")
    unbuilt_turns: int = Field(
        default=0,
        description="Turns of the space that no scene holds yet (added after the last build): searched as raw turns "
        "only (route turn.unbuilt).",
    )
    descriptive_only: bool = Field(
        default=False, description="True when the space was built without an LLM (no Bridge/Horizon/persona)."
    )
    never_built: bool = Field(
        default=False,
        description="True when no scene holds any turn of the space yet (a space never built): every hit is a raw turn "
        "of the unbuilt-turn route, ranked over every turn (docs/retrieval.md).",
    )
    gated: list[GateMiss] = Field(
        default_factory=list, description="Trigger-route candidates that fell under a gate (why they are missing)."
    )
    stale: bool = Field(
        default=False,
        description="True when turns were added since the last build: they are searched as raw turns, but no scene, "
        "item or trigger holds them yet.",
    )
    stale_turns: int = Field(
        default=0, ge=0, description="How many turns are not built yet (reachable only as raw turns until a build)."
    )
    lexical_anchor: float | None = Field(
        default=None,
        description="Share of the query's IDF mass that its best BM25 turns contain (tmem.index.anchor); None when "
        "not measured (the turn route is off, or the layout has no lexical floor).",
    )
    layout: ContextLayout = Field(
        default_factory=ContextLayout,
        description="The context layout resolved for this search's space (tmem.retrieve.layout): how a budgeted "
        "context of these hits is packed.",
    )

    def turn_ids(self) -> list[str]:
        """Every turn id of the hits (scenes, items' source turns, then raw turns), without duplicates."""
        seen: dict[str, None] = {}
        for sh in self.scenes:
            for t in sh.turns:
                seen.setdefault(t.id, None)
        for ih in self.items:
            for tid in ih.source_turn_ids:
                seen.setdefault(tid, None)
        for th in self.turns:
            seen.setdefault(th.turn.id, None)
        return list(seen)
