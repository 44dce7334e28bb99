"""Routes as types (issue 24 part 5): the route table, presets as overrides, and `auto` resolution that keeps what a
caller set explicitly."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from tests.test_retrieve_fixtures import SPACE, CountingEmbedder, make_store
from tmem.answer.budget import route_filter
from tmem.client.plans import _config
from tmem.errors import InputError
from tmem.retrieve import routes
from tmem.retrieve.cascade import Retriever
from tmem.retrieve.config import ASSOCIATIVE_ROUTES, PRESET_OVERRIDES, PRESETS, SWITCHES, RetrievalConfig
from tmem.retrieve.layout import ContextLayout, as_layout
from tmem.retrieve.recipe import Asked, Recipe, resolve
from tmem.retrieve.routes import ROUTES, SPECS, Candidates, RouteName, Source, Stage, is_ranked_list, spec, stage_routes
from tmem.retrieve.types import SearchResult
from tmem.scope import Scope
from tmem.service.deps import retrieval_config

# Every preset's effective config, and what it resolves to on each kind of space and under a budgeted context, as
# they were before presets became override tables (generated once at 4e66a10; never regenerate it to make this pass).
# Then one config held the recipe, the context layout and the context's depth; a resolved Recipe holds them apart.
PINNED = Path(__file__).parent / "fixtures" / "preset_configs.json"


# Fields added after the pin, with the value every preset leaves them at (the pin stays as generated).
ADDED_SINCE_PIN = {
    "keep_speaker_names": False,
    "order": "date",
    "lead": 0,
}  # the last two: layout fields (docs/context.md)


def _effective(recipe: Recipe) -> dict[str, Any]:
    d = recipe.config.model_dump(mode="json", exclude={"explicit"})
    d.update(recipe.layout.model_dump(mode="json", exclude={"explicit"}), context_depth=recipe.depth)
    for key, value in ADDED_SINCE_PIN.items():
        assert d.pop(key) == value, key
    for key in ("anchorless_routes", "disabled"):
        d[key] = sorted(d[key])
    return d


def _variants(cfg: RetrievalConfig) -> dict[str, Recipe]:
    return {
        "preset": Recipe(cfg, ContextLayout.of_recipe(cfg.name), 0),  # the preset with its own layout, unresolved
        "extractive_space": resolve(Asked(cfg), descriptive_only=True),
        "llm_space": resolve(Asked(cfg), descriptive_only=False),
        "context_500": resolve(Asked(cfg, depth=25), descriptive_only=False),
    }


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets_equal_their_pinned_effective_configs(name: str) -> None:
    pinned = json.loads(PINNED.read_text())
    assert {k.split("/")[0] for k in pinned} == set(PRESETS)  # no preset added or lost without pinning it
    for label, cfg in _variants(PRESETS[name]).items():
        assert _effective(cfg) == pinned[f"{name}/{label}"], f"{name}/{label}"


def test_presets_store_only_their_overrides() -> None:
    for name, cfg in PRESETS.items():
        assert cfg.explicit == set(PRESET_OVERRIDES[name]), name


def test_auto_keeps_a_field_set_explicitly_to_the_paper_default() -> None:
    paper, auto = RetrievalConfig.preset("paper"), RetrievalConfig.preset("auto")
    # the associative recipe drops the gate and shows scenes as single turns; a caller who asks for the paper's
    # values by name keeps them
    llm = resolve(Asked(auto.replace(gate=paper.gate), ContextLayout(excerpt_neighbours=True)), descriptive_only=False)
    assert (llm.config.gate, llm.layout.excerpt_neighbours) == (0.85, True)
    assert llm.config.split_item_triggers is True and llm.layout.context_k0 == 3  # the rest still resolves
    extractive = resolve(Asked(auto.replace(item_direct_top=0), ContextLayout(context_k0=1)), descriptive_only=True)
    assert (extractive.config.item_direct_top, extractive.layout.context_k0) == (0, 1)
    assert extractive.config.gate == 0.6 and extractive.config.scene_via_items_top == 50
    # the same through validation (a config sent as JSON to the service) and through a constructor
    sent = resolve(Asked(RetrievalConfig.model_validate({"name": "auto", "gate": 0.85})), descriptive_only=False)
    assert sent.config.gate == 0.85 and sent.config.name == "auto:associative"
    titled = resolve(Asked(auto, ContextLayout.model_validate({"scene_titles": True})), descriptive_only=False)
    assert titled.layout.scene_titles is True
    # unset fields resolve as before
    assert resolve(Asked(auto), descriptive_only=False).config.gate is None


def test_replace_keeps_what_was_set_explicitly() -> None:
    cfg = RetrievalConfig.preset("auto").replace(kS=3).without("HT")
    assert cfg.explicit == {"k_scenes", "disabled"}
    resolved = resolve(Asked(cfg), descriptive_only=False).config
    assert resolved.k_scenes == 3 and resolved.disabled == frozenset({"HT"})
    assert resolved.explicit == cfg.explicit  # resolving records nothing as set by the caller
    assert resolved.gate is None and resolved.split_item_triggers  # the associative recipe's values


def test_client_sends_the_fields_set_explicitly() -> None:
    sent = _config(RetrievalConfig.preset("auto").replace(gate=0.85, kS=5))
    assert isinstance(sent, dict) and sent["name"] == "auto" and sent["explicit"] == ["gate", "k_scenes"]
    assert (sent["gate"], sent["kS"]) == (0.85, 5)
    assert RetrievalConfig.model_validate(sent) == RetrievalConfig.preset("auto").replace(gate=0.85, kS=5)


def test_the_route_table_names_every_route_once_and_keeps_its_spelling() -> None:
    assert [s.name for s in ROUTES] == list(RouteName)  # one row per name, in the enum's order
    for row in ROUTES:
        assert row.name.split(".")[0] == row.stage.value == row.unit.value  # the stage is the name's first part
        assert spec(row.name.value) is row and spec(str(row.name)) is row
        assert (row.source is Source.TRIGGER) == bool(row.families) == (row.gate is not None)
    assert {s.name for s in ROUTES if s.prefiltered} == {
        "scene.bm25",
        "scene.dense",
        "scene.items",
        "item.bm25",
        "item.dense",
    }
    assert {s.name for s in ROUTES if s.candidates is Candidates.UNBUILT} == {"turn.unbuilt.bm25", "turn.unbuilt.dense"}
    assert spec("rerank.some-model") is None and not is_ranked_list("rerank.some-model")
    assert all(is_ranked_list(n) for n in RouteName)
    assert json.dumps(sorted(ASSOCIATIVE_ROUTES)) == json.dumps(
        [
            "item.trigger.bridge",
            "scene.dense",
            "scene.trigger.horizon",
            "scene.trigger.scene",
            "turn.dense",
            "turn.unbuilt.dense",
        ]
    )


def test_which_routes_a_recipe_runs() -> None:
    def names(cfg: RetrievalConfig, stage: Stage) -> set[str]:
        return {s.name for s in stage_routes(stage, cfg)}

    paper = RetrievalConfig.preset("paper")
    assert names(paper, Stage.TOPIC) == {"topic.bm25", "topic.dense"}
    assert names(paper, Stage.SCENE) == {"scene.bm25", "scene.dense", "scene.trigger.scene", "scene.trigger.horizon"}
    assert names(paper, Stage.ITEM) == {"item.bm25", "item.dense", "item.trigger"}
    assert names(paper, Stage.TURN) == {"turn.unbuilt.bm25", "turn.unbuilt.dense"}
    assert names(paper.without("TF"), Stage.TOPIC) == set()
    assert names(paper.without("IC"), Stage.ITEM) == set()
    assert names(paper.without("ST", "HT"), Stage.SCENE) == {"scene.bm25", "scene.dense"}
    assert names(paper.replace(item_direct_top=5, split_item_triggers=True), Stage.ITEM) == {
        "item.direct.bm25",
        "item.direct.dense",
        "item.trigger.entity",
        "item.trigger.bridge",
    }
    assert names(paper.replace(scene_via_items_top=3), Stage.SCENE) >= {"scene.items"}
    assert names(paper.replace(turn_top=3, unbuilt_top=0), Stage.TURN) == {"turn.bm25", "turn.dense"}
    assert SPECS[RouteName.ITEM_TRIGGER_ENTITY].families_for(paper.replace(item_trigger_families=("bridge",))) == ()


def test_anchorless_routes_are_route_names_with_prefixes_expanded() -> None:
    cfg = ContextLayout(anchorless_routes=frozenset({"turn.dense", "scene.trigger."}))
    assert cfg.anchorless_routes == {"turn.dense", "scene.trigger.scene", "scene.trigger.horizon"}
    assert all(isinstance(r, RouteName) for r in cfg.anchorless_routes)
    assert ContextLayout(anchorless_routes="turn.").anchorless_routes == {
        "turn.bm25",
        "turn.dense",
        "turn.unbuilt.bm25",
        "turn.unbuilt.dense",
    }
    for bad in ("turn.sparse", "nothing.", "rerank."):
        with pytest.raises(ValidationError, match="Unknown route"):
            ContextLayout(anchorless_routes=frozenset({bad}))
    anchorless = SearchResult(space="s", query="q", preset="p", scenes=[], items=[], lexical_anchor=0.1)
    counts = route_filter(anchorless, cfg.replace(lexical_floor=0.25))
    assert counts is not None and counts("scene.trigger.horizon") and not counts("scene.dense")


EVERY = RetrievalConfig.preset("paper").replace(
    kS=6, kI=20, gate=None, split_item_triggers=True, item_direct_top=5, scene_via_items_top=5, turn_top=5
)


def _routes_seen(*configs: RetrievalConfig) -> dict[str, int]:
    """Each route name of the hits of one search per config, with how many hits it reached."""
    store = make_store()
    try:
        retriever = Retriever(store, CountingEmbedder())
        seen: dict[str, int] = {}
        for cfg in configs:
            result = retriever.search(Scope.local(SPACE), "Gina peanuts puppy store dance", cfg)
            for hit in [*result.scenes, *result.items, *result.turns]:
                for r in hit.routes:
                    assert type(r.name) is str  # plain strings in results, as before
                    seen[r.name] = seen.get(r.name, 0) + 1
        return seen
    finally:
        store.close()


def test_every_route_a_search_reports_is_in_the_table() -> None:
    seen = _routes_seen(EVERY, EVERY.replace(split_item_triggers=False, item_direct_top=0))
    expected = set(RouteName) - {"topic.bm25", "topic.dense", "turn.unbuilt.bm25", "turn.unbuilt.dense"}
    assert set(seen) == expected


def test_the_cascade_runs_what_the_table_says(monkeypatch: pytest.MonkeyPatch) -> None:
    before = _routes_seen(EVERY)
    assert before["item.direct.dense"] == 5 and "scene.trigger.horizon" in before
    two = dataclasses.replace(SPECS[RouteName.ITEM_DIRECT_DENSE], top=lambda cfg: 2)
    table = tuple(two if s.name == two.name else s for s in ROUTES if s.name != RouteName.SCENE_TRIGGER_HORIZON)
    monkeypatch.setattr(routes, "ROUTES", table)
    after = _routes_seen(EVERY)
    assert after["item.direct.dense"] == 2 and "scene.trigger.horizon" not in after


def test_a_request_naming_an_unknown_route_is_refused() -> None:
    with pytest.raises(InputError, match="anchorless_routes"):
        as_layout({"anchorless_routes": ["scene.sparse"]})
    layout = as_layout({"anchorless_routes": ["turn.dense"]})
    cfg = retrieval_config({"name": "auto", "kS": 5})
    assert isinstance(cfg, RetrievalConfig)
    resolved = resolve(Asked(cfg, layout), descriptive_only=False)
    assert resolved.config.k_scenes == 5 and resolved.layout.anchorless_routes == {"turn.dense"}


def test_a_route_set_dumps_in_the_route_tables_order() -> None:
    # a set's iteration order hangs on the hash seed and on how it was built; its JSON must not (the client sends it,
    # tests and reports compare it)
    names = [r.value for r in RouteName]
    for order in (names, list(reversed(names)), names[1::2] + names[::2]):
        dumped = ContextLayout(anchorless_routes=order).model_dump(mode="json")["anchorless_routes"]
        assert dumped == names
    switches = RetrievalConfig(disabled=frozenset(reversed(SWITCHES))).model_dump(mode="json")["disabled"]
    assert switches == list(SWITCHES)
