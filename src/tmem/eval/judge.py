"""LLM-as-judge: LoCoMo and LongMemEval correctness (CORRECT/WRONG) and LoCoMo-Plus binary memory awareness.

Templates ``judge_locomo.txt``, ``judge_longmemeval.txt`` and ``judge_plus.txt`` sit beside the output schema in :mod:`tmem.eval.judge_schema`.
Judging runs at temperature 0. The ``--runs`` protocol (mean and standard deviation over runs) judges the same
answer several times; because the LLM layer answers a repeated identical request from its cache, each run's request
carries a line "Judgement run k of n." so that every run is a real, separately logged model call.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from tmem.answer.prompting import load_template
from tmem.errors import InputError
from tmem.eval.judge_schema import JudgeVerdict, Label
from tmem.llm.base import LLM, Message
from tmem.scope import Scope

STAGE_JUDGE = "judge"


class Judgement(BaseModel):
    model_config = ConfigDict(frozen=True)

    run: int
    label: Label
    reasoning: str
    tokens_in: int
    tokens_out: int
    cached: bool


def _run_line(run: int, runs: int) -> str:
    return f"Judgement run {run} of {runs}." if runs > 1 else ""


def locomo_judge_messages(question: str, gold: str, prediction: str, *, run: int = 1, runs: int = 1) -> list[Message]:
    template = load_template("tmem.eval", "judge_locomo.txt")
    return template.render(question=question, gold=gold, prediction=prediction, run_line=_run_line(run, runs))


def plus_judge_messages(
    cue: str, trigger: str, prediction: str, relation: str, *, run: int = 1, runs: int = 1
) -> list[Message]:
    template = load_template("tmem.eval", "judge_plus.txt")
    return template.render(
        cue=cue,
        trigger=trigger,
        prediction=prediction,
        relation=relation or "narrative",
        run_line=_run_line(run, runs),
    )


_SUBSET = (
    "The reply is CORRECT when it states the reference answer, an equivalent of it, or every intermediate step "
    "that leads to it. It is WRONG when it gives only part of what the reference requires, a different answer, or "
    "no answer."
)
LONGMEMEVAL_CRITERIA = {
    "single-session-user": _SUBSET,
    "single-session-assistant": _SUBSET,
    "multi-session": _SUBSET,
    "temporal-reasoning": _SUBSET
    + " Counts of days, weeks or months that are off by one from the reference (19 days for 18) are still CORRECT.",
    "knowledge-update": _SUBSET
    + " The reply may also mention earlier information; it is CORRECT as long as the answer it gives as current is "
    "the updated one the reference states.",
    "single-session-preference": (
        "The reference is a rubric of what a personalised reply would do. The reply is CORRECT when it remembers and "
        "uses the user's personal information in the way the rubric describes; it need not cover every point of the "
        "rubric. A generic reply that ignores what the user told the assistant is WRONG."
    ),
}
ABSTENTION_CRITERIA = (
    "The question cannot be answered from the conversations; the reference explains why. The reply is CORRECT when "
    "it recognises that: it says the information is missing or incomplete, or that something related was said but "
    "not what is asked. A reply that answers as if the information were known is WRONG."
)


def longmemeval_judge_messages(
    question_type: str, question: str, gold: str, prediction: str, *, abstention: bool, run: int = 1, runs: int = 1
) -> list[Message]:
    """Our judge for LongMemEval, following the official per-type criteria (evaluate_qa.py) in its own words."""
    if abstention:
        criteria, reference = ABSTENTION_CRITERIA, "Why it cannot be answered"
    elif question_type in LONGMEMEVAL_CRITERIA:
        criteria = LONGMEMEVAL_CRITERIA[question_type]
        reference = "Rubric" if question_type == "single-session-preference" else "Reference answer"
    else:
        raise InputError(
            f"LongMemEval question type {question_type!r} has no judging criteria; the official types are "
            f"{', '.join(LONGMEMEVAL_CRITERIA)}."
        )
    template = load_template("tmem.eval", "judge_longmemeval.txt")
    return template.render(
        criteria=criteria,
        question=question,
        reference_name=reference,
        gold=gold,
        prediction=prediction,
        run_line=_run_line(run, runs),
    )


async def judge(llm: LLM, messages: list[Message], *, space: Scope, run: int) -> Judgement:
    out = await llm.complete(messages, JudgeVerdict, stage=STAGE_JUDGE, space=space, temperature=0.0)
    return Judgement(
        run=run,
        label=out.output.label,
        reasoning=out.output.reasoning,
        tokens_in=out.usage.input_tokens,
        tokens_out=out.usage.output_tokens,
        cached=out.cached,
    )
