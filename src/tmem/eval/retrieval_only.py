"""Retrieval-only evaluation (no LLM at query time): evidence coverage on LoCoMo, cue hit on LoCoMo-Plus.

For every question and every variant, tmem's context (scenes + items, persona excluded: it is off budget) is
compared with the flat turn baselines and the query-agnostic scene control packed to the same number of tokens
(:mod:`tmem.eval.baselines`), every size counted by one tokenizer (``Settings.tokenizer``, stated in each record and
report). A gold turn counts as inside tmem's context when its raw text is in a returned scene or
it is a source turn of a returned item (``SearchResult.turn_ids``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tqdm import tqdm

from tmem.answer.budget import Context, Searcher, recall
from tmem.answer.context import assemble_context
from tmem.errors import ConfigError
from tmem.eval.baselines import SpaceBaselines
from tmem.eval.harness import MemoEmbedder, Variant
from tmem.eval.locomo_data import EvidenceIssue, LocomoQuestion, normalise_evidence
from tmem.eval.plus_data import StitchedProbe
from tmem.eval.position import context_position
from tmem.eval.records import BudgetCell, CoverageRecord, ResultsFile, SystemCoverage, retrieved_refs
from tmem.index.space import cached_vectorizer
from tmem.retrieve.cascade import Retriever
from tmem.retrieve.config import RetrievalConfig
from tmem.retrieve.layout import ContextLayout
from tmem.retrieve.routes import RouteName
from tmem.retrieve.types import Route
from tmem.scope import Scope
from tmem.store.base import Store
from tmem.util.tokens import TokenCounter, default_counter


@dataclass(frozen=True)
class Query:
    """One retrieval-only question, benchmark-neutral."""

    key: str
    space: str
    benchmark: str
    text: str
    gold_raw: list[str] | None  # LoCoMo evidence ids; None for LoCoMo-Plus (cue ids below)
    cue_turn_ids: list[str]
    category: int | None
    relation: str | None = None


def locomo_queries(questions: Sequence[LocomoQuestion]) -> list[Query]:
    return [Query(q.key, q.space, "locomo", q.question, list(q.evidence_raw), [], q.category) for q in questions]


def plus_queries(probes: Sequence[StitchedProbe]) -> list[Query]:
    return [
        Query(p.key, p.space, "locomo-plus", p.query, None, list(p.cue_turn_ids), None, p.probe.relation_type)
        for p in probes
    ]


def system_coverage(ids: set[str], gold: list[str], tokens: int, *, any_hit: bool) -> SystemCoverage:
    """What a context (its turn ids) holds of ``gold``: LoCoMo coverage and all-evidence hit, or LoCoMo-Plus cue hit
    (``any_hit``: any cue turn inside). No gold: no coverage and no hit."""
    if not gold:
        return SystemCoverage(tokens=tokens, coverage=None, hit=False)
    inside = sum(1 for g in gold if g in ids)
    return SystemCoverage(
        tokens=tokens,
        coverage=None if any_hit else inside / len(gold),
        hit=inside > 0 if any_hit else inside == len(gold),
    )


BUDGETS_VARIANT = "budgets"


def route_label(route: Route) -> str:
    """A route's name for attribution: the item-trigger union is split by the family whose view won."""
    if route.name == RouteName.ITEM_TRIGGER and route.view:
        return f"{RouteName.ITEM_TRIGGER.value}.{route.view.split(':', 1)[0]}"  # item.trigger.entity / .bridge
    return route.name


def route_attribution(ctx: Context, gold: Sequence[str]) -> list[str]:
    """The routes of every context hit that put a gold turn (raw or as a fact's source) inside the context."""
    wanted = set(gold)
    names = {route_label(r) for hit in ctx.hits if wanted.intersection(hit.turn_ids) for r in hit.routes}
    return sorted(names)


def budget_cells(
    searcher: Searcher,
    baselines: SpaceBaselines,
    query: Query,
    gold: list[str],
    budgets: Sequence[int],
    config: RetrievalConfig | None,
    *,
    any_hit: bool,
    layout: ContextLayout | None = None,
) -> list[BudgetCell]:
    """tmem's budgeted context (Memory.context, laid out as ``layout`` says) beside the flat baselines and the control
    walked to each budget, all counted by the baselines' tokenizer, with where the evidence first appears in each
    (:mod:`tmem.eval.position`)."""
    cells = []
    flat = baselines.packed_many(query.text, query.key, budgets)
    for budget in budgets:
        result, ctx = recall(
            searcher,
            Scope.local(query.space),
            query.text,
            budget,
            config,
            layout=layout,
            include_persona=False,
            counter=baselines.counter,
        )
        tmem = system_coverage(set(ctx.turn_ids), gold, ctx.tokens, any_hit=any_hit)
        position = context_position(ctx, result, gold, baselines.counter)
        systems = {"tmem": tmem.model_copy(update={"position": position})}
        for name, packed in flat[budget].items():
            by_rank, by_time = baselines.positions(packed, gold)
            systems[name] = system_coverage(set(packed.turn_ids), gold, packed.tokens, any_hit=any_hit).model_copy(
                update={"position": by_rank, "position_by_time": by_time}
            )
        cells.append(BudgetCell(budget=budget, systems=systems, routes=route_attribution(ctx, gold)))
    return cells


