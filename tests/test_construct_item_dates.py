"""Dates with their precision: the forms a model may write, the extractive resolver's precision, the migration that
carries v1 stores forward, and how contexts show them."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support.data import LLM_BUILT_SPACES, open_llm_built
from tmem.answer.context import format_item
from tmem.construct.check import check_space
from tmem.construct.extractive.items import item_from_turn
from tmem.models import Item, ItemKind, Turn
from tmem.scope import Scope
from tmem.util.dates import parse_when

DAYS = st.dates(min_value=date(1990, 1, 1), max_value=date(2090, 12, 31))


@given(DAYS)
def test_every_period_form_contains_its_day(day: date) -> None:
    iso_year, week, _ = day.isocalendar()
    season = {12: "winter", 1: "winter", 2: "winter", 3: "spring", 4: "spring", 5: "spring"}.get(day.month)
    season = season or ("summer" if day.month <= 8 else "autumn")
    season_year = day.year - 1 if day.month in (1, 2) else day.year
    forms = [
        (day.isoformat(), "day"),
        (f"{iso_year}-W{week:02d}", "week"),
        (f"{day.year}-{day.month:02d}", "month"),
        (f"{season_year}-{season}", "season"),
        (str(day.year), "year"),
        (f"{day.isoformat()}/{(day + timedelta(days=2)).isoformat()}", "range"),
    ]
    for text, precision in forms:
        when = parse_when(text)
        assert when.precision == precision and when.start <= day <= when.end, text


def test_labels_say_the_precision() -> None:
    assert parse_when("2023-W19").label == "the week of 8-14 May 2023"
    assert parse_when("2022-summer").label == "summer 2022"
    assert parse_when("2023-04-29/2023-05-01").label == "29 April - 1 May 2023"
    with pytest.raises(ValueError, match="forms"):
        parse_when("next spring")


def _item(**kw: object) -> Item:
    base: dict[str, object] = {"id": "i1", "text": "Jon moved to Boston.", "kind": ItemKind.ATOMIC, "scene_ids": ["s"]}
    return Item.model_validate(base | kw)


def test_a_context_shows_the_period_not_a_stand_in_day() -> None:
    season = _item(date="2022-06-01", date_end="2022-08-31", date_precision="season")
    assert format_item(season) == "Jon moved to Boston. (when: summer 2022)"
    assert format_item(_item(date="2022-06-03", date_precision="day")) == "Jon moved to Boston. (2022-06-03)"
    said = _item(
        text="In summer 2022 Jon moved to Boston.", date="2022-06-01", date_end="2022-08-31", date_precision="season"
    )
    assert format_item(said) == said.text  # the text says it already
    a = _item(conflicts_with=["i2"])
    b = _item(id="i2", text="Jon has never lived outside Texas.", conflicts_with=["i1"])
    assert format_item(a, {"i1": a, "i2": b}).endswith('[disagrees with: "Jon has never lived outside Texas. ..."]')
    assert format_item(a).endswith("[another statement in the conversation disagrees]")


@pytest.mark.parametrize(
    ("text", "precision", "start", "end"),
    [
        ("We went camping last weekend, it was great", "range", "2023-05-06", "2023-05-07"),
        ("I started a new class last week with friends", "week", "2023-05-01", "2023-05-07"),
        ("We adopted a puppy last month at the shelter", "month", "2023-04-01", "2023-04-30"),
        ("I went to a support group yesterday, so powerful", "day", "2023-05-07", None),
    ],
)
def test_extractive_items_carry_the_resolver_precision(text: str, precision: str, start: str, end: str | None) -> None:
    turn = Turn(id="D1:1", session_id="s1", seq=0, speaker="Caroline", text=text, time=datetime(2023, 5, 8, 13, 56))
    item = item_from_turn(turn, "scene")
    assert (item.date_precision, item.date, item.date_end) == (precision, start, end)


def test_the_shipped_v1_memories_open_with_day_precision(tmp_path: Path) -> None:
    """The earlier d30-plus build (v0.1 prompts, schema 001 without precision) migrates to day precision."""
    store = open_llm_built("d30-plus", tmp_path, previous=True)
    items = store.items(Scope.local("d30-plus"))
    assert items and all(it.date_precision == ("day" if it.date else None) for it in items)
    assert all(it.conflicts_with == [] for it in items)
    assert check_space(store, Scope.local("d30-plus")).ok
    store.close()


@pytest.mark.parametrize("name", LLM_BUILT_SPACES)
def test_the_current_llm_built_memories_keep_each_precision_with_its_span(name: str, tmp_path: Path) -> None:
    """The builds made with the precision prompts: a dated item carries a precision, a day has no end, any wider
    precision ends on or after its start, and the model used more than days."""
    store = open_llm_built(name, tmp_path)
    items = store.items(Scope.local(name))
    assert items and all((it.date is None) == (it.date_precision is None) for it in items)
    for it in items:
        if it.date_precision == "day":
            assert it.date_end is None, it
        elif it.date is not None:
            assert it.date_end is not None and it.date_end >= it.date, it
    assert {it.date_precision for it in items} - {"day", None}
    assert check_space(store, Scope.local(name)).ok
    store.close()


@pytest.mark.parametrize(
    ("said", "text", "start", "end"),
    [
        (date(2023, 5, 12), "next Saturday", date(2023, 5, 13), date(2023, 5, 13)),  # a Friday: the following day
        (date(2023, 5, 12), "last Friday", date(2023, 5, 5), date(2023, 5, 5)),  # a week earlier
        (date(2023, 5, 14), "this weekend", date(2023, 5, 13), date(2023, 5, 14)),  # a Sunday: the one under way
        (date(2023, 5, 14), "last weekend", date(2023, 5, 6), date(2023, 5, 7)),  # not the one ending that day
        (date(2023, 5, 10), "last week", date(2023, 5, 1), date(2023, 5, 7)),  # Monday to Sunday
    ],
)
def test_the_extractive_resolver_follows_the_written_convention(said: date, text: str, start: date, end: date) -> None:
    """Each example stated in DATE_CONVENTION (the text the prompt shows the model) holds for the resolver."""
    from tmem.construct.extractive.dates import resolve_relative_dates
    from tmem.util.dates import DATE_CONVENTION

    (found,) = resolve_relative_dates(f"We talked about it {text}.", said)
    assert (found.start, found.end) == (start, end)
    assert text.split()[0] in DATE_CONVENTION
