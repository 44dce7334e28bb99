"""``summary.json`` and ``report.md`` of a LongMemEval run: every metric per system, per question type and overall.

Retrieval figures are means over the counted questions (:class:`RetrievalRecord.counted`, the official rule), with
the number of questions per group; coverage at a budget is the mean share of ``has_answer`` turns inside each
system's context at that budget, over the non-abstention questions that have such turns. QA accuracy is the mean
share of CORRECT judgements per question (one judgement per question unless ``--runs``), per type (abstention
questions grouped as ``abstention``) and overall.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from statistics import mean
from typing import Any

from tmem.eval.longmemeval.metrics import KS, METRICS
from tmem.eval.longmemeval.retrieval import SESSION_SYSTEMS, TURN_SYSTEMS, RetrievalRecord
from tmem.eval.longmemeval.synth import ABSTENTION
from tmem.eval.records import AnswerRecord

OVERALL = "overall"


def _group(rows: Sequence[tuple[str, float]]) -> dict[str, dict[str, float]]:
    by: dict[str, list[float]] = defaultdict(list)
    for label, value in rows:
        by[label].append(value)
        by[OVERALL].append(value)
    return {label: {"mean": mean(values), "n": len(values)} for label, values in sorted(by.items())}


def retrieval_summary(records: Sequence[RetrievalRecord], *, kind: str, counter: str) -> dict[str, Any]:
    counted = [r for r in records if r.counted]
    retrieval: dict[str, dict[str, dict[str, dict[str, Any]]]] = {}
    for system in (*TURN_SYSTEMS, *SESSION_SYSTEMS):
        for level in ("session", "turn"):
            names = [f"{m}@{k}" for k in KS for m in METRICS]
            rows = [r for r in counted if level in r.metrics.get(system, {})]
            if not rows:
                continue
            per = {name: _group([(r.question_type, r.metrics[system][level][name]) for r in rows]) for name in names}
            retrieval.setdefault(system, {})[level] = per
    coverage: dict[str, dict[str, list[tuple[str, float]]]] = {}
    for r in records:
        if r.abstention:
            continue
        for cell in r.budgets:
            for system, cov in cell.systems.items():
                if cov.coverage is not None:
                    coverage.setdefault(str(cell.budget), {}).setdefault(system, []).append(
                        (r.question_type, cov.coverage)
                    )
    return {
        "benchmark": "longmemeval",
        "kind": kind,
        "mode": "retrieval-only",
        "questions": len(records),
        "counted": len(counted),
        "counter": counter,
        "retrieval": retrieval,
        "coverage": {b: {s: _group(rows) for s, rows in systems.items()} for b, systems in coverage.items()},
    }


def qa_summary(
    done: Sequence[tuple[str, AnswerRecord]], *, kind: str, answer_model: str, judge_model: str | None, runs: int
) -> dict[str, Any]:
    judged = [(label, r) for label, r in done if r.judgements]
    accuracy = _group([(label, mean(x == "CORRECT" for x in r.labels)) for label, r in judged])
    return {
        "benchmark": "longmemeval",
        "kind": kind,
        "mode": "qa",
        "questions": len(done),
        "judged": len(judged),
        "answer_model": answer_model,
        "judge_model": judge_model,
        "runs": runs if judge_model else None,
        "accuracy": accuracy,
        "hypotheses": "hypotheses.jsonl",
    }


def _pct(cell: dict[str, Any] | None) -> str:
    return "-" if cell is None else f"{100 * cell['mean']:.1f}"


def render_summary(summary: dict[str, Any]) -> str:
    lines = [f"# LongMemEval ({summary['kind'].upper()}-like or real file), {summary['mode']}", ""]
    lines.append(f"Command: `{summary.get('command', '')}`")
    lines.append("")
    if summary["mode"] == "qa":
        acc = summary["accuracy"]
        lines.append(f"Answer model {summary['answer_model']}, judge {summary['judge_model'] or 'none'}.")
        lines += ["", "| question type | accuracy % | n |", "|---|---|---|"]
        lines += [f"| {t} | {_pct(c)} | {c['n']} |" for t, c in acc.items()]
        lines += ["", f"Hypothesis file (official format): {summary['hypotheses']}", ""]
        return "\n".join(lines)
    lines.append(f"{summary['counted']} of {summary['questions']} questions counted (the official rule).")
    for level in ("session", "turn"):
        lines += ["", f"## {level.capitalize()} level, overall (%)", ""]
        names = [f"{m}@{k}" for m in METRICS for k in KS]
        lines.append("| system | " + " | ".join(names) + " |")
        lines.append("|---" * (len(names) + 1) + "|")
        for system, levels in summary["retrieval"].items():
            if level in levels:
                cells = [_pct(levels[level][n].get(OVERALL)) for n in names]
                lines.append(f"| {system} | " + " | ".join(cells) + " |")
    if summary["retrieval"].get("tmem"):
        per = summary["retrieval"]["tmem"]["session"]["recall_any@5"]
        lines += ["", "## tmem session recall_any@5 per type (%)", "", "| type | % | n |", "|---|---|---|"]
        lines += [f"| {t} | {_pct(c)} | {c['n']} |" for t, c in per.items() if t != ABSTENTION]
    if summary["coverage"]:
        budgets = sorted(summary["coverage"], key=int)
        systems = list(summary["coverage"][budgets[0]])
        lines += ["", f"## Evidence coverage at equal {summary['counter']} tokens, overall (%)", ""]
        lines.append("| system | " + " | ".join(budgets) + " |")
        lines.append("|---" * (len(budgets) + 1) + "|")
        for s in systems:
            lines.append(
                f"| {s} | " + " | ".join(_pct(summary["coverage"][b].get(s, {}).get(OVERALL)) for b in budgets) + " |"
            )
    return "\n".join(lines) + "\n"
