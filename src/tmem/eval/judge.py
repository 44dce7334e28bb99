"""LLM-as-judge: LoCoMo correctness (CORRECT/WRONG) and LoCoMo-Plus binary memory awareness.

Templates ``judge_locomo.txt`` and ``judge_plus.txt`` sit beside the output schema in :mod:`tmem.eval.judge_schema`.
Judging runs at temperature 0. The ``--runs`` protocol (mean and standard deviation over runs) judges the same
answer several times; because the LLM layer answers a repeated identical request from its cache, each run's request
carries a line "Judgement run k of n." so that every run is a real, separately logged model call.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from tmem.answer.prompting import load_template
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
