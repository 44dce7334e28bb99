"""``tmem eval longmemeval``: prepare one memory per instance, run retrieval-only or QA, write ``OUT/longmemeval``.

Results folder (``--out OUT``)::

    OUT/memory/tmem.db                 memories (unless --dir names another memory directory)
    OUT/longmemeval/manifest.json      tmem version, settings, models, data file sha256
    OUT/longmemeval/records.jsonl      one line per question; the resume log
    OUT/longmemeval/hypotheses.jsonl   QA: the official hypothesis file ({"question_id", "hypothesis"} per line)
    OUT/longmemeval/summary.json       every metric per system, per question type and overall
    OUT/longmemeval/report.md          the same as tables
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from tmem.answer.answerer import QuestionTime
from tmem.embed.base import Embedder
from tmem.eval.harness import MemoEmbedder, Variant, parse_variants, prepare_spaces
from tmem.eval.longmemeval.data import Instance, detect_kind, load_instances, seed_sources
from tmem.eval.longmemeval.report import qa_summary, render_summary, retrieval_summary
from tmem.eval.longmemeval.retrieval import RetrievalRecord, run_retrieval
from tmem.eval.qa import QATask
from tmem.eval.records import ResultsFile
from tmem.eval.runs import EvalOptions, Models, answer_and_judge, require_answer, write_cost, write_run_manifest
from tmem.retrieve.cascade import Retriever
from tmem.retrieve.config import RetrievalConfig
from tmem.settings import Settings
from tmem.store.base import Store
from tmem.util.tokens import token_counter

BENCHMARK = "longmemeval"


async def eval_longmemeval(
    store: Store, settings: Settings, opts: EvalOptions, models: Models, embedder: Embedder
) -> dict[str, object]:
    """The whole run; returns the summary written to ``summary.json``."""
    folder = opts.out / BENCHMARK
    variants = parse_variants(RetrievalConfig.preset(opts.preset), None, [])
    instances = load_instances(opts.data, types=opts.types, limit=opts.limit)
    if not opts.retrieval_only:
        require_answer(models, judge=opts.judge)
    kind = detect_kind(instances)
    write_run_manifest(opts, BENCHMARK, settings, models, embedder, variants)
    await prepare_spaces(
        store,
        [i.space for i in instances],
        llm=models.build,
        embedder=embedder,
        options=opts.build_options,
        progress=opts.progress,
        seed_from=seed_sources(instances),
    )
    write_cost(store, folder, [i.key for i in instances], models)
    memo = MemoEmbedder(embedder)
    retriever = Retriever(store, memo)
    if opts.retrieval_only:
        counter = token_counter(settings.tokenizer)
        results: ResultsFile[RetrievalRecord] = ResultsFile(folder / "records.jsonl", RetrievalRecord)
        run_retrieval(
            store,
            retriever,
            memo,
            instances,
            variants[0],
            results,
            budgets=opts.budgets,
            counter=counter,
            progress=opts.progress,
        )
        wanted = {i.key for i in instances}
        summary = retrieval_summary([r for r in results if r.key in wanted], kind=kind, counter=counter.name)
    else:
        summary = await _qa(retriever, models, instances, variants, folder, opts, kind)
    summary["command"] = opts.command
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    (folder / "report.md").write_text(render_summary(summary), encoding="utf-8")
    return summary


async def _qa(
    retriever: Retriever,
    models: Models,
    instances: Sequence[Instance],
    variants: Sequence[Variant],
    folder: Path,
    opts: EvalOptions,
    kind: str,
) -> dict[str, object]:
    answer_llm = require_answer(models, judge=opts.judge)
    judge_llm = models.judge if opts.judge else None
    tasks = [
        QATask(
            key=i.key,
            space=i.key,
            benchmark=BENCHMARK,
            question=i.question,
            when=QuestionTime(at=i.question_date, relation="at"),
            gold=i.answer,
            gold_turn_ids=i.evidence_turn_ids,
            relation=i.question_type,
            abstention=i.abstention,
        )
        for i in instances
    ]
    results = await answer_and_judge(retriever, answer_llm, judge_llm, tasks, variants, folder, opts)
    by_key = {r.key: r for r in results if r.variant == variants[0].name}
    done = [(i, by_key[i.key]) for i in instances if i.key in by_key]
    path = folder / "hypotheses.jsonl"
    lines = [json.dumps({"question_id": i.key, "hypothesis": r.prediction}, ensure_ascii=False) for i, r in done]
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return qa_summary(
        [(i.type_label, r) for i, r in done],
        kind=kind,
        answer_model=answer_llm.model,
        judge_model=judge_llm.model if judge_llm else None,
        runs=opts.runs,
    )
