"""Aggregated reports: retrieval coverage, Table 2 (LoCoMo), Table 3 (LoCoMo-Plus and the gap), Table 4 (ablations).

Each report is a typed model written as ``report.json`` and rendered as ``report.md``. Percentages are in %.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from tmem.eval.locomo_data import CATEGORY_NAMES, SCORED_CATEGORIES
from tmem.eval.metrics import mean_std
from tmem.eval.records import AnswerRecord, CoverageRecord
from tmem.eval.retrieval_only import BUDGETS_VARIANT

SYSTEM_LABELS = {
    "tmem": "tmem (cascade)",
    "bm25": "flat BM25 over turns",
    "dense": "flat dense over turns",
    "hybrid": "flat hybrid RRF over turns",
    "random-scenes": "random scenes (query-agnostic control)",
}


class MeanStd(BaseModel):
    model_config = ConfigDict(frozen=True)

    mean: float
    std: float
    n: int = Field(description="Questions behind the figure.")

    def cell(self) -> str:
        if self.n == 0 or math.isnan(self.mean):
            return "–"
        return f"{self.mean:.2f} ± {self.std:.2f}" if self.std > 0 else f"{self.mean:.2f}"


def _pct(values: Sequence[float]) -> float:
    return 100.0 * sum(values) / len(values) if values else math.nan


def _fmt(x: float | None, digits: int = 1) -> str:
    return "–" if x is None or math.isnan(x) else f"{x:.{digits}f}"


# ------------------------------------------------------------------------------------------------ retrieval only


class CoverageRow(BaseModel):
    variant: str
    system: str
    by_category: dict[str, float] = Field(
        default_factory=dict, description="LoCoMo: mean coverage % per category; LoCoMo-Plus: cue hit % per relation."
    )
    overall: float = Field(description="LoCoMo: mean evidence coverage %; LoCoMo-Plus: cue hit %.")
    all_hit: float = Field(description="LoCoMo: % of questions with every gold turn inside; Plus: same as overall.")
    tokens: float = Field(description="Mean context size in tokens (the report's counter).")
    n: int


class BudgetRow(BaseModel):
    """One system at one context budget: LoCoMo evidence coverage % or LoCoMo-Plus cue hit %."""

    system: str
    budget: int
    value: float
    all_hit: float
    tokens: float = Field(description="Mean context size actually used (the report's counter).")
    n: int


class CoverageReport(BaseModel):
    benchmark: str
    preset: str
    questions: int
    scored: int = Field(description="Questions with usable gold evidence (LoCoMo) or probes (LoCoMo-Plus).")
    evidence_issues: dict[str, int] = Field(default_factory=dict)
    rows: list[CoverageRow]
    budget_rows: list[BudgetRow] = Field(default_factory=list, description="--budgets: every system per budget.")
    route_attribution: dict[str, dict[str, float]] = Field(
        default_factory=dict,
        description="--budgets: budget -> route -> % of scored questions where that route reached a hit that put a "
        "gold turn or cue inside tmem's context.",
    )
    command: str = ""
    counter: str = Field(default="words", description="The tokenizer every size was counted with.")


def coverage_report(
    records: Sequence[CoverageRecord], *, benchmark: str, preset: str, command: str = ""
) -> CoverageReport:
    budget_recs = [r for r in records if r.variant == BUDGETS_VARIANT and r.gold_turn_ids]
    records = [r for r in records if r.variant != BUDGETS_VARIANT]
    variants = list(dict.fromkeys(r.variant for r in records))
    rows: list[CoverageRow] = []
    issues: dict[str, int] = {}
    for r in records:
        if r.variant == "full":
            for issue in r.evidence_issues:
                issues[issue.problem] = issues.get(issue.problem, 0) + 1
    full = [r for r in records if r.variant == "full"]
    scored_full = [r for r in full if r.gold_turn_ids]
    for variant in variants:
        recs = [r for r in records if r.variant == variant and r.gold_turn_ids]
        systems = list(dict.fromkeys(s for r in recs for s in r.systems))
        if variant != "full":
            systems = ["tmem"]
        for system in systems:
            pairs = [(r, r.systems[system]) for r in recs if system in r.systems]
            cells = [c for _, c in pairs]
            by_cat: dict[str, float] = {}
            if benchmark == "locomo":
                for cat in SCORED_CATEGORIES:
                    vals = [c.coverage for r, c in pairs if r.category == cat and c.coverage is not None]
                    by_cat[CATEGORY_NAMES[cat]] = _pct(vals)
                overall = _pct([c.coverage for c in cells if c.coverage is not None])
            else:
                for relation in sorted({r.relation for r, _ in pairs if r.relation}):
                    by_cat[relation] = _pct([1.0 if c.hit else 0.0 for r, c in pairs if r.relation == relation])
                overall = _pct([1.0 if c.hit else 0.0 for c in cells])
            rows.append(
                CoverageRow(
                    variant=variant,
                    system=system,
                    by_category=by_cat,
                    overall=overall,
                    all_hit=_pct([1.0 if c.hit else 0.0 for c in cells]),
                    tokens=sum(c.tokens for c in cells) / len(cells) if cells else math.nan,
                    n=len(cells),
                )
            )
    return CoverageReport(
        benchmark=benchmark,
        preset=preset,
        questions=len(full),
        scored=len(scored_full),
        evidence_issues=issues,
        rows=rows,
        budget_rows=_budget_rows(budget_recs, benchmark),
        route_attribution=_attribution(budget_recs),
        command=command,
        counter=", ".join(sorted({r.counter for r in [*records, *budget_recs]})) or "cl100k",
    )


def _budget_rows(recs: Sequence[CoverageRecord], benchmark: str) -> list[BudgetRow]:
    out = []
    budgets = sorted({c.budget for r in recs for c in r.budgets})
    systems = list(dict.fromkeys(s for r in recs for c in r.budgets for s in c.systems))
    for system in systems:
        for budget in budgets:
            cells = [c.systems[system] for r in recs for c in r.budgets if c.budget == budget and system in c.systems]
            if not cells:
                continue
            hits = [1.0 if c.hit else 0.0 for c in cells]
            value = _pct([c.coverage for c in cells if c.coverage is not None]) if benchmark == "locomo" else _pct(hits)
            out.append(
                BudgetRow(
                    system=system,
                    budget=budget,
                    value=value,
                    all_hit=_pct(hits),
                    tokens=sum(c.tokens for c in cells) / len(cells),
                    n=len(cells),
                )
            )
    return out


def _attribution(recs: Sequence[CoverageRecord]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for budget in sorted({c.budget for r in recs for c in r.budgets}):
        cells = [c for r in recs for c in r.budgets if c.budget == budget]
        routes = sorted({name for c in cells for name in c.routes})
        out[str(budget)] = {name: _pct([1.0 if name in c.routes else 0.0 for c in cells]) for name in routes}
    return out


def render_budgets(report: CoverageReport) -> list[str]:
    """The fixed-budget table (every system walked to each budget) and the per-route attribution."""
    if not report.budget_rows:
        return []
    budgets = sorted({r.budget for r in report.budget_rows})
    metric = "evidence coverage %" if report.benchmark == "locomo" else "cue hit %"
    lines = [
        "",
        f"## At fixed context budgets ({metric})",
        "",
        "tmem: `Memory.context(space, query, max_tokens=B)` (evidence only, persona excluded); the flat baselines take "
        "whole turns best first and the control the memory's scenes in a query-agnostic order, each while it fits "
        f"in B tokens, every system counted by the {report.counter} tokenizer. n = {report.budget_rows[0].n}.",
        "",
        "| System | " + " | ".join(f"{b}" for b in budgets) + " |",
        "|---|" + "---:|" * len(budgets),
    ]
    for system in dict.fromkeys(r.system for r in report.budget_rows):
        vals = {r.budget: r for r in report.budget_rows if r.system == system}
        label = "tmem (Memory.context)" if system == "tmem" else SYSTEM_LABELS.get(system, system)
        cells = [_fmt(vals[b].value) if b in vals else "–" for b in budgets]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines += ["", "Tokens actually used (mean):", "", "| System | " + " | ".join(f"{b}" for b in budgets) + " |"]
    lines.append("|---|" + "---:|" * len(budgets))
    for system in dict.fromkeys(r.system for r in report.budget_rows):
        vals = {r.budget: r for r in report.budget_rows if r.system == system}
        lines.append(
            f"| {system} | " + " | ".join(_fmt(vals[b].tokens, 0) if b in vals else "–" for b in budgets) + " |"
        )
    routes = sorted({name for per in report.route_attribution.values() for name in per})
    if routes:
        lines += [
            "",
            "Per route: % of questions where the route reached a hit that put a gold turn (LoCoMo) or a cue turn "
            "(LoCoMo-Plus) inside tmem's context (a hit reached by several routes counts for each).",
            "",
            "| Route | " + " | ".join(f"{b}" for b in budgets) + " |",
            "|---|" + "---:|" * len(budgets),
        ]
        for name in routes:
            cells = [_fmt(report.route_attribution.get(str(b), {}).get(name, 0.0)) for b in budgets]
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def render_coverage(report: CoverageReport) -> str:
    lines = [f"# Retrieval only: {report.benchmark} (preset `{report.preset}`)", ""]
    if report.command:
        lines += ["Command:", "", f"    {report.command}", ""]
    if report.benchmark == "locomo":
        cats = [CATEGORY_NAMES[c] for c in SCORED_CATEGORIES]
        lines += [
            f"Evidence coverage (% of gold evidence turns inside the returned context), {report.scored} of "
            f"{report.questions} questions with usable evidence. Baselines get the same token budget per question; "
            f"tokens counted by the {report.counter} tokenizer.",
            "",
            "| Variant | System | " + " | ".join(cats) + " | Overall | All evidence | Tokens |",
            "|---|---|" + "---:|" * (len(cats) + 3),
        ]
        for row in report.rows:
            cells = [_fmt(row.by_category.get(c)) for c in cats]
            lines.append(
                f"| {row.variant} | {SYSTEM_LABELS.get(row.system, row.system)} | "
                + " | ".join(cells)
                + f" | {_fmt(row.overall)} | {_fmt(row.all_hit)} | {_fmt(row.tokens, 0)} |"
            )
    else:
        relations = list(dict.fromkeys(k for row in report.rows for k in row.by_category))
        lines += [
            f"Cue hit (% of probes with any cue turn inside the returned context), {report.scored} probes, overall "
            f"and per relation type. Baselines get the same token budget per probe; tokens counted by the "
            f"{report.counter} tokenizer.",
            "",
            "| Variant | System | " + "".join(f"{r} | " for r in relations) + "Cue hit | Tokens |",
            "|---|---|" + "---:|" * (len(relations) + 2),
        ]
        for row in report.rows:
            rel_cells = "".join(f"{_fmt(row.by_category.get(r))} | " for r in relations)
            lines.append(
                f"| {row.variant} | {SYSTEM_LABELS.get(row.system, row.system)} | {rel_cells}{_fmt(row.overall)} | "
                f"{_fmt(row.tokens, 0)} |"
            )
    if report.evidence_issues:
        parts = ", ".join(f"{k}: {v}" for k, v in sorted(report.evidence_issues.items()))
        lines += ["", f"Evidence ids in the data that were normalised or unusable: {parts}."]
    lines += render_budgets(report)
    lines += [f"\n![{alt}]({name})" for name, alt in plot_names(report)]
    return "\n".join(lines) + "\n"


def plot_names(report: CoverageReport) -> list[tuple[str, str]]:
    """The PNG figures :func:`tmem.eval.plots.write_coverage_plots` writes beside this report."""
    names = []
    if report.budget_rows:
        names.append(("budgets.png", f"{report.benchmark}: tmem, flat baselines and control against the budget"))
    if len({r.variant for r in report.rows}) > 1:
        names.append(("variants.png", f"{report.benchmark}: ablations and sweeps"))
    return names


# ------------------------------------------------------------------------------------------------ QA


class QARow(BaseModel):
    variant: str
    by_category: dict[str, MeanStd] = Field(default_factory=dict)
    overall: MeanStd
    f1: float | None = Field(default=None, description="Mean token F1 x 100 (LoCoMo only).")
    context_tokens: float
    answer_tokens_in: float
    runs: int


class QAReport(BaseModel):
    benchmark: str
    answer_model: str
    judge_model: str
    prompt_variant: str
    rows: list[QARow]
    locomo_overall: float | None = Field(default=None, description="LoCoMo overall of the same --out, for the gap.")
    command: str = ""


def _accuracy_over_runs(recs: Sequence[AnswerRecord], runs: int) -> MeanStd:
    per_run = [
        _pct([1.0 if len(r.judgements) > k and r.judgements[k].label == "CORRECT" else 0.0 for r in recs])
        for k in range(runs)
    ]
    mean, std = mean_std(per_run) if recs else (math.nan, math.nan)
    return MeanStd(mean=mean, std=std, n=len(recs))


def qa_report(
    records: Sequence[AnswerRecord],
    *,
    benchmark: str,
    answer_model: str,
    judge_model: str,
    prompt_variant: str,
    runs: int,
    locomo_overall: float | None = None,
    command: str = "",
) -> QAReport:
    rows: list[QARow] = []
    for variant in dict.fromkeys(r.variant for r in records):
        recs = [r for r in records if r.variant == variant]
        by_cat: dict[str, MeanStd] = {}
        if benchmark == "locomo":
            for cat in SCORED_CATEGORIES:
                by_cat[CATEGORY_NAMES[cat]] = _accuracy_over_runs([r for r in recs if r.category == cat], runs)
        f1s = [r.f1 for r in recs if r.f1 is not None]
        rows.append(
            QARow(
                variant=variant,
                by_category=by_cat,
                overall=_accuracy_over_runs(recs, runs),
                f1=100.0 * sum(f1s) / len(f1s) if f1s else None,
                context_tokens=sum(r.context_tokens + r.persona_tokens for r in recs) / max(len(recs), 1),
                answer_tokens_in=sum(r.answer_tokens_in for r in recs) / max(len(recs), 1),
                runs=runs,
            )
        )
    return QAReport(
        benchmark=benchmark,
        answer_model=answer_model,
        judge_model=judge_model,
        prompt_variant=prompt_variant,
        rows=rows,
        locomo_overall=locomo_overall,
        command=command,
    )


def render_qa(report: QAReport) -> str:
    lines = [
        f"# {report.benchmark}: LLM-as-judge accuracy (%)",
        "",
        f"Answer model `{report.answer_model}`, judge `{report.judge_model}`, prompt `{report.prompt_variant}`; "
        "mean ± standard deviation over judge runs.",
        "",
    ]
    if report.command:
        lines += ["Command:", "", f"    {report.command}", ""]
    if report.benchmark == "locomo":
        cats = [CATEGORY_NAMES[c] for c in SCORED_CATEGORIES]
        lines += [
            "| Variant | " + " | ".join(cats) + " | Overall | F1 | Context tokens |",
            "|---|" + "---:|" * (len(cats) + 3),
        ]
        for row in report.rows:
            cells = [row.by_category[c].cell() for c in cats]
            lines.append(
                f"| {row.variant} | "
                + " | ".join(cells)
                + f" | {row.overall.cell()} | {_fmt(row.f1, 2)} | {_fmt(row.context_tokens, 0)} |"
            )
    else:
        lines += ["| Variant | LoCoMo | LoCoMo-Plus | Gap | Context tokens |", "|---|---:|---:|---:|---:|"]
        for row in report.rows:
            loc = report.locomo_overall
            gap = None if loc is None or row.overall.n == 0 else loc - row.overall.mean
            lines.append(
                f"| {row.variant} | {_fmt(loc, 2)} | {row.overall.cell()} | {_fmt(gap, 2)} | "
                f"{_fmt(row.context_tokens, 0)} |"
            )
        if report.locomo_overall is None:
            lines += ["", "No LoCoMo report in the same --out folder: run `tmem eval locomo` there for the gap."]
    full = next((r for r in report.rows if r.variant == "full"), None)
    others = [r for r in report.rows if r.variant != "full"]
    if full is not None and others:
        lines += ["", "## Variants (Table 4 / Figure 4 style)", "", "| Variant | Overall | Δ |", "|---|---:|---:|"]
        for row in [full, *others]:
            delta = row.overall.mean - full.overall.mean
            lines.append(f"| {row.variant} | {row.overall.cell()} | {_fmt(delta, 2) if row is not full else '–'} |")
    return "\n".join(lines) + "\n"


def write_report(folder: Path, report: BaseModel, markdown: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "report.json").write_text(report.model_dump_json(indent=2) + "\n", encoding="utf-8")
    (folder / "report.md").write_text(markdown, encoding="utf-8")
