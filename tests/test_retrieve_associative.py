"""The associative recipe (docs/retrieval.md, "The associative recipe"): how deep a budgeted context's search goes,
and which routes order an anchorless query on an LLM-built space."""

from __future__ import annotations

import json
import shutil
from datetime import datetime
from pathlib import Path

import pytest

from tests.support.openai_stub import OpenAIStub
from tmem import Memory, Settings
from tmem.answer.budget import pack_context, route_filter
from tmem.embed import HashEmbedder
from tmem.models import BuildMode, Scene, Turn
from tmem.retrieve.config import ASSOCIATIVE_ROUTES, RetrievalConfig
from tmem.retrieve.layout import ContextLayout
from tmem.retrieve.recipe import Asked, Recipe, asked, resolve
from tmem.retrieve.types import Route, SceneHit, SearchResult, TurnHit

DAY = datetime(2023, 5, 8, 13, 0)
LLM_BUILT = Path(__file__).resolve().parents[2] / "shared" / "data" / "llm-built" / "d26-plus.db"


def _budgeted(preset: str, max_tokens: int | None, descriptive_only: bool = False) -> Recipe:
    return resolve(asked(RetrievalConfig.preset(preset), None, max_tokens), descriptive_only=descriptive_only)


def test_a_plain_search_is_not_deepened() -> None:
    cfg = RetrievalConfig.preset("associative")
    recipe = _budgeted("associative", None)
    assert recipe.depth == 0 and recipe.config == cfg


def test_a_budgeted_search_keeps_as_many_scenes_as_fit_as_one_turn_each() -> None:
    associative = _budgeted("associative", 1000).config
    assert (associative.k_scenes, associative.k_items, associative.turn_top) == (50, 50, 50)
    # an excerpt with neighbours costs about three turns and a header: an eighth as many scenes
    paper = _budgeted("paper", 1000).config
    assert (paper.k_scenes, paper.k_items, paper.turn_top) == (6, 50, 50)
    # the layout decides: the associative recipe with neighbours asked for keeps an eighth as many too
    neighbours = resolve(
        Asked(RetrievalConfig.preset("associative"), ContextLayout(excerpt_neighbours=True), 50), descriptive_only=False
    )
    assert neighbours.config.k_scenes == 6


def test_auto_resolves_to_the_associative_recipe_on_an_llm_built_space() -> None:
    recipe = _budgeted("auto", 500)
    layout = recipe.layout
    assert layout.lexical_floor is not None and layout.anchorless_routes == ASSOCIATIVE_ROUTES
    assert not layout.excerpt_neighbours and not layout.scene_titles
    assert recipe.config.k_scenes == 25  # the caller's context depth survives the resolution


def _turn(n: int) -> Turn:
    return Turn(id=f"D1:{n}", session_id="s1", seq=n, speaker="Ann", text=f"turn number {n}", time=DAY)


def _result(anchor: float) -> SearchResult:
    """Scene S1 reached first by scene.bm25 only; turn D1:5 reached by turn.dense and S2 by the Horizon route."""
    turns = [_turn(n) for n in range(1, 7)]
    s1 = Scene(
        id="S1", seq=1, title="t1", summary="", narrative="", turn_ids=["D1:1"], start=DAY, end=DAY, mode=BuildMode.LLM
    )
    s2 = Scene(
        id="S2", seq=2, title="t2", summary="", narrative="", turn_ids=["D1:3"], start=DAY, end=DAY, mode=BuildMode.LLM
    )
    return SearchResult(
        space="s",
        query="q",
        preset="associative",
        scenes=[
            SceneHit(scene=s1, turns=turns[:1], score=1.0, routes=[Route(name="scene.bm25", rank=1, score=9.0)]),
            SceneHit(
                scene=s2, turns=turns[2:3], score=0.5, routes=[Route(name="scene.trigger.horizon", rank=2, score=0.4)]
            ),
        ],
        items=[],
        turns=[TurnHit(turn=turns[4], score=0.9, routes=[Route(name="turn.dense", rank=1, score=0.6)])],
        lexical_anchor=anchor,
    )


def test_an_anchorless_query_is_ordered_by_the_associative_routes_only() -> None:
    cfg = _budgeted("associative", None).layout
    anchored, anchorless = _result(0.9), _result(0.05)
    assert route_filter(anchored, cfg) is None
    counts = route_filter(anchorless, cfg)
    assert counts is not None and counts("scene.trigger.horizon") and not counts("scene.bm25")
    # room for two one-turn units: the anchored query keeps the BM25 scene, the anchorless one drops it
    budget = pack_context(anchored, None, neighbours=False, titles=False).tokens - 1
    kept = pack_context(anchored, budget, k0=3, counts=None, neighbours=False, titles=False)
    free = pack_context(anchorless, budget, k0=3, counts=counts, neighbours=False, titles=False)
    assert "D1:1" in kept.turn_ids
    assert free.anchorless and set(free.turn_ids) == {"D1:5", "D1:3"}


def test_ask_hands_the_model_the_context_memory_context_gives(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`ask` packs its context with the space's recipe (anchor rule, one-turn excerpts, session dates), the same text
    `Memory.context` returns for the question and budget."""
    if not LLM_BUILT.exists():
        pytest.skip(f"{LLM_BUILT} is not here")
    shutil.copy(LLM_BUILT, tmp_path / "tmem.db")
    question = "My feet and calves are killing me by every evening lately. Weird, right?"
    with OpenAIStub(reply=lambda body: json.dumps({"answer": "no idea"})) as stub:
        monkeypatch.setenv("OPENAI_BASE_URL", stub.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "stub-key")
        settings = Settings(llm="openai", llm_model="stub-model")
        with Memory.open(tmp_path, settings, embedder=HashEmbedder()) as mem:
            expected = mem.context("d26-plus", question, max_tokens=500)
            mem.ask("d26-plus", question, max_tokens=500)
        prompt = json.dumps(stub.chat_requests[-1].body["messages"])
    assert expected.anchorless and "Scene (" not in expected.text
    lines = [line for line in expected.text.splitlines() if ": " in line and not line.startswith("- ")]
    assert lines and all(json.dumps(line)[1:-1] in prompt for line in lines[:5])
    assert "Scene (" not in prompt
