"""Slots (issue 21): label normalisation, the newer-supersedes-older rule, and the shipped memories' upgrade."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support.data import LLM_BUILT_SPACES, open_llm_built
from tmem.answer.budget import pack_context
from tmem.construct.check import check_space
from tmem.construct.slots import link_slots, normalise_slot, slot_key
from tmem.models import Item, ItemKind, Turn
from tmem.retrieve.types import ItemHit, Route, SearchResult, TurnHit
from tmem.scope import Scope
from tmem.store.sqlite import SQLiteStore
from tmem.util.tokens import default_counter


@pytest.mark.parametrize(
    ("label", "speaker", "slot"),
    [
        ("Dana / Employer", None, "dana / employer"),
        ("Dana's / current employer", None, "dana / employer"),
        ("dana / the new cars", None, "dana / car"),
        ("home city", "Dana", "dana / home city"),
        ("Dana / ", None, None),
        ("  ", "Dana", None),
        (None, "Dana", None),
    ],
)
def test_labels_normalise(label: str | None, speaker: str | None, slot: str | None) -> None:
    assert normalise_slot(label, speaker) == slot


def test_synonyms_match_only_when_compared() -> None:
    assert slot_key("dana / job") == slot_key("dana / employer") == ("dana", "employer")
    assert slot_key("dana / city") == slot_key("dana / home")
    assert slot_key("dana / job") != slot_key("sam / job")
    assert slot_key("dana / favourite food") != slot_key("dana / favourite band")


def _item(n: int, slot: str | None, date: str, turn: int) -> Item:
    return Item(id=f"i{n}", text=f"fact {n}", kind=ItemKind.ATOMIC, scene_ids=["s"], slot=slot, date=date,
                turn_ids=[f"t{turn}"], seq=n)  # fmt: skip


@given(st.lists(st.tuples(st.sampled_from(["dana / job", "dana / home", None]), st.integers(1, 9),
                          st.integers(0, 5)), max_size=12))  # fmt: skip
def test_links_form_one_chain_per_slot_pointing_to_a_later_moment(spec: list[tuple[str | None, int, int]]) -> None:
    items = [_item(n, slot, f"2023-05-0{day}", turn) for n, (slot, day, turn) in enumerate(spec)]
    links = link_slots(items, lambda t: int(t[1:]))
    by_id = {it.id: it for it in items}
    assert len(set(links.values())) == len(links)  # one older per newer: supersedes stays a single link
    for old, new in links.items():
        a, b = by_id[old], by_id[new]
        assert a.slot == b.slot is not None
        assert (b.date, b.turn_ids) > (a.date, a.turn_ids) or (b.date or "") > (a.date or "")
    for slot in ("dana / job", "dana / home"):
        moments = {(it.date or "", int(it.turn_ids[0][1:])): it for it in items if it.slot == slot}
        if not moments:
            continue
        latest = max(moments)
        # an item of the latest moment is never superseded; two or more moments give at least one link
        assert all(
            it.id not in links for it in items if it.slot == slot and (it.date, int(it.turn_ids[0][1:])) == latest
        )
        assert len(moments) < 2 or any(by_id[o].slot == slot for o in links)


@pytest.mark.parametrize("name", LLM_BUILT_SPACES)
def test_the_earlier_llm_built_memories_open_and_upgrade(name: str, tmp_path: Path) -> None:
    """A store written before the slot column existed (the builds in previous/) opens, gains the column empty, and
    takes a slot."""
    store = open_llm_built(name, tmp_path, previous=True)
    items = store.items(Scope.local(name))
    assert items and all(it.slot is None for it in items)
    store.put_items(Scope.local(name), [items[0].model_copy(update={"slot": "x / y"})])
    assert store.items(Scope.local(name), [items[0].id])[0].slot == "x / y"
    assert check_space(store, Scope.local(name)).ok
    store.close()
    reopened = SQLiteStore.open(tmp_path / "tmem.db")  # the migration is recorded once: a second open applies nothing
    assert reopened.items(Scope.local(name), [items[0].id])[0].slot == "x / y"
    reopened.close()


@pytest.mark.parametrize("name", LLM_BUILT_SPACES)
def test_the_current_llm_built_memories_name_slots_and_supersede_within_one(name: str, tmp_path: Path) -> None:
    """The builds made with the slot prompts: some items name a slot, every slot is stored in its normal form, and
    each supersedes link joins two statements on the same slot."""
    store = open_llm_built(name, tmp_path)
    items = {it.id: it for it in store.items(Scope.local(name))}
    slots = [it.slot for it in items.values() if it.slot is not None]
    assert slots and all(normalise_slot(slot, None) == slot for slot in slots)
    links = [(it, items[it.supersedes]) for it in items.values() if it.supersedes is not None]
    assert links and all(new.slot and old.slot and slot_key(new.slot) == slot_key(old.slot) for new, old in links)
    assert check_space(store, Scope.local(name)).ok
    store.close()


# ------------------------------------------------------------------------------------------ the current value first


def _item_hit(n: int, text: str, day: int, rank: int, slot: str | None) -> ItemHit:
    item = Item(
        id=f"i{n}",
        text=text,
        kind=ItemKind.ATOMIC,
        scene_ids=["S1"],
        speaker="Dana",
        date=f"2023-05-{day:02d}",
        slot=slot,
        turn_ids=[f"t{n}"],
        seq=n,
    )
    return ItemHit(item=item, source_scenes=[], source_turn_ids=[f"t{n}"], score=1.0 / rank, routes=[_route(rank)])


def _route(rank: int) -> Route:
    return Route(name="item.dense", rank=rank, score=1.0 / rank)


def test_the_newer_statement_on_a_slot_comes_first_and_the_older_is_marked_earlier() -> None:
    """The older job statement ranks first for the query; the context reads the newer one first and the older one
    after it, marked earlier until the newer one's day. An item without a slot stays where it was."""
    hits = [
        _item_hit(0, "Dana has worked at Acme Logistics as a dispatcher for years.", 2, 1, "Dana / employer"),
        _item_hit(1, "Dana watched a film about whales.", 3, 2, None),
        _item_hit(2, "Dana joined Globex Energy as a planner.", 20, 3, "Dana / job"),
    ]
    result = SearchResult(space="s", query="Where does Dana work?", preset="p", scenes=[], items=hits)
    ctx = pack_context(result, 1000, include_persona=False)
    lines = ctx.text.splitlines()
    assert lines[:4] == [
        "Facts:",
        "- Dana joined Globex Energy as a planner. (2023-05-20)",
        "- Dana watched a film about whales. (2023-05-03)",
        "- Dana has worked at Acme Logistics as a dispatcher for years. (2023-05-02) (earlier, until 20 May 2023)",
    ]
    assert ctx.text.count("Globex") == 1 and ctx.text.count("Acme") == 1  # each statement once
    assert ctx.tokens <= 1000
    small = pack_context(result, default_counter().count("Facts:\n" + lines[1]) + 2, include_persona=False)
    assert "Globex" in small.text and "Acme" not in small.text  # the older one only when it fits, never instead


