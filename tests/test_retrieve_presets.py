"""The `auto` preset and the direct item route (an extension beyond the paper, off in `paper`)."""

from __future__ import annotations

from tests.test_retrieve_fixtures import SPACE, CountingEmbedder, make_store
from tmem.models import BuildMode
from tmem.retrieve.cascade import Retriever
from tmem.retrieve.config import RetrievalConfig
from tmem.retrieve.recipe import Asked, resolve
from tmem.scope import Scope

# i4 ("Gina is allergic to peanuts") lives in scene s5; a query about peanuts with kS=1 pointed elsewhere by a
# topic filter of one topic keeps it out of the scene pool, so only the direct route can reach it.
QUERY = "allergic to peanuts"


def _items(cfg: RetrievalConfig) -> dict[str, set[str]]:
    store = make_store()
    try:
        result = Retriever(store, CountingEmbedder()).search(Scope.local(SPACE), QUERY, cfg)
        return {h.item.id: {r.name for r in h.routes} for h in result.items}
    finally:
        store.close()


def test_direct_item_route_reaches_items_outside_the_kept_scenes() -> None:
    narrow = RetrievalConfig.preset("paper").replace(kS=0)  # no scene kept: the paper's Stage 3 pool is empty
    assert "i4" not in _items(narrow)
    with_direct = _items(narrow.replace(item_direct_top=5))
    assert "i4" in with_direct
    assert {"item.direct.bm25", "item.direct.dense"} & with_direct["i4"]
    assert "i5" not in with_direct  # superseded items stay out of every route


def _on(cfg: RetrievalConfig, descriptive_only: bool) -> RetrievalConfig:
    return resolve(Asked(cfg), descriptive_only=descriptive_only).config


def test_auto_resolves_per_space_and_keeps_explicit_changes() -> None:
    auto = RetrievalConfig.preset("auto")
    associative = RetrievalConfig.preset("associative")
    assert _on(auto, False).values() == {**associative.values(), "name": "auto:associative", "explicit": frozenset()}
    assert _on(auto, False).gate is None  # rank admission: no absolute cosine gate
    assert RetrievalConfig.preset("paper").gate == 0.85  # the paper's bge-m3 gate stays available
    extractive = _on(auto, True)
    preset = RetrievalConfig.preset("extractive")
    assert extractive.values() == {**preset.values(), "name": "auto:extractive", "explicit": frozenset()}  # every field
    assert (extractive.gate, extractive.item_direct_top) == (0.6, RetrievalConfig.preset("extractive").item_direct_top)
    assert _on(auto.replace(gate=0.7), True).gate == 0.7  # an explicit gate wins
    assert _on(RetrievalConfig.preset("paper"), True).name == "paper"  # others unchanged


def test_search_reports_the_resolved_preset() -> None:
    for mode, expected in ((BuildMode.LLM, "auto:associative"), (BuildMode.EXTRACTIVE, "auto:extractive")):
        store = make_store(mode)
        try:
            assert Retriever(store, CountingEmbedder()).search(Scope.local(SPACE), QUERY).preset == expected
        finally:
            store.close()


def test_scene_items_route_names_the_item_that_reached_the_scene() -> None:
    store = make_store()
    try:
        retriever = Retriever(store, CountingEmbedder())
        cfg = RetrievalConfig.preset("paper").replace(scene_via_items_top=5)
        hit = next(h for h in retriever.search(Scope.local(SPACE), QUERY, cfg).scenes if h.scene.id == "s5")
        (route,) = [r for r in hit.routes if r.name == "scene.items"]
        assert route.view == "i4" and route.rank == 1
        off = retriever.search(Scope.local(SPACE), QUERY, RetrievalConfig.preset("paper"))
        assert all(r.name != "scene.items" for h in off.scenes for r in h.routes)
    finally:
        store.close()