def run_retrieval_only(
    store: Store,
    retriever: Retriever,
    embedder: MemoEmbedder,
    queries: Sequence[Query],
    variants: Sequence[Variant],
    results: ResultsFile[CoverageRecord],
    *,
    budgets: Sequence[int] = (),
    progress: bool = False,
    counter: TokenCounter | None = None,
) -> int:
    """Evaluate every (variant, query) not in ``results`` yet; returns how many records were added. With ``budgets``,
    one more record per query (variant :data:`BUDGETS_VARIANT`) holds the first variant's budgeted context beside
    the baselines walked to each budget (:func:`budget_cells`). Every size is counted by ``counter`` (default
    cl100k); records counted by another tokenizer are refused."""
    counter = counter or default_counter()
    counted = {rec.counter for rec in results}
    if counted - {counter.name}:
        raise ConfigError(
            f"The results in this --out were counted with the {', '.join(sorted(counted))} tokenizer, not "
            f"{counter.name}: rerun with TMEM_TOKENIZER={min(counted)}, or use a new --out (the memories can be reused "
            "with --dir)."
        )
    if budgets:
        for rec in results:
            if rec.variant == BUDGETS_VARIANT and [c.budget for c in rec.budgets] != list(budgets):
                raise ConfigError(
                    f"The results in this --out were walked to budgets {[c.budget for c in rec.budgets]}, not "
                    f"{list(budgets)}: rerun with those budgets, or use a new --out (the memories can be reused with "
                    "--dir)."
                )
    added = 0
    by_space: dict[str, list[Query]] = {}
    for q in queries:
        by_space.setdefault(q.space, []).append(q)
    bar = tqdm(total=len(queries) * len(variants), desc="retrieval", unit="q", disable=not progress)
    for space, group in by_space.items():
        todo = [(v, q) for q in group for v in variants if f"{v.name}|{q.key}" not in results]
        todo_budgets = [q for q in group if budgets and f"{BUDGETS_VARIANT}|{q.key}" not in results]
        bar.update(len(group) * len(variants) - len(todo))
        if not todo and not todo_budgets:
            continue
        embedder.prime([q.text for q in group])
        scope = Scope.local(space)
        baselines = SpaceBaselines(store, scope, cached_vectorizer(store, scope, embedder), counter)
        known = {t.id for t in baselines.turns}
        for variant, q in todo:
            gold, issues, any_hit = _gold(q, known)
            result = retriever.search(scope, q.text, variant.config)
            context = assemble_context(result, include_persona=False)
            size = counter.count(context.evidence)
            systems = {"tmem": system_coverage(set(result.turn_ids()), gold, size, any_hit=any_hit)}
            for name, packed in baselines.packed(q.text, q.key, size).items():
                systems[name] = system_coverage(set(packed.turn_ids), gold, packed.tokens, any_hit=any_hit)
            results.add(
                CoverageRecord(
                    key=q.key,
                    variant=variant.name,
                    space=space,
                    benchmark=q.benchmark,
                    category=q.category,
                    relation=q.relation,
                    question=q.text,
                    gold_turn_ids=gold,
                    evidence_issues=issues,
                    systems=systems,
                    retrieved=retrieved_refs(result),
                    counter=counter.name,
                )
            )
            added += 1
            bar.update(1)
        for q in todo_budgets:
            gold, issues, any_hit = _gold(q, known)
            cells = budget_cells(retriever, baselines, q, gold, budgets, variants[0].config, any_hit=any_hit)
            results.add(
                CoverageRecord(
                    key=q.key,
                    variant=BUDGETS_VARIANT,
                    space=space,
                    benchmark=q.benchmark,
                    category=q.category,
                    relation=q.relation,
                    question=q.text,
                    gold_turn_ids=gold,
                    evidence_issues=issues,
                    systems={},
                    retrieved=[],
                    budgets=cells,
                    counter=counter.name,
                )
            )
            added += 1
    bar.close()
    return added


def _gold(q: Query, known: set[str]) -> tuple[list[str], list[EvidenceIssue], bool]:
    """The gold turns of a query, the evidence issues met normalising them, and whether any hit counts (cues)."""
    if q.gold_raw is not None:
        evidence = normalise_evidence(q.gold_raw, known)
        return evidence.turn_ids, list(evidence.issues), False
    return list(q.cue_turn_ids), [], True