def test_statements_no_model_labelled_are_not_grouped_and_read_newest_first() -> None:
    """Raw turns (a space never built, or turns added since the last build) and unlabelled items are not grouped by
    the cue words they share: they keep their raw form, unmarked (issue 21, measured). The context renders them
    newest first all the same (blocks by session, fact lines by date), so the later statement is read first although
    the earlier one ranks first."""
    turns = [
        ("I have been working at Acme Logistics as a dispatcher for years.", 2),
        ("Big news: I quit Acme, I work at Globex Energy now.", 20),
    ]
    hits = [
        TurnHit(
            turn=Turn(
                id=f"t{n}", session_id=f"s{day}", seq=n, speaker="Dana", text=text, time=datetime(2023, 5, day, 9)
            ),
            score=1.0 / (n + 1),
            routes=[Route(name="turn.dense", rank=n + 1, score=1.0 / (n + 1))],
        )
        for n, (text, day) in enumerate(turns)
    ]
    result = SearchResult(space="s", query="Where does Dana work?", preset="p", scenes=[], items=[], turns=hits)
    text = pack_context(result, 1000, include_persona=False).text
    assert "Facts:" not in text and "earlier" not in text
    assert text.index("Globex") < text.index("Acme Logistics")
    items = [
        _item_hit(0, "Dana has worked at Acme Logistics as a dispatcher for years.", 2, 1, None),
        _item_hit(1, "Dana quit Acme and works at Globex Energy now.", 20, 2, None),
    ]
    result = SearchResult(space="s", query="Where does Dana work?", preset="p", scenes=[], items=items)
    text = pack_context(result, 1000, include_persona=False).text
    assert "earlier" not in text and text.index("Globex") < text.index("Acme Logistics")


def test_statements_of_one_day_are_not_marked_earlier() -> None:
    same_day = [
        _item_hit(0, "Dana has worked at Acme Logistics as a dispatcher for years.", 2, 1, "Dana / employer"),
        _item_hit(2, "Dana joined Globex Energy as a planner.", 2, 2, "Dana / employer"),
    ]
    result = SearchResult(space="s", query="q", preset="p", scenes=[], items=same_day)
    text = pack_context(result, 1000, include_persona=False).text
    # not grouped, so neither is marked earlier; read in the order they were said (the later first)
    assert "earlier" not in text and text.index("Globex") < text.index("Acme")


def test_an_extractive_context_is_one_timeline_newest_first() -> None:
    """On an extractive space a fact line is a quoted turn: it sits among the blocks of turns by its date, with no
    "Facts:" part above them, so an older statement ranked first as a fact is still read after a newer raw turn."""
    stale = _item_hit(0, 'On 2 May 2023, Dana said: "I work at Acme Logistics as a dispatcher."', 2, 1, None)
    turn = Turn(
        id="t5",
        session_id="s20",
        seq=5,
        speaker="Dana",
        text="I work at Globex Energy now.",
        time=datetime(2023, 5, 20),
    )
    current = TurnHit(turn=turn, score=0.5, routes=[Route(name="turn.dense", rank=2, score=0.5)])
    result = SearchResult(
        space="s", query="Where does Dana work?", preset="p", scenes=[], items=[stale], turns=[current]
    ).model_copy(update={"descriptive_only": True})
    ctx = pack_context(result, 1000, include_persona=False)
    assert "Facts:" not in ctx.text
    assert ctx.text == "[20 May 2023]\nDana: I work at Globex Energy now.\n\n- " + stale.item.text
    assert ctx.tokens == ctx.evidence_tokens == sum(hit.tokens for hit in ctx.hits)
