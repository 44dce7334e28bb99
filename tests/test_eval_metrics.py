"""Token F1 and its LoCoMo normalisation against hand-computed cases; mean/std over runs."""

from __future__ import annotations

import math

import pytest

from tmem.eval.metrics import mean_std, normalize_answer, token_f1


def test_normalisation_lowercases_strips_punctuation_and_articles() -> None:
    assert normalize_answer("The Marley flooring!") == "marley flooring"
    assert normalize_answer("7 May, 2023.") == "7 may 2023"
    assert normalize_answer("Pottery and painting") == "pottery painting"  # LoCoMo drops "and" too
    assert normalize_answer("  an   apple ") == "apple"
    assert normalize_answer("Theatre") == "theatre"  # only whole words are articles


@pytest.mark.parametrize(
    ("prediction", "gold", "expected"),
    [
        # identical after normalisation
        ("The Marley flooring.", "Marley flooring", 1.0),
        # pred {7, may, 2023}, gold {7, may, 2023}: 3 shared -> 1.0
        ("May 7, 2023", "7 May 2023", 1.0),
        # pred {marley}, gold {marley, flooring}: P = 1/1, R = 1/2 -> F1 = 2/3
        ("Marley", "Marley flooring", 2 / 3),
        # pred {she, went, to, paris}, gold {paris}: P = 1/4, R = 1 -> F1 = 2*(1/4)/(5/4) = 0.4
        ("She went to Paris", "Paris", 0.4),
        # nothing shared
        ("London", "Paris", 0.0),
        # pred {dancing, painting}, gold {painting, dancing, reading}: P = 1, R = 2/3 -> F1 = 0.8
        ("dancing, painting", "painting, dancing and reading", 0.8),
        # repeated tokens count with multiplicity: pred {a: no; paris x2}, gold {paris}: P = 1/2, R = 1 -> 2/3
        ("Paris Paris", "Paris", 2 / 3),
    ],
)
def test_token_f1_hand_computed(prediction: str, gold: str, expected: float) -> None:
    assert token_f1(prediction, gold) == pytest.approx(expected)


def test_token_f1_empty_sides() -> None:
    assert token_f1("", "Paris") == 0.0
    assert token_f1("the", "a") == 1.0  # both normalise to nothing: equal
    assert token_f1("Paris", "") == 0.0


def test_mean_std_population() -> None:
    mean, std = mean_std([80.0, 82.0, 84.0])
    assert mean == pytest.approx(82.0)
    assert std == pytest.approx(math.sqrt(8 / 3))  # ddof = 0
    assert mean_std([5.0]) == (5.0, 0.0)
    m, s = mean_std([])
    assert math.isnan(m) and math.isnan(s)
