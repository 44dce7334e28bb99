"""The strict json_schema transformer and the local JSON repair, with property tests."""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Any, Literal

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field, create_model

from tests.support.openai_stub import minimal_instance
from tmem.llm.repair import repair_json
from tmem.llm.request import build_request, chat_body
from tmem.llm.schema import strict_json_schema


class Mood(StrEnum):
    HAPPY = "happy"
    SAD = "sad"


class Place(BaseModel):
    city: str = Field(description="City name.")
    country: str | None = None


class Dimension(BaseModel):
    need: str
    places: list[Place] = Field(default_factory=list)


class Horizon(BaseModel):
    """Nested models, Optional, lists, defaults, enums and literals together."""

    dimensions: list[Dimension] = Field(min_length=1)
    home: Place = Field(description="Where the speaker lives.")
    previous: Place | None = None
    mood: Mood = Mood.HAPPY
    kind: Literal["scene", "item"] = "scene"
    score: float = 0.5
    tags: list[str] = []


def object_nodes(node: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    if isinstance(node, dict):
        if node.get("type") == "object" or "properties" in node:
            found.append(node)
        for value in node.values():
            found += object_nodes(value)
    elif isinstance(node, list):
        for value in node:
            found += object_nodes(value)
    return found


def assert_strict(schema: dict[str, Any]) -> None:
    text = json.dumps(schema)
    assert '"default"' not in text and '"title"' not in text
    for obj in object_nodes(schema):
        assert obj["additionalProperties"] is False, obj
        assert obj.get("required", []) == list(obj.get("properties", {})), obj

    def no_ref_siblings(node: Any) -> None:
        if isinstance(node, dict):
            assert "$ref" not in node or len(node) == 1, node
            for value in node.values():
                no_ref_siblings(value)
        elif isinstance(node, list):
            for value in node:
                no_ref_siblings(value)

    no_ref_siblings(schema)


def test_nested_optional_lists_enums_are_made_strict() -> None:
    strict = strict_json_schema(Horizon)
    assert strict.name == "Horizon" and strict.strict
    schema = strict.schema
    assert_strict(schema)
    props = schema["properties"]
    assert schema["required"] == list(Horizon.model_fields)
    # Optional stays nullable; a described nested model is inlined with its description.
    assert {"type": "null"} in props["previous"]["anyOf"]
    assert props["home"]["description"] == "Where the speaker lives." and props["home"]["required"] == [
        "city",
        "country",
    ]
    assert props["dimensions"]["minItems"] == 1
    assert props["dimensions"]["items"] == {"$ref": "#/$defs/Dimension"}
    assert set(schema["$defs"]) >= {"Dimension", "Place", "Mood"}
    assert schema["$defs"]["Mood"]["enum"] == ["happy", "sad"]
    assert props["kind"]["enum"] == ["scene", "item"]
    # The pydantic model itself is untouched, and a minimal instance of the strict schema validates.
    assert "default" in json.dumps(Horizon.model_json_schema())
    Horizon.model_validate(minimal_instance(schema, schema) | {"dimensions": [{"need": "x", "places": []}]})


def test_free_form_maps_are_flagged_not_strict() -> None:
    class Counts(BaseModel):
        per_speaker: dict[str, int]

    strict = strict_json_schema(Counts)
    assert not strict.strict
    body = chat_body(build_request("m", [], Counts), "json_schema")
    assert body["response_format"]["json_schema"]["strict"] is False


# ---------------------------------------------------------------------------------------------------- property tests

_LEAVES: list[Any] = [str, int, float, bool, str | None, list[str], Literal["a", "b"]]


@st.composite
def random_models(draw: st.DrawFn, depth: int = 0) -> type[BaseModel]:
    n = draw(st.integers(1, 4))
    fields: dict[str, Any] = {}
    for i in range(n):
        if depth < 2 and draw(st.booleans()):
            sub = draw(random_models(depth=depth + 1))
            wrap = draw(st.sampled_from(["plain", "list", "optional", "described"]))
            if wrap == "list":
                fields[f"f{i}"] = (list[sub], ...)  # type: ignore[valid-type]
            elif wrap == "optional":
                fields[f"f{i}"] = (sub | None, None)
            elif wrap == "described":
                fields[f"f{i}"] = (sub, Field(description=f"nested {i}"))
            else:
                fields[f"f{i}"] = (sub, ...)
        else:
            leaf = draw(st.sampled_from(_LEAVES))
            fields[f"f{i}"] = (leaf, ...) if draw(st.booleans()) else (leaf | None, None)
    return create_model(f"M{depth}_{draw(st.integers(0, 10_000))}", **fields)


@settings(max_examples=60, deadline=None)
@given(random_models())
def test_any_model_becomes_strict_and_keeps_its_meaning(model: type[BaseModel]) -> None:
    strict = strict_json_schema(model)
    assert strict.strict
    assert_strict(strict.schema)
    model.model_validate(minimal_instance(strict.schema, strict.schema))


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3),
    max_leaves=10,
)


def with_trailing_commas(value: Any) -> str:
    if isinstance(value, dict):
        inner = "".join(f"{json.dumps(k)}: {with_trailing_commas(v)}, " for k, v in value.items())
        return "{" + inner + "}"
    if isinstance(value, list):
        return "[" + "".join(f"{with_trailing_commas(v)},\n" for v in value) + "]"
    return json.dumps(value)


@settings(max_examples=150, deadline=None)
@given(
    st.dictionaries(st.text(max_size=6), json_values, max_size=4),
    st.sampled_from(["", "Sure, here it is:\n", "Result } (see below):\n"]),
)
def test_repair_recovers_fenced_prose_wrapped_objects_with_trailing_commas(value: dict[str, Any], prefix: str) -> None:
    messy = f"{prefix}```json\n{with_trailing_commas(value)}\n```\nHope this helps {{not json}}."
    repaired = repair_json(messy)
    assert repaired is not None and json.loads(repaired) == value


def test_repair_never_touches_commas_inside_strings_and_gives_up_on_truncation() -> None:
    text = '{"a": "x, }", "b": [1, 2,],}'
    repaired = repair_json(text)
    assert repaired is not None and json.loads(repaired) == {"a": "x, }", "b": [1, 2]}
    assert repair_json('{"a": "unterminated') is None
    assert repair_json("no object at all") is None
    assert repair_json('{"a": 1 "b": 2}') is None  # a missing comma is not guessed at
