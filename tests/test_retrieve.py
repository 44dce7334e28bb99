"""The cascade on a hand-made space stored like a scripted-LLM build: bypass, gate, switches, budgets, caching."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.test_retrieve_fixtures import (
    BRIDGE_CUE,
    ENTITY_CUE,
    HORIZON_CUE,
    SCENE_CUE,
    SPACE,
    WEAK_BRIDGE,
    CountingEmbedder,
    make_store,
)
from tmem.embed.base import EmbeddingResult
from tmem.embed.hashing import HashEmbedder
from tmem.errors import ConfigError, NotFoundError
from tmem.index.backend import MemoryVectorIndex
from tmem.index.views import ViewRow, ViewTable
from tmem.models import BuildMode, Item, ItemKind, Session, TriggerFamily, Turn
from tmem.retrieve.cascade import QUERY_MEMO, Retriever
from tmem.retrieve.config import SWITCHES, RetrievalConfig
from tmem.retrieve.types import SearchResult
from tmem.scope import Scope
from tmem.store import open_store
from tmem.store.sqlite import SQLiteStore

CFG = RetrievalConfig.preset("paper")


@pytest.fixture
def store() -> Iterator[SQLiteStore]:
    s = make_store()
    yield s
    s.close()


@pytest.fixture
def retriever(store: SQLiteStore) -> Retriever:
    return Retriever(store, CountingEmbedder())


def scene_ids(res: SearchResult) -> list[str]:
    return [h.scene.id for h in res.scenes]


def item_ids(res: SearchResult) -> list[str]:
    return [h.item.id for h in res.items]


def route_names(res: SearchResult) -> set[str]:
    return {r.name for h in [*res.scenes, *res.items] for r in h.routes}


def stage2_routes(res: SearchResult) -> dict[tuple[str, str], tuple[int, float]]:
    return {(h.scene.id, r.name): (r.rank, r.score) for h in res.scenes for r in h.routes}


# ------------------------------------------------------------------ trigger indices


def test_view_table_host_score_is_nan_aware_max_over_views() -> None:
    emb = CountingEmbedder(64)
    rows = [
        ViewRow(0, TriggerFamily.BRIDGE, "bridge", "red apple"),
        ViewRow(0, TriggerFamily.BRIDGE, "joint", "green pear"),
        ViewRow(2, TriggerFamily.BRIDGE, "bridge", "blue sky"),
        ViewRow(2, TriggerFamily.BRIDGE, "joint", "   "),  # empty view: not indexed
        ViewRow(1, TriggerFamily.ENTITY, "concept", "green pear"),  # other family: not in this table
    ]
    table = ViewTable.build(TriggerFamily.BRIDGE, 4, rows, lambda t: emb.embed(t).vectors, 64)
    assert len(table) == 3 and table.hosts_with_views == 2
    q = emb.embed(["green pear"]).vectors[0]
    scores = table.host_scores(q)
    cos = {t: float(emb.embed([t]).vectors[0] @ q) for t in ("red apple", "green pear", "blue sky")}
    assert scores[0] == pytest.approx(max(cos["red apple"], cos["green pear"]))
    assert scores[2] == pytest.approx(cos["blue sky"])
    assert np.isnan(scores[1]) and np.isnan(scores[3])  # hosts without views are absent, not zero
    cos = table.cosines(q)
    assert table.host_scores(q, cos).tolist() == pytest.approx(scores.tolist(), nan_ok=True)
    assert table.best_view(cos, 0) == "joint"
    assert table.best_view(cos, 1) is None


def test_one_stack_holds_every_vector_once(retriever: Retriever) -> None:
    """The in-process backend keeps every node and view vector once, in one matrix; its lookups equal a cosine over
    each part's own texts, and a host's score is the max over its views (the ViewTable reference)."""
    index = retriever.index(Scope.local(SPACE))
    assert isinstance(index.vectors, MemoryVectorIndex)
    counts = index.counts()
    assert index.vectors.matrix.shape == (sum(counts.values()), 256) == (len(index.entries), 256)
    emb = CountingEmbedder()
    q = retriever.embed_query("Gina clothing store")
    scenes = index.vectors.top_k("scene", q, 100)
    want = emb.embed(index.node_texts["scene"]).vectors @ q
    assert {h.id: h.score for h in scenes} == pytest.approx(dict(zip(index.ids["scene"], want.tolist(), strict=True)))
    rows = [
        ViewRow(index.scene_pos[e.host], TriggerFamily.HORIZON, e.view, t)
        for e, t in zip(index.entries, index.entry_texts, strict=True)
        if e.part == "views.horizon"
    ]
    table = ViewTable.build(TriggerFamily.HORIZON, len(index.scenes), rows, lambda t: emb.embed(t).vectors, 256)
    ref = table.host_scores(q)
    hosts = index.vectors.top_hosts(["views.horizon"], q, 100)
    assert len(hosts) == table.hosts_with_views > 0
    for h in hosts:
        assert h.score == pytest.approx(float(ref[index.scene_pos[h.host]]))
        assert h.view == table.best_view(table.cosines(q), index.scene_pos[h.host])


def test_superseded_items_and_their_triggers_are_not_indexed(retriever: Retriever) -> None:
    index = retriever.index(Scope.local(SPACE))
    assert "i5" not in index.item_pos
    res = retriever.search(
        Scope.local(SPACE), "Gina owns a goldfish named Bubbles pet fish", CFG.without("TF").replace(gate=None)
    )
    assert "i5" not in item_ids(res)


def test_host_without_views_never_gets_a_trigger_route(retriever: Retriever) -> None:
    cfg = CFG.replace(gate=None, R=100, kI=100)
    res = retriever.search(Scope.local(SPACE), "clothing store wholesaler", cfg)
    for hit in res.items:
        if hit.item.id in {"i2", "i6"}:  # no triggers hosted
            assert all(r.name != "item.trigger" for r in hit.routes)


# ------------------------------------------------------------------ the cascade


def test_bypass_horizon_scene_returns_when_all_its_topics_are_filtered_out(retriever: Retriever) -> None:
    cfg = CFG.replace(kT=1)
    res = retriever.search(Scope.local(SPACE), HORIZON_CUE, cfg)
    assert len(res.topics) == 1 and res.topics[0][0] != "t_work"  # s6's only topic did not survive
    hit = next(h for h in res.scenes if h.scene.id == "s6")
    assert [r.name for r in hit.routes] == ["scene.trigger.horizon"]
    assert hit.routes[0].view == "horizon:0" and hit.routes[0].score == pytest.approx(1.0)
    assert hit.topic_ids == []
    assert [t.id for t in hit.turns] == hit.scene.turn_ids
    assert hit.turns[0].time.year == 2023  # dated raw turns
    assert "s6" not in scene_ids(retriever.search(Scope.local(SPACE), HORIZON_CUE, cfg.without("HT")))


def test_topic_filter_gates_descriptive_routes(retriever: Retriever) -> None:
    cfg = CFG.replace(kT=1)
    res = retriever.search(Scope.local(SPACE), "dance studio lease downtown", cfg.without("ST", "HT"))
    assert res.topics[0][0] == "t_dance"
    assert scene_ids(res) == ["s3"]  # only the surviving topic's scene is admitted
    assert all(h.topic_ids == ["t_dance"] for h in res.scenes)


def test_gate_on_item_trigger_route(retriever: Retriever) -> None:
    cfg = CFG.replace(kS=1).without("ST", "HT")
    res = retriever.search(Scope.local(SPACE), BRIDGE_CUE, cfg)
    hit = next(h for h in res.items if h.item.id == "i4")  # s5 is not kept: reached through its Bridge view only
    route = next(r for r in hit.routes if r.name == "item.trigger")
    assert route.gate == 0.85 and route.score >= 0.85 and route.view == "bridge:bridge"
    assert [s.id for s in hit.source_scenes] == ["s5"] and hit.source_turn_ids == ["D5:1", "D5:2"]
    # i3's bridge view is only loosely related to the cue: below the gate, kept when the gate is off
    weak = float(retriever.embed_query(WEAK_BRIDGE) @ retriever.embed_query(BRIDGE_CUE))
    assert 0 < weak < 0.85
    assert "i3" not in item_ids(res)
    # ... and the result says so: i3 fell under the gate on the item-trigger route, with its cosine and view
    miss = next(m for m in res.gated if m.host_id == "i3")
    assert miss.route == "item.trigger" and miss.host_kind == "item" and miss.gate == 0.85
    assert miss.score == pytest.approx(weak, abs=1e-5) and miss.view == "bridge:bridge" and miss.rank >= 1
    assert all(m.score < 0.85 for m in res.gated)
    assert {m.host_id for m in res.gated}.isdisjoint(
        {h.item.id for h in res.items if any(r.name == "item.trigger" for r in h.routes)}
    )
    ungated = retriever.search(Scope.local(SPACE), BRIDGE_CUE, cfg.replace(gate=None))
    i3 = next(h for h in ungated.items if h.item.id == "i3")
    assert ungated.gated == []
    assert any(r.name == "item.trigger" and r.gate is None for r in i3.routes)
    assert "i3" not in item_ids(retriever.search(Scope.local(SPACE), BRIDGE_CUE, cfg.replace(gate=weak + 1e-4)))
    assert "i3" in item_ids(retriever.search(Scope.local(SPACE), BRIDGE_CUE, cfg.replace(gate=weak - 1e-4)))


def test_entity_only_union_ignores_bridge_views(retriever: Retriever) -> None:
    cfg = CFG.replace(kS=1, item_trigger_families=("entity",)).without("ST", "HT")
    assert "i4" not in item_ids(retriever.search(Scope.local(SPACE), BRIDGE_CUE, cfg))
    res = retriever.search(Scope.local(SPACE), ENTITY_CUE, cfg.replace(gate=None))
    i1 = next(h for h in res.items if h.item.id == "i1")
    assert any(r.name == "item.trigger" and r.view == "entity:concept" for r in i1.routes)


@pytest.mark.parametrize("kT,kS,kI,R", [(1, 1, 1, 1), (2, 3, 2, 1), (15, 5, 15, 10), (3, 0, 0, 0), (5, 6, 2, 3)])
def test_budgets_respected(retriever: Retriever, kT: int, kS: int, kI: int, R: int) -> None:
    cfg = CFG.replace(kT=kT, kS=kS, kI=kI, R=R, gate=None, scene_trigger_top=2)
    for q in (HORIZON_CUE, BRIDGE_CUE, "Gina clothing store", SCENE_CUE, "zzz unknown words"):
        res = retriever.search(Scope.local(SPACE), q, cfg)
        assert len(res.topics) <= kT and len(res.scenes) <= kS and len(res.items) <= kI
        for h in res.items:
            assert all(r.rank <= R for r in h.routes if r.name == "item.trigger")
        for sh in res.scenes:
            assert all(r.rank <= 2 for r in sh.routes if r.name.startswith("scene.trigger"))
        kept = set(scene_ids(res))
        for h in res.items:  # items come from kept scenes unless a trigger reached them
            if not any(r.name == "item.trigger" for r in h.routes):
                assert kept & set(h.item.scene_ids) or kS == 0


def test_scores_are_fused_and_sorted(retriever: Retriever) -> None:
    res = retriever.search(Scope.local(SPACE), "Gina clothing store wholesaler", CFG)
    for hits in (res.scenes, res.items):
        scores = [h.score for h in hits]
        assert scores == sorted(scores, reverse=True)
        for h in hits:
            assert h.score == pytest.approx(sum(1 / (60 + r.rank) for r in h.routes))


# ------------------------------------------------------------------ ablation switches: one test each


def test_switch_SL_removes_scene_evidence_only(retriever: Retriever) -> None:
    full = retriever.search(Scope.local(SPACE), "Gina clothing store", CFG)
    off = retriever.search(Scope.local(SPACE), "Gina clothing store", CFG.without("SL"))
    assert full.scenes and off.scenes == []
    assert off.items == full.items and off.personas == full.personas and off.topics == full.topics
    assert off.disabled == ["SL"]


def test_switch_IC_removes_items_only(retriever: Retriever) -> None:
    full = retriever.search(Scope.local(SPACE), "Gina clothing store", CFG)
    off = retriever.search(Scope.local(SPACE), "Gina clothing store", CFG.without("IC"))
    assert full.items and off.items == []
    assert off.scenes == full.scenes and off.personas == full.personas


def test_switch_ETBT_removes_item_trigger_route_only(retriever: Retriever) -> None:
    cfg = CFG.replace(kS=1)
    full = retriever.search(Scope.local(SPACE), BRIDGE_CUE, cfg)
    off = retriever.search(Scope.local(SPACE), BRIDGE_CUE, cfg.without("ET+BT"))
    assert "item.trigger" in route_names(full) and "item.trigger" not in route_names(off)
    assert "i4" in item_ids(full) and "i4" not in item_ids(off)
    assert off.scenes == full.scenes and off.personas == full.personas
    assert {i for i in item_ids(full) if i != "i4"} == set(item_ids(off))


def test_switch_PS_removes_persona_only(retriever: Retriever) -> None:
    full = retriever.search(Scope.local(SPACE), "Gina clothing store", CFG)
    off = retriever.search(Scope.local(SPACE), "Gina clothing store", CFG.without("PS"))
    assert [p.speaker for p in full.personas] == ["Gina"] and off.personas == []
    assert off.scenes == full.scenes and off.items == full.items


def test_switch_TF_admits_every_scene(retriever: Retriever) -> None:
    cfg = CFG.replace(kT=1).without("ST", "HT")
    full = retriever.search(Scope.local(SPACE), "Gina dance studio", cfg)
    off = retriever.search(Scope.local(SPACE), "Gina dance studio", cfg.without("TF"))
    assert len(full.topics) == 1 and off.topics == []
    assert len(set(scene_ids(off))) > len(set(scene_ids(full)))
    assert all(h.topic_ids == [] for h in off.scenes)
    assert off.personas == full.personas


@pytest.mark.parametrize(("switch", "route"), [("ST", "scene.trigger.scene"), ("HT", "scene.trigger.horizon")])
def test_switch_scene_trigger_families(retriever: Retriever, switch: str, route: str) -> None:
    cue, host = (SCENE_CUE, "s3") if switch == "ST" else (HORIZON_CUE, "s6")
    cfg = CFG.replace(kT=1)
    full = retriever.search(Scope.local(SPACE), cue, cfg)
    off = retriever.search(Scope.local(SPACE), cue, cfg.without(switch))
    assert route in route_names(full) and route not in route_names(off)
    assert host in scene_ids(full) and host not in scene_ids(off)
    # every other stage-2 list ranks and scores exactly as before
    both = set(scene_ids(full)) & set(scene_ids(off))
    before = {k: v for k, v in stage2_routes(full).items() if k[0] in both and k[1] != route}
    after = {k: v for k, v in stage2_routes(off).items() if k[0] in both}
    assert before == after
    assert off.topics == full.topics and off.personas == full.personas


def test_every_switch_has_a_test() -> None:
    assert set(SWITCHES) == {"SL", "IC", "ET+BT", "PS", "TF", "ST", "HT"}


# ------------------------------------------------------------------ config


def test_presets_and_errors() -> None:
    assert CFG.k_topics == 15 and CFG.k_scenes == 5 and CFG.k_items == 15
    assert CFG.item_trigger_top == 10 and CFG.gate == 0.85 and CFG.k0 == 60
    assert RetrievalConfig.preset("descriptive").disabled == frozenset({"HT", "PS"})
    assert RetrievalConfig.preset("no-triggers").disabled == frozenset({"ET+BT", "ST", "HT"})
    assert RetrievalConfig(kT=3, R=4).k_topics == 3
    assert CFG.replace(kS=2).k_scenes == 2 and CFG.k_scenes == 5
    with pytest.raises(ConfigError, match="Unknown retrieval preset"):
        RetrievalConfig.preset("nope")
    with pytest.raises(ConfigError, match="Unknown ablation switch"):
        CFG.without("XX")


# ------------------------------------------------------------------ caching and incremental updates


def test_index_built_once_and_query_embedded_once(store: SQLiteStore) -> None:
    emb = CountingEmbedder()
    r = Retriever(store, emb)
    r.search(Scope.local(SPACE), "first query")
    assert r.builds == 1
    before = len(emb.texts)
    r.search(Scope.local(SPACE), "second query")
    r.search(Scope.local(SPACE), "third query", CFG.without("TF"))
    assert r.builds == 1
    assert emb.texts[before:] == ["second query", "third query"]


def test_new_nodes_rebuild_without_reembedding_stored_texts(store: SQLiteStore) -> None:
    emb = CountingEmbedder()
    Retriever(store, emb).search(Scope.local(SPACE), "warm the embedding cache")
    emb.texts.clear()
    fresh = Retriever(store, emb)  # a new process: vectors come from the store's cache
    fresh.search(Scope.local(SPACE), "Gina")
    assert emb.texts == ["Gina"]
    new_item = Item(id="i7", text="Jon started teaching salsa classes.", kind=ItemKind.ATOMIC, scene_ids=["s3"])
    store.put_items(Scope.local(SPACE), [new_item])
    store.set_state(Scope.local(SPACE), "build.sessions", "7")  # what a build does when it commits
    emb.texts.clear()
    res = fresh.search(Scope.local(SPACE), "salsa classes", CFG.replace(kS=5))
    assert fresh.builds == 2
    assert emb.texts == ["Jon started teaching salsa classes.", "salsa classes"]
    assert item_ids(res)[0] == "i7"


def test_unknown_space_raises_not_found(retriever: Retriever) -> None:
    with pytest.raises(NotFoundError):
        retriever.search(Scope.local("nobody"), "hello")


def test_empty_space_returns_empty_result(store: SQLiteStore) -> None:
    store.ensure_space(Scope.local("empty"))
    res = Retriever(store, CountingEmbedder()).search(Scope.local("empty"), "anything")
    assert res.scenes == [] and res.items == [] and res.topics == [] and not res.descriptive_only


def test_space_with_turns_but_no_memory_answers_from_its_raw_turns(store: SQLiteStore) -> None:
    """A space never built is searched as raw turns (the unbuilt-turn route), never refused; the result says how many
    turns no build holds yet."""
    store.ensure_space(Scope.local("raw"))
    when = datetime(2023, 5, 8, 13, 56)
    store.add_session(
        Scope.local("raw"),
        Session(id="session_1", seq=0, started_at=when, content_hash="h1"),
        [
            Turn(id="D1:1", session_id="session_1", seq=0, speaker="Gina", text="I opened a dance studio.", time=when),
            Turn(id="D1:2", session_id="session_1", seq=1, speaker="Jon", text="My bank is closing.", time=when),
        ],
    )
    res = Retriever(store, CountingEmbedder()).search(Scope.local("raw"), "dance studio")
    assert res.scenes == [] and res.items == [] and res.unbuilt_turns == 2
    assert res.turns[0].turn.id == "D1:1" and res.turns[0].scene_id is None
    assert {r.name for r in res.turns[0].routes} >= {"turn.unbuilt.bm25", "turn.unbuilt.dense"}
    off = Retriever(store, CountingEmbedder()).search(
        Scope.local("raw"), "dance studio", RetrievalConfig(unbuilt_top=0)
    )
    assert off.turns == []  # the route is a setting: off, a plain search reaches no raw turn


# ------------------------------------------------------------------ reranker wiring


class KeywordReranker:
    """Deterministic scorer: how often the word 'Gina' occurs, minus a tiny length penalty."""

    @property
    def model_id(self) -> str:
        return "keyword"

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        return [t.count("Gina") - len(t) / 1e4 for t in texts]


def test_reranker_reorders_and_is_explained(store: SQLiteStore) -> None:
    r = Retriever(store, CountingEmbedder(), reranker=KeywordReranker())
    res = r.search(Scope.local(SPACE), "store dance studio puppy", CFG.without("ST", "HT"))
    scores = [h.score for h in res.scenes]
    assert scores == sorted(scores, reverse=True)
    for h in [*res.scenes, *res.items]:
        rr = [x for x in h.routes if x.name == "rerank.keyword"]
        assert len(rr) == 1 and rr[0].score == h.score
    assert all("Gina" in (h.scene.title + h.scene.summary) for h in res.scenes[:1])


def test_configured_reranker_that_cannot_load_says_what_to_do(store: SQLiteStore, tmp_path: object) -> None:
    r = Retriever(store, CountingEmbedder())
    with pytest.raises(ConfigError, match="TMEM_RERANKER_MODEL"):
        r.search(Scope.local(SPACE), "Gina", CFG.replace(reranker=str(tmp_path) + "/no-such-model"))


# ------------------------------------------------------------------ extractive spaces


def test_extractive_space_is_descriptive_only() -> None:
    s = make_store(BuildMode.EXTRACTIVE)
    try:
        res = Retriever(s, CountingEmbedder()).search(Scope.local(SPACE), ENTITY_CUE, CFG.replace(gate=None))
        assert res.descriptive_only
        assert res.personas == []
        assert not {n for n in route_names(res) if n.startswith("scene.trigger")}
        assert res.scenes and res.items
    finally:
        s.close()


# ------------------------------------------------------------------ invariants over random recipes


@pytest.fixture(scope="module")
def shared() -> Iterator[Retriever]:
    s = make_store()
    yield Retriever(s, CountingEmbedder())
    s.close()


@settings(max_examples=60, deadline=None)
@given(
    kT=st.integers(1, 6),
    kS=st.integers(0, 7),
    kI=st.integers(0, 7),
    R=st.integers(0, 7),
    gate_value=st.one_of(st.none(), st.floats(0.0, 1.0)),
    off=st.sets(st.sampled_from(SWITCHES)),
    query=st.sampled_from([HORIZON_CUE, BRIDGE_CUE, SCENE_CUE, ENTITY_CUE, "Gina clothing store", "nothing known"]),
)
def test_cascade_invariants(
    shared: Retriever, kT: int, kS: int, kI: int, R: int, gate_value: float | None, off: set[str], query: str
) -> None:
    cfg = CFG.replace(kT=kT, kS=kS, kI=kI, R=R, gate=gate_value).without(*off)
    res = shared.search(Scope.local(SPACE), query, cfg)
    names = route_names(res)
    assert len(res.topics) <= kT and len(res.scenes) <= kS and len(res.items) <= kI
    assert res.disabled == sorted(off)
    assert ("SL" not in off) or res.scenes == []
    assert ("IC" not in off) or res.items == []
    assert ("PS" not in off) or res.personas == []
    assert ("TF" not in off) or res.topics == []
    assert ("ET+BT" not in off) or "item.trigger" not in names
    assert ("ST" not in off) or "scene.trigger.scene" not in names
    assert ("HT" not in off) or "scene.trigger.horizon" not in names
    for hits in (res.scenes, res.items):
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    for h in res.items:
        assert h.item.superseded_by is None
        for r in h.routes:
            if r.name == "item.trigger":
                assert r.rank <= R and (gate_value is None or r.score >= gate_value)
    surviving = {t for t, _ in res.topics}
    for sh in res.scenes:  # descriptive routes only reach admitted scenes (or unlinked ones)
        if "TF" not in off and any(r.name in ("scene.bm25", "scene.dense") for r in sh.routes):
            assert set(sh.topic_ids) <= surviving and sh.topic_ids


def test_approximate_parts_answer_like_exact_ones(store: SQLiteStore) -> None:
    """With every part over ``approx_above`` (all held in IVFs, every list visited at this size), the cascade returns
    what the exact index returns, up to the order of equal scores; the setting's default is the index's."""
    from tmem.index.backend import APPROX_ABOVE
    from tmem.settings import Settings

    assert Settings().approx_above == APPROX_ABOVE
    exact = Retriever(store, CountingEmbedder())
    approx = Retriever(store, CountingEmbedder(), approx_above=1)
    vectors = approx.index(Scope.local(SPACE)).vectors
    assert isinstance(vectors, MemoryVectorIndex) and {"scene", "item", "turn"} <= set(vectors.approximate_parts)
    for q in (ENTITY_CUE, BRIDGE_CUE, SCENE_CUE, HORIZON_CUE, "Gina clothing store"):
        a, e = approx.search(Scope.local(SPACE), q, CFG), exact.search(Scope.local(SPACE), q, CFG)
        # equal cosines may come back in another order (approximate parts rank ties by score alone), which moves
        # the fused RRF scores by a rank's worth at most
        assert sorted(item_ids(a)) == sorted(item_ids(e)) and sorted(scene_ids(a)) == sorted(scene_ids(e))
        assert [h.score for h in a.items] == pytest.approx([h.score for h in e.items], abs=2e-3)
        assert [h.score for h in a.scenes] == pytest.approx([h.score for h in e.scenes], abs=2e-3)


class _Counting(HashEmbedder):
    def __init__(self) -> None:
        super().__init__(dim=64)
        self.calls: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> EmbeddingResult:
        self.calls.append(list(texts))
        return super().embed(texts)


def test_a_query_searched_again_is_not_embedded_again(tmp_path: Path) -> None:
    """A filtered context deepens its search with the same query each round: the vector is kept, not re-embedded."""
    store = open_store(tmp_path / "q.db")
    try:
        embedder = _Counting()
        retriever = Retriever(store, embedder)
        first = retriever.embed_query("where does dana work")
        first[:] = 0.0  # a caller writing into its vector does not change what is kept
        again = retriever.embed_query("where does dana work")
        assert embedder.calls == [["where does dana work"]]
        assert np.array_equal(again, HashEmbedder(dim=64).embed(["where does dana work"]).vectors[0])
        for n in range(QUERY_MEMO):  # the oldest query falls out once QUERY_MEMO others came after it
            retriever.embed_query(f"other question {n}")
        embedder.calls.clear()
        retriever.embed_query("where does dana work")
        assert embedder.calls == [["where does dana work"]]
    finally:
        store.close()
