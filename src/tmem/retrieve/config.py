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

from collections.abc import Iterable
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer, ValidationInfo, field_validator

from tmem.errors import ConfigError
from tmem.models import TriggerFamily
from tmem.retrieve.routes import RouteName, parse_routes

Switch = Literal["SL", "IC", "ET+BT", "PS", "TF", "ST", "HT"]
SWITCHES: tuple[Switch, ...] = ("SL", "IC", "ET+BT", "PS", "TF", "ST", "HT")


def _routes(value: object) -> object:
    if isinstance(value, str):
        value = (value,)
    return parse_routes(value) if isinstance(value, Iterable) else value


def _route_list(routes: frozenset[RouteName]) -> list[str]:
    """A set of routes as JSON, in the route table's order: two equal sets dump the same list whatever order
    they were built in (a set's iteration order is not)."""
    order = list(RouteName)
    return [r.value for r in sorted(routes, key=order.index)]


def _switch_list(switches: frozenset[Switch]) -> list[str]:
    """Ablation switches as JSON, in the paper's order (see _route_list)."""
    return [s for s in SWITCHES if s in switches]


# Route names, or prefixes ending in '.' that stand for every route they start (validated: an unknown one is refused).
Routes = Annotated[frozenset[RouteName], BeforeValidator(_routes), PlainSerializer(_route_list, when_used="json")]


