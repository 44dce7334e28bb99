"""The routes of the cascade as types: every ranked list a search fuses has a :class:`RouteName` (a ``str`` enum, so
the names in results, JSON, the viewer and the HTTP API are the strings they always were) and a :class:`RouteSpec`
in :data:`ROUTES`, the one table that says which stage's fusion the list joins, what ranks it (BM25, dense, trigger
views, items), over which candidates (every node, or those the topic prefilter admitted), how deep, behind which
ablation switches and under which gate. The cascade (:mod:`tmem.retrieve.cascade`) builds each stage by iterating
the table; the packer (:mod:`tmem.answer.budget`) asks a route's spec, never its spelling. Adding a route: one row
here plus the index it reads (docs/retrieval.md, "Adding a route")."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum
from operator import attrgetter
from typing import TYPE_CHECKING

from tmem.models import ITEM_FAMILIES, TriggerFamily

if TYPE_CHECKING:
    from tmem.retrieve.config import RetrievalConfig, Switch


class RouteName(StrEnum):
    """The name of one ranked list of the cascade, as reported in every hit's routes."""

    TOPIC_BM25 = "topic.bm25"
    TOPIC_DENSE = "topic.dense"
    SCENE_BM25 = "scene.bm25"
    SCENE_DENSE = "scene.dense"
    SCENE_TRIGGER_SCENE = "scene.trigger.scene"
    SCENE_TRIGGER_HORIZON = "scene.trigger.horizon"
    SCENE_ITEMS = "scene.items"
    ITEM_BM25 = "item.bm25"
    ITEM_DENSE = "item.dense"
    ITEM_DIRECT_BM25 = "item.direct.bm25"
    ITEM_DIRECT_DENSE = "item.direct.dense"
    ITEM_TRIGGER = "item.trigger"
    ITEM_TRIGGER_ENTITY = "item.trigger.entity"
    ITEM_TRIGGER_BRIDGE = "item.trigger.bridge"
    TURN_BM25 = "turn.bm25"
    TURN_DENSE = "turn.dense"
    TURN_UNBUILT_BM25 = "turn.unbuilt.bm25"
    TURN_UNBUILT_DENSE = "turn.unbuilt.dense"


# A reranker reorders a fused stage; its pseudo-route (``rerank.<model id>``) records the new rank and score, it is no
# ranked list of its own: it never orders a budgeted context.
RERANK_PREFIX = "rerank."


class Stage(StrEnum):
    """The fusion a list joins, which is also the kind of hit it yields."""

    TOPIC = "topic"
    SCENE = "scene"
    ITEM = "item"
    TURN = "turn"


class Source(StrEnum):
    """What ranks a list's candidates."""

    BM25 = "bm25"  # the stage's BM25 scores (raw turns: their own corpus)
    DENSE = "dense"  # cosine of the stage's node embeddings
    TRIGGER = "trigger"  # max cosine over the trigger views of the spec's families (hosts: items or scenes)
    ITEMS = "items"  # scenes ranked by their best item (BM25 + dense over every item, fused)


class Candidates(StrEnum):
    """Which candidates a list ranks."""

    ALL = "all"  # every node of the stage: never gated by the topic prefilter (the trigger bypass)
    ADMITTED = "admitted"  # scenes the topic prefilter admitted (all of them when the prefilter is off)
    POOL = "pool"  # items of the kept scenes, every one of them ranked (at least `depth`)
    UNBUILT = "unbuilt"  # raw turns no scene holds yet (added since the last build)


