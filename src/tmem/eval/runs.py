"""The two evaluation commands end to end: prepare memories, run retrieval-only or QA, write the results folder.

Results folder layout (``--out OUT``)::

    OUT/memory/tmem.db            memories (unless --dir names another memory directory)
    OUT/locomo/manifest.json      tmem version, settings, models, data file sha256
    OUT/locomo/records.jsonl      one line per (variant, question); the resume log
    OUT/locomo/report.{md,json}   the tables
    OUT/locomo-plus/...           the same for LoCoMo-Plus
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from tmem.answer.answerer import Answerer, QuestionTime
from tmem.construct.options import BuildOptions
from tmem.embed.base import Embedder
from tmem.errors import ConfigError, InputError
from tmem.eval.cost import construction_cost, render_cost
from tmem.eval.harness import MemoEmbedder, Variant, make_manifest, parse_variants, prepare_spaces, write_manifest
from tmem.eval.locomo_data import LocomoQuestion, load_questions, normalise_evidence
from tmem.eval.plots import write_coverage_plots
from tmem.eval.plus_data import StitchMode, load_probes, stitch, summarise
from tmem.eval.qa import QATask, run_qa
from tmem.eval.records import AnswerRecord, CoverageRecord, ResultsFile
from tmem.eval.report import (
    CoverageReport,
    QAReport,
    coverage_report,
    qa_report,
    render_coverage,
    render_qa,
    write_report,
)
from tmem.eval.retrieval_only import Query, locomo_queries, plus_queries, run_retrieval_only
from tmem.ingest.reader import read_file
from tmem.ingest.types import SpaceInput
from tmem.llm.base import LLM
from tmem.retrieve.cascade import Retriever
from tmem.retrieve.config import RetrievalConfig
from tmem.settings import Settings
from tmem.store.base import Store
from tmem.util.tokens import TokenCounter, token_counter


class EvalOptions(BaseModel):
    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    data: Path
    locomo: Path | None = None  # LoCoMo-Plus: the LoCoMo file to stitch into
    out: Path
    conversations: list[str] = []
    retrieval_only: bool = False
    budgets: list[int] = []  # retrieval-only: also walk every system to these context budgets
    runs: int = 3
    prompt: Literal["short", "cot"] = "short"
    ablate: str | None = None
    sweep: list[str] = []
    preset: str = "paper"
    stitch: StitchMode = "shared"
    limit: int | None = None  # at most this many questions per conversation (LongMemEval: instances)
    types: list[str] = []  # LongMemEval: only these question types (or "abstention")
    judge: bool = True  # LongMemEval: judge the answers (else answers and the hypothesis file only)
    concurrency: int = 8
    progress: bool = False
    command: str = ""
    build_options: BuildOptions | None = None


@dataclass(frozen=True)
class Models:
    """The LLMs of a run; ``build`` None means extractive memories."""

    build: LLM | None
    answer: LLM | None
    judge: LLM | None


def _conversations(path: Path, wanted: Sequence[str]) -> list[SpaceInput]:
    spaces = read_file(path, "locomo")
    if wanted:
        known = {s.name for s in spaces}
        unknown = [w for w in wanted if w not in known]
        if unknown:
            raise ConfigError(f"--conversations: {', '.join(unknown)} not in {path}; it has {', '.join(sorted(known))}")
        spaces = [s for s in spaces if s.name in wanted]
    return spaces


def _limit(questions: Sequence[LocomoQuestion], limit: int | None) -> list[LocomoQuestion]:
    """The first ``limit`` questions of each conversation (all when None)."""
    if limit is None:
        return list(questions)
    seen: dict[str, int] = {}
    out = []
    for q in questions:
        if seen.get(q.space, 0) < limit:
            out.append(q)
            seen[q.space] = seen.get(q.space, 0) + 1
    return out


_QA_NEEDS = (
    "QA evaluation needs an answer LLM and a judge LLM: set TMEM_LLM=openai, TMEM_LLM_MODEL (and optionally "
    "TMEM_ANSWER_MODEL / TMEM_JUDGE_MODEL) and OPENAI_BASE_URL; or pass --retrieval-only, which needs none."
)


def _require_qa(models: Models) -> tuple[LLM, LLM]:
    if models.answer is None or models.judge is None:
        raise ConfigError(_QA_NEEDS)
    return models.answer, models.judge


def require_answer(models: Models, *, judge: bool) -> LLM:
    """The answer LLM of a QA run (and a check that the judge LLM is there when ``judge``)."""
    if judge:
        return _require_qa(models)[0]
    if models.answer is None:
        raise ConfigError(_QA_NEEDS)
    return models.answer


def write_run_manifest(
    opts: EvalOptions, benchmark: str, settings: Settings, models: Models, embedder: Embedder, vs: list[Variant]
) -> None:
    files = [opts.data] + ([opts.locomo] if opts.locomo else [])
    manifest = make_manifest(
        command=opts.command,
        benchmark=benchmark,
        mode="retrieval-only" if opts.retrieval_only else "qa",
        settings=settings,
        models={
            "build": models.build.model if models.build else None,
            "answer": None if opts.retrieval_only or not models.answer else models.answer.model,
            "judge": None if opts.retrieval_only or not models.judge or not opts.judge else models.judge.model,
        },
        embedder=embedder,
        preset=opts.preset,
        variants=vs,
        data_files=files,
        runs=None if opts.retrieval_only else opts.runs,
        prompt=None if opts.retrieval_only else ("reply" if benchmark == "locomo-plus" else opts.prompt),
        stitch=opts.stitch if benchmark == "locomo-plus" else None,
    )
    write_manifest(opts.out / benchmark, manifest)


async def eval_locomo(
    store: Store, settings: Settings, opts: EvalOptions, models: Models, embedder: Embedder
) -> CoverageReport | QAReport:
    folder = opts.out / "locomo"
    variants = parse_variants(RetrievalConfig.preset(opts.preset), opts.ablate, opts.sweep)
    if not opts.retrieval_only:
        _require_qa(models)
    write_run_manifest(opts, "locomo", settings, models, embedder, variants)
    spaces = _conversations(opts.data, opts.conversations)
    await prepare_spaces(
        store, spaces, llm=models.build, embedder=embedder, options=opts.build_options, progress=opts.progress
    )
    write_cost(store, folder, [s.name for s in spaces], models)
    questions = load_questions(opts.data, conversations=[s.name for s in spaces])
    questions = _limit(questions, opts.limit)
    memo = MemoEmbedder(embedder)
    retriever = Retriever(store, memo)
    if opts.retrieval_only:
        return _coverage_run(
            store,
            retriever,
            memo,
            locomo_queries(questions),
            variants,
            folder,
            "locomo",
            opts,
            token_counter(settings.tokenizer),
        )
    answer_llm, judge_llm = _require_qa(models)
    asked = {s.name: QuestionTime.after_sessions(x.started_at for x in s.sessions) for s in spaces}
    known = {s.name: {t.id for x in s.sessions for t in x.turns} for s in spaces}
    tasks = []
    for q in questions:
        evidence = normalise_evidence(q.evidence_raw, known[q.space])
        tasks.append(
            QATask(
                key=q.key,
                space=q.space,
                benchmark="locomo",
                question=q.question,
                when=asked[q.space],
                gold=q.answer,
                category=q.category,
                gold_turn_ids=evidence.turn_ids,
                evidence_issues=evidence.issues,
            )
        )
    return await _qa_run(
        retriever, answer_llm, judge_llm, tasks, variants, folder, "locomo", opts, prompt_variant=opts.prompt
    )


def _coverage_run(
    store: Store,
    retriever: Retriever,
    memo: MemoEmbedder,
    queries: Sequence[Query],
    variants: Sequence[Variant],
    folder: Path,
    benchmark: str,
    opts: EvalOptions,
    counter: TokenCounter,
) -> CoverageReport:
    """Retrieval-only: evaluate what ``folder/records.jsonl`` lacks, then write the report of every record."""
    cov: ResultsFile[CoverageRecord] = ResultsFile(folder / "records.jsonl", CoverageRecord)
    run_retrieval_only(
        store, retriever, memo, queries, variants, cov, budgets=opts.budgets, progress=opts.progress, counter=counter
    )
    report = coverage_report(list(cov), benchmark=benchmark, preset=opts.preset, command=opts.command)
    write_report(folder, report, render_coverage(report))
    write_coverage_plots(folder, report)
    return report


async def _qa_run(
    retriever: Retriever,
    answer_llm: LLM,
    judge_llm: LLM,
    tasks: Sequence[QATask],
    variants: Sequence[Variant],
    folder: Path,
    benchmark: str,
    opts: EvalOptions,
    *,
    prompt_variant: str,
    locomo_overall: float | None = None,
) -> QAReport:
    """Answer and judge what ``folder/records.jsonl`` lacks, then write the report of every record."""
    qa = await answer_and_judge(retriever, answer_llm, judge_llm, tasks, variants, folder, opts)
    report = qa_report(
        list(qa),
        benchmark=benchmark,
        answer_model=answer_llm.model,
        judge_model=judge_llm.model,
        prompt_variant=prompt_variant,
        runs=opts.runs,
        locomo_overall=locomo_overall,
        command=opts.command,
    )
    write_report(folder, report, render_qa(report))
    return report


async def answer_and_judge(
    retriever: Retriever,
    answer_llm: LLM,
    judge_llm: LLM | None,
    tasks: Sequence[QATask],
    variants: Sequence[Variant],
    folder: Path,
    opts: EvalOptions,
) -> ResultsFile[AnswerRecord]:
    """Answer (and judge, unless ``judge_llm`` is None) every task ``folder/records.jsonl`` lacks; every record."""
    qa: ResultsFile[AnswerRecord] = ResultsFile(folder / "records.jsonl", AnswerRecord)
    await run_qa(
        Answerer(retriever, answer_llm),
        judge_llm,
        tasks,
        variants,
        qa,
        prompt=opts.prompt,
        runs=opts.runs,
        concurrency=opts.concurrency,
        progress=opts.progress,
    )
    return qa


def write_cost(store: Store, folder: Path, spaces: Sequence[str], models: Models) -> None:
    if models.build is None:
        return  # extractive memories make no LLM calls
    cost = construction_cost(store, spaces)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "cost.json").write_text(cost.model_dump_json(indent=2) + "\n", encoding="utf-8")
    (folder / "cost.md").write_text(render_cost(cost), encoding="utf-8")


def read_locomo_overall(out: Path) -> float | None:
    """The LoCoMo QA overall of the same --out folder, for the LoCoMo -> LoCoMo-Plus gap; None when there is none."""
    path = out / "locomo" / "report.json"
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(
            f"{path}: not valid JSON ({exc.msg}); rerun `tmem eval locomo` with this --out to rewrite it (its records "
            "are kept), or delete it to report LoCoMo-Plus without the gap."
        ) from exc
    for row in data.get("rows", []):
        if row.get("variant") == "full" and isinstance(row.get("overall"), dict):
            return float(row["overall"]["mean"])
    return None


async def eval_plus(
    store: Store, settings: Settings, opts: EvalOptions, models: Models, embedder: Embedder
) -> CoverageReport | QAReport:
    if opts.locomo is None:
        raise ConfigError("tmem eval locomo-plus needs --locomo FILE: the LoCoMo conversations to stitch probes into")
    folder = opts.out / "locomo-plus"
    variants = parse_variants(RetrievalConfig.preset(opts.preset), opts.ablate, opts.sweep)
    if not opts.retrieval_only:
        _require_qa(models)
    write_run_manifest(opts, "locomo-plus", settings, models, embedder, variants)
    conversations = _conversations(opts.locomo, [])
    probes = load_probes(opts.data)
    if opts.limit is not None:
        probes = probes[: opts.limit * len(conversations)]
    stitched = stitch(conversations, probes, mode=opts.stitch)
    if opts.conversations:
        stitched = [s for s in stitched if s.conversation in opts.conversations]
    summary = summarise(stitched)
    spaces = [SpaceInput(name=s.name, speakers=s.speakers, sessions=s.sessions) for s in stitched]
    await prepare_spaces(
        store,
        spaces,
        llm=models.build,
        embedder=embedder,
        options=opts.build_options,
        progress=opts.progress,
        seed_from={s.name: s.conversation for s in stitched},
    )
    write_cost(store, folder, [s.name for s in spaces], models)
    all_probes = [p for s in stitched for p in s.probes]
    memo = MemoEmbedder(embedder)
    retriever = Retriever(store, memo)
    (folder / "stitching.json").write_text(summary.model_dump_json(indent=2) + "\n", encoding="utf-8")
    if opts.retrieval_only:
        return _coverage_run(
            store,
            retriever,
            memo,
            plus_queries(all_probes),
            variants,
            folder,
            "locomo-plus",
            opts,
            token_counter(settings.tokenizer),
        )
    answer_llm, judge_llm = _require_qa(models)
    speakers = {s.name: s.speakers for s in stitched}
    tasks = []
    for p in all_probes:
        pair = speakers[p.space]
        listener = pair[1] if p.query_speaker == pair[0] else pair[0]
        tasks.append(
            QATask(
                key=p.key,
                space=p.space,
                benchmark="locomo-plus",
                question=p.query,
                when=QuestionTime(at=p.query_time, relation="at"),
                gold_turn_ids=list(p.cue_turn_ids),
                cue=p.cue,
                relation=p.probe.relation_type,
                speaker=p.query_speaker,
                listener=listener,
            )
        )
    return await _qa_run(
        retriever,
        answer_llm,
        judge_llm,
        tasks,
        variants,
        folder,
        "locomo-plus",
        opts,
        prompt_variant="reply",
        locomo_overall=read_locomo_overall(opts.out),
    )