class RetrievalConfig(BaseModel):
    """One retrieval recipe. Budgets accept the paper's names as aliases: ``RetrievalConfig(kT=10, R=5)``."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

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
    lexical_floor: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        description="A query whose lexical anchor (share of its IDF mass that its best BM25 turns contain) is under "
        "this is anchorless: the budgeted context then orders hits by the `anchorless_routes` only (docs/retrieval.md). "
        "None = every route always counts.",
    )
    anchorless_routes: Routes = Field(
        default=frozenset(),
        description="Routes that still count for an anchorless query (given as names, or prefixes ending in '.').",
    )
    context_k0: int = Field(
        default=1,
        ge=0,
        description="RRF constant of the budgeted context's priority order over every route's list (docs/retrieval.md).",
    )
    excerpt_neighbours: bool = Field(
        default=True,
        description="A scene hit's excerpt in a budgeted context holds the turns beside its best-matched turn (False: "
        "the best-matched turn alone, so that more scenes fit; docs/retrieval.md).",
    )
    scene_titles: bool = Field(
        default=True,
        description="A budgeted context shows each scene under its title (False: the turns of a session under its "
        "date, as on an extractive space; docs/retrieval.md).",
    )
    keep_speaker_names: bool = Field(
        default=False,
        description="Embed the query as asked, speaker names included (default: the dense lists compare the query "
        "without the names of the space's speakers, which say whom it asks about; docs/retrieval.md, \"Speaker "
        'names in a query").',
    )
    context_depth: int = Field(
        default=0,
        ge=0,
        le=100_000,
        description="Set by a budgeted context (tmem.answer.budget.context_config): how many units it may hold; the "
        "cascade deepens kS, kI and the turn route to fill it. 0 = a plain search.",
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

    @field_validator("*", mode="before")
    @classmethod
    def _no_boolean_numbers(cls, value: object, info: ValidationInfo) -> object:
        """A count or threshold given as true/false is refused (JSON's true is not 1: issue 33)."""
        if isinstance(value, bool) and info.field_name in _NUMBER_FIELDS:
            raise ValueError("a boolean is not a number; write a number")
        return value

    def enabled(self, switch: Switch) -> bool:
        return switch not in self.disabled

    def without(self, *switches: str) -> RetrievalConfig:
        """A copy with the given components removed, e.g. ``cfg.without("HT", "ST")``."""
        bad = [s for s in switches if s not in SWITCHES]
        if bad:
            raise ConfigError(f"Unknown ablation switch {', '.join(bad)}; use one of {', '.join(SWITCHES)}.")
        return self.replace(disabled=self.disabled | frozenset(switches))

    def replace(self, **changes: Any) -> RetrievalConfig:
        """A validated copy with fields changed (field names or the paper's aliases kT, kS, kI, R). The copy's
        explicitly set fields (``model_fields_set``) are this config's and the changed ones: what :meth:`for_space`
        never replaces."""
        data = {name: getattr(self, name) for name in self.model_fields_set}
        aliases = {f.alias: name for name, f in type(self).model_fields.items() if f.alias}
        for key, value in changes.items():
            data[aliases.get(key, key)] = value
        return type(self).model_validate(data)

    def for_space(self, descriptive_only: bool) -> RetrievalConfig:
        """Resolve the ``auto`` preset for one space: the ``extractive`` recipe on a space built without an LLM, the
        ``associative`` recipe (rank admission on trigger routes) otherwise: each field that recipe overrides, unless
        the caller set it explicitly (even to the paper's value: ``model_fields_set``, kept by :meth:`replace`). Any
        other preset is returned unchanged."""
        if self.name != "auto":
            return self
        target = "extractive" if descriptive_only else "associative"
        changes = {k: v for k, v in PRESET_OVERRIDES[target].items() if k not in self.model_fields_set}
        return self.replace(**changes, name=f"auto:{target}")

    def deepened(self) -> RetrievalConfig:
        """The recipe with lists deep enough for a budgeted context of ``context_depth`` units: as many items and
        raw turns, and as many scenes as fit when each enters as one turn (an eighth as many when its excerpt holds
        its neighbours too). A plain search (depth 0) is returned unchanged."""
        depth = self.context_depth
        if depth == 0:
            return self
        scenes = depth // 8 if self.excerpt_neighbours else depth
        return self.replace(
            k_scenes=max(self.k_scenes, scenes),
            k_items=max(self.k_items, depth),
            turn_top=max(self.turn_top, depth),
            unbuilt_top=max(self.unbuilt_top, depth) if self.unbuilt_top else 0,
        )

    @classmethod
    def preset(cls, name: str) -> RetrievalConfig:
        """A named preset (see :data:`PRESETS`); raises ConfigError naming the known ones."""
        try:
            return PRESETS[name]
        except KeyError:
            raise ConfigError(f"Unknown retrieval preset {name!r}; choose one of {', '.join(PRESETS)}.") from None


# A query whose best BM25 turns hold under a quarter of its IDF mass has no lexical anchor (docs/retrieval.md).
_NUMBER_FIELDS = frozenset(
    name for name, f in RetrievalConfig.model_fields.items() if f.annotation in (int, float, int | None, float | None)
)
ANCHOR_FLOOR = 0.25

# Dense similarity over the raw turns no build holds yet: it orders an anchorless context on every space, so a message
# added since the last build can recall by association like any other turn (docs/retrieval.md).
UNBUILT_DENSE = RouteName.TURN_UNBUILT_DENSE
# What still orders the context of an anchorless query on an LLM-built space: the trigger routes that rehearse
# situations (Scene, Horizon, Bridge) and dense similarity over raw turns (built or not) and scenes.
ASSOCIATIVE_ROUTES = frozenset(
    {
        RouteName.TURN_DENSE,
        UNBUILT_DENSE,
        RouteName.SCENE_DENSE,
        RouteName.SCENE_TRIGGER_SCENE,
        RouteName.SCENE_TRIGGER_HORIZON,
        RouteName.ITEM_TRIGGER_BRIDGE,
    }
)

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
        "lexical_floor": ANCHOR_FLOOR,
        "anchorless_routes": frozenset({RouteName.TURN_DENSE, UNBUILT_DENSE}),
        "context_k0": 0,
    },
    # The default for LLM-built spaces, for any embedder: trigger routes admit by rank (top R / top 10), never by an
    # absolute cosine, and Entity and Bridge rank as two lists (docs/retrieval.md: the measurements behind this).
    # An anchorless query (a situation that shares no words with what it needs: the associative case) is ordered by
    # the associative routes and the dense ones only, and a scene enters as its best-matched turn (docs/retrieval.md:
    # chosen with one LLM-built dev memory left out in turn).
    "associative": {
        "gate": None,
        "split_item_triggers": True,
        "lexical_floor": ANCHOR_FLOOR,
        "anchorless_routes": ASSOCIATIVE_ROUTES,
        "context_k0": 3,
        "excerpt_neighbours": False,
        "scene_titles": False,
    },
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