@dataclass(frozen=True)
class RouteSpec:
    """One ranked list: where it goes, what ranks it, over what, how deep, when it runs."""

    name: RouteName
    stage: Stage
    source: Source
    candidates: Candidates
    top: Callable[[RetrievalConfig], int]  # how many candidates the list keeps (before fusion)
    switches: tuple[Switch, ...] = ()  # ablation switches that all must be on (docs/retrieval.md)
    when: Callable[[RetrievalConfig], bool] | None = None  # any further condition on the recipe
    families: tuple[TriggerFamily, ...] = ()  # trigger routes: the families whose views it unites
    gate: Callable[[RetrievalConfig], float | None] | None = None  # trigger routes: the cosine gate, if any

    @property
    def unit(self) -> Stage:
        """The kind of hit the list ranks (a scene, an item, a raw turn, a topic)."""
        return self.stage

    @property
    def prefiltered(self) -> bool:
        """Whether the topic prefilter limits the list's candidates (else it bypasses it)."""
        return self.candidates in (Candidates.ADMITTED, Candidates.POOL)

    def active(self, cfg: RetrievalConfig) -> bool:
        """Whether the recipe runs this list: its switches on, its depth positive, its condition true."""
        return (
            all(cfg.enabled(s) for s in self.switches) and self.top(cfg) > 0 and (self.when is None or self.when(cfg))
        )

    def families_for(self, cfg: RetrievalConfig) -> tuple[TriggerFamily, ...]:
        """The trigger families the list unites under ``cfg`` (item routes: only those of ``item_trigger_families``)."""
        if self.stage is Stage.ITEM:
            return tuple(f for f in self.families if f in cfg.item_trigger_families)
        return self.families

    def gate_for(self, cfg: RetrievalConfig) -> float | None:
        return None if self.gate is None else self.gate(cfg)


# How deep each list goes and the gates of the trigger routes: fields of the recipe (RetrievalConfig).
_depth, _scene_triggers, _item_triggers = (
    attrgetter("depth"),
    attrgetter("scene_trigger_top"),
    attrgetter("item_trigger_top"),
)
_scene_via_items, _item_direct = attrgetter("scene_via_items_top"), attrgetter("item_direct_top")
_turns, _unbuilt = attrgetter("turn_top"), attrgetter("unbuilt_top")
_scene_gate, _item_gate = attrgetter("scene_trigger_gate"), attrgetter("gate")


def _pooled(cfg: RetrievalConfig) -> bool:  # Stage 3 ranks the kept scenes' items unless it ranks every item
    return cfg.item_direct_top == 0


def _split(cfg: RetrievalConfig) -> bool:  # Entity and Bridge views as two lists
    return cfg.split_item_triggers


def _united(cfg: RetrievalConfig) -> bool:  # Entity and Bridge views as one union list (the paper)
    return not cfg.split_item_triggers


_N, _S, _K, _C = RouteName, Stage, Source, Candidates  # the columns: name, stage, what ranks (kind), candidates
_ITEM_SWITCHES: tuple[Switch, ...] = ("IC", "ET+BT")
_ENTITY, _BRIDGE = (TriggerFamily.ENTITY,), (TriggerFamily.BRIDGE,)
_SCENE, _HORIZON = (TriggerFamily.SCENE,), (TriggerFamily.HORIZON,)

