"""Slots (issue 21): label normalisation, the newer-supersedes-older rule, and the shipped memories' upgrade."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tmem.construct.check import check_space
from tmem.construct.slots import link_slots, normalise_slot, slot_key
from tmem.models import Item, ItemKind
from tmem.store.sqlite import SQLiteStore

SHIPPED = Path(__file__).resolve().parents[2] / "shared" / "data" / "llm-built"


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


@pytest.mark.parametrize("name", ["d26-plus", "d30-plus", "d41-plus", "d42-plus"])
def test_the_shipped_llm_built_memories_open_and_upgrade(name: str, tmp_path: Path) -> None:
    shipped = SHIPPED / f"{name}.db"
    if not shipped.exists():
        pytest.skip("the LLM-built dev memories are not on this machine")
    copy = tmp_path / "tmem.db"
    shutil.copyfile(shipped, copy)  # never open the shipped file in place
    store = SQLiteStore.open(copy)
    items = store.items(name)
    assert items and all(it.slot is None for it in items)
    store.put_items(name, [items[0].model_copy(update={"slot": "x / y"})])
    assert store.items(name, [items[0].id])[0].slot == "x / y"
    assert check_space(store, name).ok
    store.close()
    reopened = SQLiteStore.open(copy)  # the migration is recorded once: a second open applies nothing
    assert reopened.items(name, [items[0].id])[0].slot == "x / y"
    reopened.close()
