"""Retrieval settings: budgets, gate, RRF constant, reranker, the paper's seven ablation switches and named presets.

Switches (paper §4.4), each removing exactly its component:

    SL     scene layer: no scene hits are returned as evidence (the cascade still uses scenes to pick items)
    IC     item channel: no item hits (Stage 3 is skipped)
    ET+BT  Entity and Bridge triggers: the item trigger route is not queried
    PS     persona: no persona beside the evidence
    TF     topic filter: Stage 1 is skipped and every scene is admitted to Stage 2
    ST     Scene trigger: the scene-trigger route of Stage 2 is not queried
    HT     Horizon trigger: the horizon route of Stage 2 is not queried
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import ConfigDict, Field, PlainSerializer, model_validator

from tmem.errors import ConfigError
from tmem.models import TriggerFamily
from tmem.retrieve.explicit import Overridable
from tmem.retrieve.layout import ANCHOR_FLOOR, ASSOCIATIVE_ROUTES, LAYOUT_FIELDS, UNBUILT_DENSE

__all__ = ["ANCHOR_FLOOR", "ASSOCIATIVE_ROUTES", "PRESETS", "PRESET_OVERRIDES", "SWITCHES", "UNBUILT_DENSE"]

Switch = Literal["SL", "IC", "ET+BT", "PS", "TF", "ST", "HT"]
SWITCHES: tuple[Switch, ...] = ("SL", "IC", "ET+BT", "PS", "TF", "ST", "HT")


def _switch_list(switches: frozenset[Switch]) -> list[str]:
    """Ablation switches as JSON, in the paper's order (see _route_list)."""
    return [s for s in SWITCHES if s in switches]


