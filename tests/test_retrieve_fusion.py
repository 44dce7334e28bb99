"""Reciprocal rank fusion, the NaN-aware max and the gate, checked against hand computation and by properties."""

from __future__ import annotations

import itertools
import math

from hypothesis import given
from hypothesis import strategies as st

from tmem.retrieve.fusion import Ranked, fuse, gate, nanmax, rrf, split_gate

ids = st.sampled_from([f"d{i}" for i in range(12)])
ranked_list = st.lists(ids, max_size=10, unique=True)


def test_rrf_hand_computed() -> None:
    fused = dict(rrf([["a", "b", "c"], ["c", "a"]], k0=60))
    assert math.isclose(fused["a"], 1 / 61 + 1 / 62)
    assert math.isclose(fused["b"], 1 / 62)
    assert math.isclose(fused["c"], 1 / 63 + 1 / 61)
    assert [d for d, _ in rrf([["a", "b", "c"], ["c", "a"]])] == ["a", "c", "b"]


def test_rrf_ties_broken_by_best_rank_then_id() -> None:
    fused = rrf([["b", "a"], ["a", "b"]])
    assert fused[0][1] == fused[1][1]
    assert [d for d, _ in fused] == ["a", "b"]  # same best rank (1): id decides
    fused = rrf([["z"], ["y"], ["q", "x"]])
    assert [d for d, _ in fused] == ["q", "y", "z", "x"]


def test_rrf_duplicate_in_one_list_counts_once() -> None:
    assert rrf([["a", "a", "b"]]) == rrf([["a", "b"]])


@given(st.lists(ranked_list, max_size=5), st.randoms())
def test_rrf_is_independent_of_list_order(lists: list[list[str]], rnd: object) -> None:
    shuffled = list(lists)
    rnd.shuffle(shuffled)  # type: ignore[attr-defined]
    assert rrf(lists) == rrf(shuffled)


@given(ranked_list, st.integers(min_value=0, max_value=100))
def test_rrf_scores_strictly_decrease_with_rank(single: list[str], k0: int) -> None:
    fused = rrf([single], k0=k0)
    assert [d for d, _ in fused] == single
    scores = [s for _, s in fused]
    assert all(a > b for a, b in itertools.pairwise(scores))


@given(st.lists(ranked_list, max_size=5))
def test_rrf_output_is_sorted_and_stable(lists: list[list[str]]) -> None:
    fused = rrf(lists)
    assert len({d for d, _ in fused}) == len(fused)
    assert {d for d, _ in fused} == {d for lst in lists for d in lst}
    assert all(a[1] >= b[1] for a, b in itertools.pairwise(fused))
    assert fused == rrf([list(lst) for lst in lists])


@given(st.lists(st.one_of(st.floats(allow_nan=False, allow_infinity=False, width=32), st.just(math.nan))))
def test_nanmax(values: list[float]) -> None:
    real = [v for v in values if not math.isnan(v)]
    assert nanmax(values) == (max(real) if real else None)


def test_nanmax_all_nan_is_absent_not_zero() -> None:
    assert nanmax([math.nan, math.nan]) is None
    assert nanmax([]) is None
    assert nanmax([math.nan, -0.5]) == -0.5


def test_gate_keeps_at_threshold_and_drops_below_and_nan() -> None:
    entries = [Ranked("a", 0.9), Ranked("b", 0.85), Ranked("c", 0.84999), Ranked("d", math.nan)]
    kept = gate(entries, 0.85)
    assert [e.id for e in kept] == ["a", "b"]
    assert all(e.gate == 0.85 for e in kept)
    assert gate(entries, None) == entries


def test_split_gate_returns_what_fell_under_it_in_order() -> None:
    entries = [Ranked("a", 0.9, "v1"), Ranked("c", 0.7, "v2"), Ranked("b", 0.85), Ranked("d", math.nan)]
    kept, fell = split_gate(entries, 0.85)
    assert [e.id for e in kept] == ["a", "b"] and [e.id for e in fell] == ["c", "d"]
    assert all(e.gate == 0.85 for e in [*kept, *fell]) and fell[0].view == "v2"
    assert split_gate(entries, None) == (entries, [])


def test_fuse_keeps_routes_per_list() -> None:
    fused = fuse(
        {
            "scene.bm25": [Ranked("s1", 3.2), Ranked("s2", 1.0)],
            "scene.trigger.horizon": [Ranked("s2", 0.7, view="horizon:1", gate=None)],
        }
    )
    assert [f.id for f in fused] == ["s2", "s1"]
    s2 = fused[0]
    assert math.isclose(s2.score, 1 / 62 + 1 / 61)
    assert {(r.name, r.rank) for r in s2.routes} == {("scene.bm25", 2), ("scene.trigger.horizon", 1)}
    assert next(r for r in s2.routes if r.name == "scene.trigger.horizon").view == "horizon:1"
