"""Near-duplicate items (tmem.construct.dedup): restatements from two topics of the same scene are stored once."""

from __future__ import annotations

import itertools

from hypothesis import example, given, settings
from hypothesis import strategies as st

from tmem.construct.dedup import DuplicateFilter, dedup, extends, near_duplicate, repeats
from tmem.models import Item, ItemKind


def _item(n: int, text: str, *, speaker: str | None = "Jon", scenes: tuple[str, ...] = ("s1",)) -> Item:
    kind = ItemKind.ATOMIC if len(scenes) == 1 else ItemKind.CONNECTED
    return Item(id=f"i{n}", text=text, kind=kind, scene_ids=list(scenes), speaker=speaker, seq=n)


LOST = _item(1, "Jon lost his job as a banker on 19 January 2023.")
LOST_MORE = _item(2, "Jon lost his job as a banker on 19 January 2023 and decided to start his own business.")
LOST_AGAIN = _item(3, "On 19 January 2023 Jon lost his banking job as a banker.")


def test_a_restatement_repeats_and_a_richer_statement_extends() -> None:
    assert repeats(LOST, LOST_AGAIN)
    assert extends(LOST, LOST_MORE) and not repeats(LOST, LOST_MORE)
    # other speaker, other scene or other kind: never compared
    assert not near_duplicate(LOST, _item(4, LOST.text, speaker="Gina"))
    assert not near_duplicate(LOST, _item(5, LOST.text, scenes=("s2",)))
    # different facts of one scene
    assert not near_duplicate(LOST, _item(6, "Jon went to the gym to stay on track with his dance studio plans."))


def test_a_fixed_item_is_never_replaced_but_a_replaceable_one_is() -> None:
    stored = DuplicateFilter([LOST])
    assert stored.admit(LOST_MORE) == (None, [])  # both stay: the stored one may carry triggers already
    fresh = DuplicateFilter()
    assert fresh.admit(LOST) == (None, [])
    assert fresh.admit(LOST_MORE) == (None, [LOST])
    assert fresh.admit(LOST_AGAIN) == (LOST_MORE, [])
    kept, dropped = dedup([LOST, LOST_MORE, LOST_AGAIN])
    assert kept == [LOST_MORE] and dropped == {"i1": "i2", "i3": "i2"}


WORDS = ["Jon", "Gina", "dance", "studio", "bank", "job", "lost", "gym", "March", "2023", "store", "bike"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=6), min_size=1, max_size=8))
@example(
    [["Jon", "Gina"], ["Jon", "dance"], ["Jon", "Gina", "dance"]]
)  # the third replaces the first and covers the second
def test_dedup_leaves_no_repeat_and_every_dropped_item_points_at_a_kept_one(texts: list[list[str]]) -> None:
    items = [_item(n, " ".join(words)) for n, words in enumerate(texts)]
    kept, dropped = dedup(items)
    ids = {it.id for it in kept}
    assert len(kept) + len(dropped) == len({it.id for it in items})
    assert all(target in ids for target in dropped.values())
    for a, b in itertools.combinations(kept, 2):
        assert not repeats(a, b)


def test_proper_names_skip_sentence_starts_months_and_weekdays() -> None:
    from tmem.construct.names import proper_names, with_names, without_names

    text = "On Friday 23 June 2023 Caroline went to Boston. Melanie stayed in Paris with Jon's dog."
    assert proper_names(text, ["Melanie"]) == ["Caroline", "Boston", "Paris", "Jon", "Melanie"]
    assert with_names("Planning a trip to Boston.", text, ["Melanie"]) == (
        "Planning a trip to Boston. (Caroline, Paris, Jon, Melanie)"
    )
    assert without_names("Visiting Caroline's friends in Boston.") == "Visiting friends in ."


def test_a_replacement_also_takes_the_place_of_the_other_items_it_covers() -> None:
    gina, dance, both = _item(0, "Jon Gina"), _item(1, "Jon dance"), _item(2, "Jon Gina dance")
    kept, dropped = dedup([gina, dance, both])
    assert kept == [both] and dropped == {"i0": "i2", "i1": "i2"}