class RetrievalConfig(Overridable):
    """One retrieval recipe. Budgets accept the paper's names as aliases: ``RetrievalConfig(kT=10, R=5)``. The fields
    set explicitly (``explicit``) are kept when the ``auto`` preset is resolved for a space
    (:func:`tmem.retrieve.recipe.resolve`); how a budgeted context is laid out is a :class:`ContextLayout`'s."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)
    what: ClassVar[str] = "retrieval config"

    name: str = Field(default="custom", description="Preset name, reported in every SearchResult.")
    k_topics: int = Field(default=15, ge=1, alias="kT", description="Stage 1: topics kept by the prefilter.")
    k_scenes: int = Field(default=5, ge=0, alias="kS", description="Stage 2: scenes kept.")
    k_items: int = Field(default=15, ge=0, alias="kI", description="Stage 3: items kept.")
    item_trigger_top: int = Field(default=10, ge=0, alias="R", description="Item-trigger union top-R.")
    gate: float | None = Field(default=0.85, description="Hard cosine gate on the item-trigger route (None: no gate).")
    k0: int = Field(default=60, ge=0, description="RRF smoothing constant.")
    depth: int = Field(default=50, ge=1, description="Candidates taken from each BM25 / dense list before fusion.")
    scene_trigger_top: int = Field(
        default=10, ge=0, description="Scenes taken from each of the Scene and Horizon trigger routes."
    )
    scene_trigger_gate: float | None = Field(
        default=None, description="Optional cosine gate on the Scene/Horizon routes (the paper gates none)."
    )
    item_trigger_families: tuple[TriggerFamily, ...] = Field(
        default=(TriggerFamily.ENTITY, TriggerFamily.BRIDGE),
        description="Families whose views make up the item-trigger union.",
    )
    split_item_triggers: bool = Field(
        default=False,
        description="Rank Entity and Bridge views as two lists (each family's best hosts get their own ranks) instead "
        "of the paper's one union list (max over both families).",
    )
    item_direct_top: int = Field(
        default=0,
        ge=0,
        description="Stage 3 extension (not in the paper): also rank every live item by BM25 + dense and fuse the "
        "top N, so an item outside the kept scenes can be recalled by similarity alone. 0 = off (the paper).",
    )
    scene_via_items_top: int = Field(
        default=0,
        ge=0,
        description="Stage 2 extension (not in the paper): also rank admitted scenes by their best item (BM25 + "
        "dense over every item) and fuse the top N. 0 = off (the paper).",
    )
    turn_top: int = Field(
        default=0,
        ge=0,
        description="Turn route (not in the paper): also rank every raw turn by BM25 + dense, fused, and return the "
        "top N as turn hits. 0 = off.",
    )
    unbuilt_top: int = Field(
        default=10,
        ge=0,
        description="Unbuilt-turn route (not in the paper): rank the raw turns no scene holds yet (added since the last "
        "build, or every turn of a space never built) by BM25 + dense, as the lists `turn.unbuilt.bm25` and "
        "`turn.unbuilt.dense`, each keeping its best N; their turns are returned as turn hits (docs/retrieval.md). "
        "0 = off: unbuilt turns are then reached only through the turn route.",
    )
    keep_speaker_names: bool = Field(
        default=False,
        description="Embed the query as asked, speaker names included (default: the dense lists compare the query "
        "without the names of the space's speakers, which say whom it asks about; docs/retrieval.md, \"Speaker "
        'names in a query").',
    )
    admit_unlinked_scenes: bool = Field(
        default=True, description="Scenes linked to no topic pass the topic filter (else they are unreachable)."
    )
    reranker: str | None = Field(
        default=None, description="CrossEncoder model name or path used when the Retriever has no reranker."
    )
    rerank_depth: int = Field(default=20, ge=1, description="Fused candidates per stage handed to the reranker.")
    disabled: Annotated[frozenset[Switch], PlainSerializer(_switch_list, when_used="json")] = Field(
        default_factory=frozenset, description="Ablation switches turned off."
    )

    @model_validator(mode="before")
    @classmethod
    def _moved(cls, data: Any) -> Any:
        """A field of the context layout given here is refused with where it went (docs/retrieval.md)."""
        moved = sorted(LAYOUT_FIELDS & set(data)) if isinstance(data, dict) else []
        if moved:
            raise ConfigError(
                "{field} is no longer a retrieval config field: it shapes the budgeted context's text, so it moved to "
                'the context layout; pass layout={{{field!r}: ...}} to context or ask (docs/retrieval.md, "Context '
                'layout").',
                field=moved[0],
            )
        return data

    def enabled(self, switch: Switch) -> bool:
        return switch not in self.disabled

    def without(self, *switches: str) -> RetrievalConfig:
        """A copy with the given components removed, e.g. ``cfg.without("HT", "ST")``."""
        bad = [s for s in switches if s not in SWITCHES]
        if bad:
            raise ConfigError(f"Unknown ablation switch {', '.join(bad)}; use one of {', '.join(SWITCHES)}.")
        return self.replace(disabled=self.disabled | frozenset(switches))

    @classmethod
    def preset(cls, name: str) -> RetrievalConfig:
        """A named preset (see :data:`PRESETS`); raises ConfigError naming the known ones."""
        try:
            return PRESETS[name]
        except KeyError:
            raise ConfigError(f"Unknown retrieval preset {name!r}; choose one of {', '.join(PRESETS)}.") from None


# Each preset is the paper's recipe (Appendix E, the field defaults) with these fields overridden.
PRESET_OVERRIDES: dict[str, dict[str, Any]] = {
    # Appendix E: (kT, kS, kI) = (15, 5, 15), R = 10, gate 0.85, k0 = 60 (calibrated for bge-m3).
    "paper": {},
    # The same cascade with the item-trigger gate lowered for MiniLM, whose cosines sit well below bge-m3's.
    "minilm": {"gate": 0.6},
    # The descriptive half only: Entity (not Bridge) views, Scene triggers, no Horizon, no persona.
    "descriptive": {"item_trigger_families": (TriggerFamily.ENTITY,), "disabled": frozenset({"HT", "PS"})},
    # The offline default for spaces built without an LLM: their items are the substantive turns themselves, and
    # only Entity triggers exist, so items are also ranked directly over the whole space (see docs/retrieval.md).
    "extractive": {
        "gate": 0.6,
        "item_direct_top": 50,
        "scene_via_items_top": 50,
    },
    # The default for LLM-built spaces, for any embedder: trigger routes admit by rank (top R / top 10), never by an
    # absolute cosine, and Entity and Bridge rank as two lists (docs/retrieval.md: the measurements behind this).
    # Its context layout (tmem.retrieve.layout: anchorless queries, excerpts, blocks) is the layout's own.
    "associative": {"gate": None, "split_item_triggers": True},
    # The default: `extractive` on spaces built without an LLM, `associative` on the others (resolved per space).
    "auto": {},
    # Node indices only: no trigger route at all.
    "no-triggers": {"disabled": frozenset({"ET+BT", "ST", "HT"})},
    # Similarity over every scene, no topic prefilter.
    "no-filter": {"disabled": frozenset({"TF"})},
}
PRESETS: dict[str, RetrievalConfig] = {
    name: RetrievalConfig(name=name, **overrides) for name, overrides in PRESET_OVERRIDES.items()
}
