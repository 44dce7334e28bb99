"""One resolver (issue 32 item 3): explicit overrides are data, `auto` survives a JSON round trip, the context layout
is its own configuration, and a field that moved to the layout is refused with where it went."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tmem.errors import ConfigError, InputError
from tmem.models import TriggerFamily
from tmem.retrieve.config import PRESETS, SWITCHES, RetrievalConfig
from tmem.retrieve.layout import LAYOUT_FIELDS, ContextLayout, as_layout
from tmem.retrieve.recipe import Asked, resolve
from tmem.retrieve.routes import RouteName

counts = st.integers(min_value=0, max_value=60)
unit = st.none() | st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
CONFIG_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "kT": st.integers(min_value=1, max_value=60),
    "kS": counts,
    "kI": counts,
    "R": counts,
    "gate": unit,
    "k0": counts,
    "depth": st.integers(min_value=1, max_value=60),
    "scene_trigger_top": counts,
    "scene_trigger_gate": unit,
    "item_trigger_families": st.sampled_from(
        [(TriggerFamily.ENTITY,), (TriggerFamily.BRIDGE,), (TriggerFamily.ENTITY, TriggerFamily.BRIDGE)]
    ),
    "split_item_triggers": st.booleans(),
    "item_direct_top": counts,
    "scene_via_items_top": counts,
    "turn_top": counts,
    "unbuilt_top": counts,
    "keep_speaker_names": st.booleans(),
    "admit_unlinked_scenes": st.booleans(),
    "disabled": st.frozensets(st.sampled_from(SWITCHES)),
}
LAYOUT_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "context_k0": counts,
    "excerpt_neighbours": st.booleans(),
    "scene_titles": st.booleans(),
    "lexical_floor": unit,
    "anchorless_routes": st.frozensets(st.sampled_from(list(RouteName))),
    "order": st.sampled_from(["date", "rank"]),
    "lead": counts,
}


@st.composite
def configs(draw: st.DrawFn) -> RetrievalConfig:
    """A preset (most often `auto`) with a random set of fields given, each to a valid value (the default included)."""
    name = draw(st.sampled_from(["auto", "auto", *PRESETS]))
    given_fields = draw(st.lists(st.sampled_from(sorted(CONFIG_FIELDS)), unique=True))
    return RetrievalConfig.preset(name).replace(**{f: draw(CONFIG_FIELDS[f]) for f in given_fields})


@st.composite
def layouts(draw: st.DrawFn) -> ContextLayout:
    given_fields = draw(st.lists(st.sampled_from(sorted(LAYOUT_VALUES)), unique=True))
    return ContextLayout(**{f: draw(LAYOUT_VALUES[f]) for f in given_fields})


def test_every_layout_field_has_a_strategy() -> None:
    assert set(LAYOUT_VALUES) == LAYOUT_FIELDS  # a new layout field is round-tripped too


@settings(max_examples=200, deadline=None)
@given(configs(), layouts(), st.integers(min_value=0, max_value=200), st.booleans())
def test_a_json_round_trip_resolves_the_same(
    config: RetrievalConfig, layout: ContextLayout, depth: int, descriptive_only: bool
) -> None:
    for sent in (config.model_dump_json(), config.model_dump_json(by_alias=True)):
        assert RetrievalConfig.model_validate_json(sent) == config
    back = RetrievalConfig.model_validate(config.model_dump())  # a Python dump too: every field given, none lost
    assert back == config and back.explicit == config.explicit
    laid = ContextLayout.model_validate_json(layout.model_dump_json())
    assert laid == layout
    asked, again = Asked(config, layout, depth), Asked(back, laid, depth)
    for kind in (descriptive_only, not descriptive_only):
        assert resolve(asked, descriptive_only=kind) == resolve(again, descriptive_only=kind)


@settings(max_examples=100, deadline=None)
@given(configs(), st.booleans())
def test_auto_never_replaces_what_the_caller_set(config: RetrievalConfig, descriptive_only: bool) -> None:
    resolved = resolve(Asked(config), descriptive_only=descriptive_only).config
    for name in config.explicit:
        assert getattr(resolved, name) == getattr(config, name), name
    assert resolved.explicit == config.explicit


def test_explicit_is_recorded_from_the_given_keys() -> None:
    assert RetrievalConfig(name="auto", kS=3, gate=None).explicit == {"k_scenes", "gate"}
    assert RetrievalConfig.model_validate({"name": "auto", "gate": 0.85}).explicit == {"gate"}
    assert ContextLayout(context_k0=1).explicit == {"context_k0"}
    # a field set to its default counts: auto keeps the paper's gate when asked for by name
    on_llm = resolve(Asked(RetrievalConfig(name="auto", gate=0.85)), descriptive_only=False)
    assert on_llm.config.gate == 0.85
    assert resolve(Asked(RetrievalConfig(name="auto")), descriptive_only=False).config.gate is None
    with pytest.raises(ValueError, match="not fields"):
        RetrievalConfig.model_validate({"name": "auto", "explicit": ["k_scenes", "context_k0"]})


def test_a_moved_field_is_refused_with_where_it_went() -> None:
    for name in sorted(LAYOUT_FIELDS):
        with pytest.raises(ConfigError, match=rf"{name} is no longer a retrieval config field.*layout="):
            RetrievalConfig.model_validate({"name": "auto", name: None})
    with pytest.raises(ConfigError, match="context_k0"):
        RetrievalConfig(context_k0=3)  # type: ignore[call-arg]


def test_the_layout_resolves_per_recipe_and_keeps_what_was_set() -> None:
    auto = RetrievalConfig.preset("auto")
    llm = resolve(Asked(auto), descriptive_only=False).layout
    assert (llm.context_k0, llm.excerpt_neighbours, llm.scene_titles) == (3, False, False)
    extractive = resolve(Asked(auto), descriptive_only=True).layout
    assert (extractive.context_k0, extractive.excerpt_neighbours, extractive.lexical_floor) == (0, True, 0.25)
    paper = resolve(Asked(RetrievalConfig.preset("paper")), descriptive_only=False).layout
    assert paper == ContextLayout()  # any other recipe: the defaults
    mine = resolve(Asked(auto, ContextLayout(excerpt_neighbours=True)), descriptive_only=False)
    assert mine.layout.excerpt_neighbours and not mine.layout.scene_titles
    # a space never built fuses whole-list ranks with the search's k0 unless context_k0 was set
    assert resolve(Asked(auto), descriptive_only=False, never_built=True).layout.context_k0 == 60
    pinned = Asked(auto, ContextLayout(context_k0=2))
    assert resolve(pinned, descriptive_only=False, never_built=True).layout.context_k0 == 2


def test_a_layout_given_as_fields_is_validated() -> None:
    assert as_layout(None) == ContextLayout()
    assert as_layout({"scene_titles": False}).explicit == {"scene_titles"}
    with pytest.raises(InputError, match="Invalid context layout field context_k0"):
        as_layout({"context_k0": -1})
    with pytest.raises(InputError, match="Invalid context layout field kS"):
        as_layout({"kS": 3})


def test_the_resolver_is_called_in_one_place() -> None:
    """`resolve` runs once per search, in Retriever.search: no other module of the library resolves a recipe."""
    src = Path(__file__).resolve().parents[1] / "src" / "tmem"
    calls = []
    for path in sorted(src.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported = any(
            isinstance(n, ast.ImportFrom)
            and n.module == "tmem.retrieve.recipe"
            and any(a.name == "resolve" for a in n.names)
            for n in ast.walk(tree)
        )
        for node in ast.walk(tree):
            if (
                imported
                and isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "resolve"
            ):
                calls.append(f"{path.relative_to(src)}:{node.lineno}")
    assert len(calls) == 1 and calls[0].startswith("retrieve/cascade.py"), calls
    assert not hasattr(RetrievalConfig, "for_space") and "context_depth" not in RetrievalConfig.model_fields