ROUTES: tuple[RouteSpec, ...] = (
    # Stage 1: the topic prefilter (paper §3.4)
    RouteSpec(_N.TOPIC_BM25, _S.TOPIC, _K.BM25, _C.ALL, _depth, ("TF",)),
    RouteSpec(_N.TOPIC_DENSE, _S.TOPIC, _K.DENSE, _C.ALL, _depth, ("TF",)),
    # Stage 2: scenes admitted by the prefilter, and those the Scene and Horizon views reach (the bypass)
    RouteSpec(_N.SCENE_BM25, _S.SCENE, _K.BM25, _C.ADMITTED, _depth),
    RouteSpec(_N.SCENE_DENSE, _S.SCENE, _K.DENSE, _C.ADMITTED, _depth),
    RouteSpec(
        _N.SCENE_TRIGGER_SCENE, _S.SCENE, _K.TRIGGER, _C.ALL, _scene_triggers, ("ST",), None, _SCENE, _scene_gate
    ),
    RouteSpec(
        _N.SCENE_TRIGGER_HORIZON, _S.SCENE, _K.TRIGGER, _C.ALL, _scene_triggers, ("HT",), None, _HORIZON, _scene_gate
    ),
    RouteSpec(_N.SCENE_ITEMS, _S.SCENE, _K.ITEMS, _C.ADMITTED, _scene_via_items),
    # Stage 3: items of the kept scenes (or, with item_direct_top, every live item), and the Entity/Bridge views
    RouteSpec(_N.ITEM_BM25, _S.ITEM, _K.BM25, _C.POOL, _depth, ("IC",), _pooled),
    RouteSpec(_N.ITEM_DENSE, _S.ITEM, _K.DENSE, _C.POOL, _depth, ("IC",), _pooled),
    RouteSpec(_N.ITEM_DIRECT_BM25, _S.ITEM, _K.BM25, _C.ALL, _item_direct, ("IC",)),
    RouteSpec(_N.ITEM_DIRECT_DENSE, _S.ITEM, _K.DENSE, _C.ALL, _item_direct, ("IC",)),
    RouteSpec(
        _N.ITEM_TRIGGER, _S.ITEM, _K.TRIGGER, _C.ALL, _item_triggers, _ITEM_SWITCHES, _united, ITEM_FAMILIES, _item_gate
    ),
    RouteSpec(
        _N.ITEM_TRIGGER_ENTITY, _S.ITEM, _K.TRIGGER, _C.ALL, _item_triggers, _ITEM_SWITCHES, _split, _ENTITY, _item_gate
    ),
    RouteSpec(
        _N.ITEM_TRIGGER_BRIDGE, _S.ITEM, _K.TRIGGER, _C.ALL, _item_triggers, _ITEM_SWITCHES, _split, _BRIDGE, _item_gate
    ),
    # Raw turns (not in the paper): every turn, and the turns no build holds yet
    RouteSpec(_N.TURN_BM25, _S.TURN, _K.BM25, _C.ALL, _turns),
    RouteSpec(_N.TURN_DENSE, _S.TURN, _K.DENSE, _C.ALL, _turns),
    RouteSpec(_N.TURN_UNBUILT_BM25, _S.TURN, _K.BM25, _C.UNBUILT, _unbuilt),
    RouteSpec(_N.TURN_UNBUILT_DENSE, _S.TURN, _K.DENSE, _C.UNBUILT, _unbuilt),
)
SPECS: dict[RouteName, RouteSpec] = {s.name: s for s in ROUTES}


def spec(name: str) -> RouteSpec | None:
    """The spec of a route name as reported in a hit (None for a reranker's pseudo-route)."""
    try:
        return SPECS[RouteName(name)]
    except ValueError:
        return None


def stage_routes(stage: Stage, cfg: RetrievalConfig) -> list[RouteSpec]:
    """The lists ``cfg`` runs in ``stage``, in table order."""
    return [s for s in ROUTES if s.stage is stage and s.active(cfg)]


def is_ranked_list(name: str) -> bool:
    """Whether a route name is a ranked list of its own (every route but a reranker's reordering)."""
    return not name.startswith(RERANK_PREFIX)


def parse_routes(values: Iterable[str]) -> frozenset[RouteName]:
    """Route names from names or prefixes ending in '.' (``"scene.trigger."``: every Scene and Horizon route). A
    value naming no route raises ValueError: this validates a config field, and pydantic reports it as the field's
    ValidationError."""
    out: set[RouteName] = set()
    for value in values:
        if value.endswith("."):
            matched = {n for n in RouteName if n.startswith(value)}
        else:
            matched = {RouteName(value)} if value in RouteName._value2member_map_ else set()
        if not matched:
            known = ", ".join(RouteName)
            raise ValueError(f"Unknown route {value!r}: use one of {known} (or a prefix of them ending in '.').")
        out |= matched
    return frozenset(out)
