"""Pure parts of the extractive mode: keyphrases, segmentation, online topics, items and Entity triggers."""

from __future__ import annotations

from datetime import datetime

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tmem.construct.extractive.cluster import OnlineTopics
from tmem.construct.extractive.items import entity_triggers, is_substantive, item_from_turn
from tmem.construct.extractive.keyphrases import extract_keyphrases
from tmem.construct.extractive.segment import MAX_TURNS, MIN_TURNS, segment_session
from tmem.models import BuildMode, ItemKind, TriggerFamily, Turn


def turn(text: str, *, tid: str = "D1:3", speaker: str = "Caroline", caption: str | None = None) -> Turn:
    return Turn(
        id=tid, session_id="session_1", seq=2, speaker=speaker, text=text, time=datetime(2023, 5, 8, 13, 56),
        caption=caption,
    )  # fmt: skip


# ------------------------------------------------------------------------------------------------ keyphrases


def test_keyphrases_split_at_stopwords_and_punctuation() -> None:
    phrases = extract_keyphrases(["I went to a LGBTQ support group yesterday and it was so powerful."])
    assert [k.text for k in phrases] == ["LGBTQ support group", "powerful"]


def test_keyphrases_rank_repeated_topics_first_and_drop_speakers() -> None:
    texts = [
        "Hey Mel! How is the pottery class going?",
        "Melanie: the pottery class is fun, I made a blue vase.",
        "Caroline: I love the pottery class, honestly.",
    ]
    phrases = extract_keyphrases(texts, exclude=["Caroline", "Melanie"])
    assert phrases[0].text == "pottery class" and phrases[0].count == 3
    assert not any(k.text.lower() in {"mel", "melanie", "caroline"} for k in phrases)


def test_names_are_flagged_only_when_capitalised_mid_sentence_everywhere() -> None:
    phrases = {k.text: k for k in extract_keyphrases(["We met Jon in Paris.", "Paris was rainy, and the park too."])}
    assert phrases["Jon"].is_name and phrases["Paris"].is_name
    assert not phrases["park"].is_name


def test_keyphrases_are_deterministic_and_tie_broken_by_position() -> None:
    texts = ["red kite flying", "blue boat sailing"]
    assert extract_keyphrases(texts) == extract_keyphrases(list(texts))
    assert [k.text for k in extract_keyphrases(texts)] == ["red kite flying", "blue boat sailing"]


# ------------------------------------------------------------------------------------------------ segmentation


def two_topic_session(n_a: int, n_b: int, dim: int = 16, noise: float = 0.05) -> np.ndarray:
    rng = np.random.default_rng(7)
    a, b = np.eye(dim)[0], np.eye(dim)[1]
    rows = [a + noise * rng.standard_normal(dim) for _ in range(n_a)] + [
        b + noise * rng.standard_normal(dim) for _ in range(n_b)
    ]
    m = np.array(rows, dtype=np.float32)
    return (m / np.linalg.norm(m, axis=1, keepdims=True)).astype(np.float32)


def test_segmentation_finds_the_topic_shift() -> None:
    assert segment_session(two_topic_session(9, 8)) == [(0, 9), (9, 17)]


def test_segmentation_keeps_a_uniform_session_whole() -> None:
    assert segment_session(two_topic_session(12, 0)) == [(0, 12)]


def test_segmentation_never_makes_scenes_shorter_than_the_minimum() -> None:
    ranges = segment_session(two_topic_session(2, 12))  # the shift comes too early to honour the minimum
    assert all(b - a >= MIN_TURNS for a, b in ranges)


def test_segmentation_caps_long_scenes() -> None:
    ranges = segment_session(two_topic_session(60, 0))
    assert all(MIN_TURNS <= b - a <= MAX_TURNS for a, b in ranges)
    assert ranges[0][0] == 0 and ranges[-1][1] == 60


@settings(max_examples=40, deadline=None)
@given(st.integers(min_value=0, max_value=70), st.integers(min_value=0, max_value=2**31))
def test_segmentation_partitions_any_session(n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    m = rng.standard_normal((n, 8)).astype(np.float32)
    m /= np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-9)
    ranges = segment_session(m)
    covered = [i for a, b in ranges for i in range(a, b)]
    assert covered == list(range(n))
    assert all(b - a <= MAX_TURNS for a, b in ranges)
    if n >= MIN_TURNS:
        assert all(b - a >= MIN_TURNS for a, b in ranges)


def test_segmentation_rejects_inconsistent_limits() -> None:
    with pytest.raises(ValueError, match="max_turns"):
        segment_session(two_topic_session(5, 5), min_turns=6, max_turns=10)


# ------------------------------------------------------------------------------------------------ online topics


def unit(*xs: float) -> np.ndarray:
    v = np.array(xs, dtype=np.float32)
    return (v / np.linalg.norm(v)).astype(np.float32)


def test_online_topics_join_open_and_multilabel() -> None:
    topics = OnlineTopics(threshold=0.6)
    assert [t.id for t in topics.assign("s1", unit(1, 0, 0), "t1")] == ["t1"]
    assert [t.id for t in topics.assign("s2", unit(0, 1, 0), "t2")] == ["t2"]  # orthogonal: opens a topic
    assert [t.id for t in topics.assign("s3", unit(1, 0.1, 0), "t3")] == ["t1"]
    both = topics.assign("s4", unit(1, 1, 0), "t4")  # cos 0.707 with both centroids
    assert sorted(t.id for t in both) == ["t1", "t2"]
    assert [t.members for t in topics.topics] == [["s1", "s3", "s4"], ["s2", "s4"]]


