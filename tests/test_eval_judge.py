"""The judge's verdict parsing is robust to messy replies, and an ambiguous verdict is retried, not guessed."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tmem.eval.judge import judge, locomo_judge_messages, plus_judge_messages
from tmem.eval.judge_schema import JudgeVerdict, parse_label
from tmem.llm.scripted import scripted_llm
from tmem.scope import Scope
from tmem.store.sqlite import SQLiteStore


@pytest.mark.parametrize(
    ("raw", "label"),
    [
        ("CORRECT", "CORRECT"),
        ("wrong", "WRONG"),
        ("**Correct**", "CORRECT"),
        ("Label: WRONG.", "WRONG"),
        ("incorrect", "WRONG"),
        ("The answer is not correct.", "WRONG"),
        ("Not wrong", "CORRECT"),
        ("The answer isn't correct.", "WRONG"),  # a contracted negation is a negation
        ("isn\u2019t correct", "WRONG"),
        ("The prediction is not entirely correct", "WRONG"),  # strict on facts: a hedged negation still negates
        ("It wasn't wrong", "CORRECT"),
        ('```json\n{"label": "WRONG", "reasoning": "dates differ"}\n```', "WRONG"),
        ("label: CORRECT (the answer is not wrong)", "CORRECT"),
        ("There is no error here, so it is correct", "CORRECT"),  # "no" inside a sentence is not a verdict
        ("Yes.", "CORRECT"),
        ("no", "WRONG"),
        ("UNAWARE", "WRONG"),
        ('"aware"', "CORRECT"),
        (True, "CORRECT"),
    ],
)
def test_parse_label_messy(raw: object, label: str) -> None:
    assert parse_label(raw) == label


@pytest.mark.parametrize("raw", ["", "maybe", "CORRECT or WRONG", "correct but also wrong", 3])
def test_parse_label_refuses_to_guess(raw: object) -> None:
    with pytest.raises(ValueError):
        parse_label(raw)


def test_verdict_schema_normalises_and_rejects() -> None:
    assert JudgeVerdict.model_validate({"label": " Correct. "}).label == "CORRECT"
    assert JudgeVerdict.model_validate({"label": "WRONG", "extra": 1}).label == "WRONG"
    with pytest.raises(ValidationError):
        JudgeVerdict.model_validate({"reasoning": "hm", "label": "unsure"})


async def test_judge_retries_an_ambiguous_reply_through_the_llm_layer() -> None:
    store = SQLiteStore.open(":memory:")
    llm = scripted_llm(
        store,
        replies=[
            'Sure! Here is my grading: {"reasoning": "same date", "label": "correct or wrong"}',
            '{"reasoning": "same date, other format", "label": "**Correct**"}',
        ],
    )
    messages = locomo_judge_messages("When did Gina launch an ad campaign?", "29 January, 2023", "Jan 29, 2023")
    out = await judge(llm, messages, space=Scope.local("conv-30"), run=1)
    assert out.label == "CORRECT"
    assert len(llm.backend.requests) == 2  # type: ignore[attr-defined]
    retry = llm.backend.requests[1].messages[-1].content  # type: ignore[attr-defined]
    assert "ambiguous verdict" in retry  # the model is shown why its first reply failed


def test_judge_runs_are_distinct_requests() -> None:
    one = locomo_judge_messages("q", "gold", "pred", run=1, runs=3)
    two = locomo_judge_messages("q", "gold", "pred", run=2, runs=3)
    assert one[0] == two[0] and one[1] != two[1]
    single = locomo_judge_messages("q", "gold", "pred")
    assert "Judgement run" not in single[1].content
    plus = plus_judge_messages("Caroline: I adopted a dog.", "I need a bigger flat.", "Is it for Rex?", "causal")
    assert "causal relation" in plus[0].content and "I adopted a dog." in plus[1].content
