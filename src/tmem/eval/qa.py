"""Question answering + judging for a whole run, resumable, with bounded concurrency and the batch protocol.

One task is one LoCoMo question or one LoCoMo-Plus trigger. For each (variant, task) not yet in the results file:
retrieve, answer (short or CoT prompt; a memory-aware reply for LoCoMo-Plus), judge ``runs`` times, compute F1
(LoCoMo) and evidence coverage, and append the record.

Batch protocol: when the LLMs are in batch mode, a request that is not cached raises :class:`BatchPending` after
being stored as pending. The run keeps going so that every uncached request of the current stage is collected in one
pass (answers first; judge requests only exist once their answer is known), then raises one BatchPending naming the
stage and the count: export with ``tmem llm batch-export``, run the batch, import it, and rerun the same command.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

from tqdm import tqdm

from tmem.answer.answerer import Answer, Answerer, QuestionTime, Variant
from tmem.errors import BatchPending
from tmem.eval.harness import Variant as RunVariant
from tmem.eval.judge import (
    Judgement,
    judge,
    locomo_judge_messages,
    longmemeval_judge_messages,
    plus_judge_messages,
)
from tmem.eval.locomo_data import EvidenceIssue
from tmem.eval.metrics import token_f1
from tmem.eval.records import AnswerRecord, ResultsFile, retrieved_refs
from tmem.llm.base import LLM
from tmem.scope import Scope


@dataclass(frozen=True)
class QATask:
    key: str
    space: str
    benchmark: str  # "locomo", "locomo-plus" or "longmemeval"
    question: str
    when: QuestionTime
    gold: str | None = None  # LoCoMo gold answer
    category: int | None = None
    gold_turn_ids: list[str] = field(default_factory=list)  # LoCoMo evidence or LoCoMo-Plus cue turns
    evidence_issues: list[EvidenceIssue] = field(default_factory=list)
    cue: str = ""  # LoCoMo-Plus cue dialogue as the speakers said it
    relation: str = ""  # LoCoMo-Plus relation type; LongMemEval question type
    abstention: bool = False  # LongMemEval: a question that cannot be answered (judged for saying so)
    speaker: str = ""
    listener: str = ""


@dataclass
class _Pending:
    stage: str = ""
    count: int = 0

    def add(self, exc: BatchPending) -> None:
        self.stage = self.stage or exc.stage
        self.count += max(exc.count, 1)


async def _answer(answerer: Answerer, task: QATask, variant: RunVariant, prompt: Variant) -> Answer:
    if task.benchmark == "locomo-plus":
        return await answerer.reply(
            Scope.local(task.space),
            task.question,
            task.when,
            speaker=task.speaker,
            listener=task.listener,
            config=variant.config,
        )
    return await answerer.answer(
        Scope.local(task.space), task.question, task.when, variant=prompt, config=variant.config
    )


async def _judge_all(judge_llm: LLM, task: QATask, prediction: str, runs: int) -> list[Judgement]:
    """All judge runs of one answer, concurrently; in batch mode every uncached run is stored before raising."""

    async def one(run: int) -> Judgement:
        if task.benchmark == "locomo-plus":
            messages = plus_judge_messages(task.cue, task.question, prediction, task.relation, run=run, runs=runs)
        elif task.benchmark == "longmemeval":
            messages = longmemeval_judge_messages(
                task.relation,
                task.question,
                task.gold or "",
                prediction,
                abstention=task.abstention,
                run=run,
                runs=runs,
            )
        else:
            messages = locomo_judge_messages(task.question, task.gold or "", prediction, run=run, runs=runs)
        return await judge(judge_llm, messages, space=Scope.local(task.space), run=run)

    outcomes = await asyncio.gather(*(one(run) for run in range(1, runs + 1)), return_exceptions=True)
    pending = [o for o in outcomes if isinstance(o, BatchPending)]
    for o in outcomes:
        if isinstance(o, BaseException) and not isinstance(o, BatchPending):
            raise o
    if pending:
        raise BatchPending(str(pending[0]), count=len(pending), stage=pending[0].stage)
    return [o for o in outcomes if isinstance(o, Judgement)]


def _record(task: QATask, variant: RunVariant, answer: Answer, judgements: list[Judgement]) -> AnswerRecord:
    ids = set(answer.context.turn_ids)
    coverage = None
    if task.gold_turn_ids:
        inside = sum(1 for t in task.gold_turn_ids if t in ids)
        coverage = inside / len(task.gold_turn_ids)
    return AnswerRecord(
        key=task.key,
        variant=variant.name,
        space=task.space,
        benchmark=task.benchmark,
        category=task.category,
        question=task.question,
        gold=task.gold if task.benchmark == "locomo" else task.cue,
        question_time=answer.question_time.line(),
        prediction=answer.answer,
        reasoning=answer.reasoning,
        f1=token_f1(answer.answer, task.gold) if task.gold is not None else None,
        judgements=judgements,
        gold_turn_ids=task.gold_turn_ids,
        evidence_issues=task.evidence_issues,
        evidence_coverage=coverage,
        retrieved=retrieved_refs(answer.search),
        context_tokens=answer.tokens.evidence,
        persona_tokens=answer.tokens.persona,
        prompt_tokens=answer.tokens.prompt,
        answer_tokens_in=answer.tokens.llm_input,
        answer_tokens_out=answer.tokens.llm_output,
        judge_tokens_in=sum(j.tokens_in for j in judgements),
        judge_tokens_out=sum(j.tokens_out for j in judgements),
    )


async def run_qa(
    answerer: Answerer,
    judge_llm: LLM | None,
    tasks: Sequence[QATask],
    variants: Sequence[RunVariant],
    results: ResultsFile[AnswerRecord],
    *,
    prompt: Variant = "short",
    runs: int = 3,
    concurrency: int = 8,
    progress: bool = False,
) -> int:
    """Answer and judge every (variant, task) missing from ``results``; returns how many records were added. Without
    ``judge_llm`` answers are recorded unjudged (no judgements)."""
    todo = [(v, t) for v in variants for t in tasks if f"{v.name}|{t.key}" not in results]
    semaphore = asyncio.Semaphore(concurrency)
    answers_pending, judge_pending = _Pending(), _Pending()
    bar = tqdm(total=len(todo), desc="answer+judge", unit="q", disable=not progress)
    added = 0

    failed = asyncio.Event()

    async def one(variant: RunVariant, task: QATask) -> None:
        nonlocal added
        async with semaphore:
            if failed.is_set():
                return
            try:
                try:
                    answer = await _answer(answerer, task, variant, prompt)
                except BatchPending as exc:
                    answers_pending.add(exc)
                    return
                try:
                    judgements = [] if judge_llm is None else await _judge_all(judge_llm, task, answer.answer, runs)
                except BatchPending as exc:
                    judge_pending.add(exc)
                    return
            except BaseException:
                failed.set()  # no new question starts after a failure
                raise
            results.add(_record(task, variant, answer, judgements))
            added += 1
            bar.update(1)

    # The first failure stops the run (remaining questions are cancelled, finished ones are already saved), so an
    # error surfaces at once and a rerun resumes where it stopped.
    futures = [asyncio.ensure_future(one(v, t)) for v, t in todo]
    try:
        if futures:
            _, running = await asyncio.wait(futures, return_when=asyncio.FIRST_EXCEPTION)
            for fut in running:
                fut.cancel()
            await asyncio.gather(*running, return_exceptions=True)
            for fut in futures:
                exc = None if fut.cancelled() else fut.exception()
                if exc is not None:
                    raise exc
    finally:
        bar.close()
    for collected, stage in ((answers_pending, "answer"), (judge_pending, "judge")):
        if collected.count:
            raise BatchPending(
                f"{collected.count} {stage} requests were stored for the batch protocol: run `tmem llm batch-export "
                "FILE`, send it to the Batch API, `tmem llm batch-import RESULTS`, then rerun this command.",
                count=collected.count,
                stage=stage,
            )
    return added