def test_restored_state_takes_the_same_decisions() -> None:
    rng = np.random.default_rng(3)
    vectors = [unit(*rng.standard_normal(6)) for _ in range(30)]
    full = OnlineTopics(threshold=0.3)
    decisions = [[t.id for t in full.assign(f"s{i}", v, f"t{i}")] for i, v in enumerate(vectors)]
    head = OnlineTopics(threshold=0.3)
    for i, v in enumerate(vectors[:17]):
        head.assign(f"s{i}", v, f"t{i}")
    restored = OnlineTopics(threshold=0.3)
    index = {f"s{i}": v for i, v in enumerate(vectors)}
    for t in head.topics:
        restored.restore(t.id, t.seq, [(m, index[m]) for m in t.members])
    tail = [[t.id for t in restored.assign(f"s{i}", v, f"t{i}")] for i, v in enumerate(vectors) if i >= 17]
    assert tail == decisions[17:]
    assert [t.total.tobytes() for t in restored.topics] == [t.total.tobytes() for t in full.topics]


# ------------------------------------------------------------------------------------------------ items and triggers


def test_greetings_and_fillers_are_not_substantive() -> None:
    assert not is_substantive(turn("Hey Mel! Good to see you! How have you been?"))
    assert not is_substantive(turn("Wow, thanks so much!! That's awesome :)"))
    assert is_substantive(turn("I went to a LGBTQ support group yesterday and it was so powerful."))
    assert is_substantive(turn("Look!", caption="a photo of a dog walking past a mural"))


@pytest.mark.parametrize(
    ("text", "fact"),
    [
        ("Hey Caroline! Good to see you!", False),  # a greeting, whoever it names
        ("Hey Caroline! Good to see you! How have you been? Any plans for the summer?", False),  # questions
        ("Free company!", False),  # a remark: two words, not a first-person statement
        ("I moved to Lyon", True),  # a short first-person statement is a fact
        ("I quit coffee.", True),
        ("Hey Caroline! Good to see you! I'm swamped with the kids and work.", True),
    ],
)
def test_an_item_is_a_fact_not_a_greeting(text: str, fact: bool) -> None:
    assert is_substantive(turn(text, speaker="Melanie"), ["Caroline", "Melanie"]) is fact


def test_an_item_leaves_out_the_greeting_that_opens_its_turn() -> None:
    t = turn("Hey Caroline! Good to see you! I'm swamped with the kids and work.", speaker="Melanie")
    item = item_from_turn(t, "xs-1", ["Caroline", "Melanie"])
    assert item.text == 'On 8 May 2023, Melanie said: "I\'m swamped with the kids and work."'
    assert item_from_turn(turn("Hey Caroline!", speaker="Melanie"), "xs-1", ["Caroline"]).text.endswith(
        '"Hey Caroline!"'
    )


def test_item_text_is_self_contained_with_resolved_dates_and_caption() -> None:
    item = item_from_turn(
        turn("I went to a LGBTQ support group yesterday and it was so powerful.", caption="a photo of a flag."),
        "xs-1",
    )
    assert item.text == (
        'On 8 May 2023, Caroline said: "I went to a LGBTQ support group yesterday [7 May 2023] and it was so '
        'powerful." Caroline shared an image: a photo of a flag.'
    )
    assert item.date == "2023-05-07" and item.speaker == "Caroline" and item.turn_ids == ["D1:3"]
    assert item.kind is ItemKind.ATOMIC and item.scene_ids == ["xs-1"] and item.mode is BuildMode.EXTRACTIVE
    plain = item_from_turn(turn("My pottery class made a blue vase."), "xs-1")
    assert plain.date == "2023-05-08"


def test_entity_triggers_name_first_then_keyphrases() -> None:
    t = turn("Jon and I hiked the Grand Canyon, a long desert trail with my sister.", speaker="Gina")
    item = item_from_turn(t, "xs-1")
    phrases = {k.text.lower(): k for k in extract_keyphrases([t.text], exclude=["Gina"])}
    triggers = entity_triggers(item, t, phrases, ["Gina", "Jon"])
    concepts = [tr.views[0].text for tr in triggers]
    assert concepts[0] == "Grand Canyon"
    assert "Jon" not in concepts  # a speaker of the space
    assert "long desert trail" in concepts
    assert all(
        tr.family is TriggerFamily.ENTITY and tr.host_kind == "item" and tr.host_id == item.id for tr in triggers
    )
    assert [tr.group for tr in triggers] == list(range(len(triggers)))
    assert len({tr.id for tr in triggers}) == len(triggers)


def test_distinct_keyphrases_drop_phrases_inside_better_ones() -> None:
    texts = ["The dance studio is new.", "My dance studio is by the water; the studio has a porch."]
    # degree/frequency: dance 4/2, studio 5/3 -> "dance studio" (2 + 5/3) x 2 occurrences; studio 5/3; water, porch 1
    assert [k.text for k in extract_keyphrases(texts)] == ["dance studio", "studio", "water", "porch"]
    assert [k.text for k in extract_keyphrases(texts, distinct=True)] == ["dance studio", "water", "porch"]
