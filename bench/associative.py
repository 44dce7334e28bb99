"""Associative recall on the shipped LLM-built memories: where each miss comes from, how well each trigger family
ranks the cue, and the choice of the associative recipe with one memory left out in turn.

Three reports (docs/results/associative.md):

1. **Attribution.** For every cue that flat dense over raw turns puts inside its context at a budget and tmem's
   context does not, with the previous recipe (v0.2) and the current one: every unit of the context's priority order
   that holds a cue turn (its kind, routes and ranks, its place in the order) and why it was not packed: no route
   reached the cue (``not reached``), its units came after the last unit that fitted (``ranked below the cut``), one
   came before it and did not fit (``did not fit``), or a scene holding the cue entered as an excerpt without it
   (``excerpt without the cue``).
2. **Trigger ranks per family.** For each cue, the rank of the best host holding a cue turn among the hosts of
   each family's views (Entity and Bridge: items; Scene and Horizon: scenes), beside dense similarity over raw turns,
   scenes and items; memories built with the v0.1 prompts beside those built with today's.
3. **Leave one memory out.** Every combination of the recipe's choices (the routes that order an anchorless query,
   the context's RRF k0, scene excerpts with or without neighbours, scene titles) is scored on three memories and the
   best is applied to the fourth: the held-out memory's figures are what the recipe would give a memory it was not
   chosen on. Objective on the training memories: the sum over memories and budgets (500, 1000) of tmem's cue hit
   minus flat dense's, a shortfall counted four times; LoCoMo coverage at 500 tokens must stay >= flat hybrid + 10.

Searches depend only on the excerpt choice (scenes are kept deeper when they enter as one turn), so each probe is
searched twice per budget and every other choice is a packing of the same result. Sizes are counted by the
tokenizer of ``Settings.tokenizer`` (default cl100k), flat baselines included. Run (from the repository root):

    python bench/associative.py --out docs/results/associative.md
"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tmem.answer.budget import (
    Context,
    _item_units,
    _scene_units,
    _turn_units,
    _Unit,
    pack_context,
    route_filter,
    unit_order,
)
from tmem.embed import make_embedder
from tmem.eval.baselines import SpaceBaselines
from tmem.eval.harness import MemoEmbedder
from tmem.index.backend import view_part
from tmem.index.space import cached_vectorizer
from tmem.models import TriggerFamily
from tmem.retrieve.cascade import Retriever
from tmem.retrieve.config import ASSOCIATIVE_ROUTES, RetrievalConfig
from tmem.retrieve.layout import ContextLayout
from tmem.retrieve.recipe import Asked, context_depth
from tmem.retrieve.types import SearchResult
from tmem.scope import Scope
from tmem.settings import Settings
from tmem.store import open_store, sqlite_url
from tmem.util.tokens import TokenCounter, token_counter

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "llm-built"
BUDGETS = (500, 1000)
PROMPTS = {"d26-plus": "v0.1", "d30-plus": "v0.1", "d41-plus": "today", "d42-plus": "today"}
ROUTE_SETS: dict[str, frozenset[str] | None] = {
    "all routes (no anchor rule)": None,
    "turn.dense": frozenset({"turn.dense"}),
    "dense + Scene/Horizon/Bridge": ASSOCIATIVE_ROUTES - {"scene.dense"},
    "dense + Scene/Horizon/Bridge + scene.dense": ASSOCIATIVE_ROUTES,
    "+ item.dense": ASSOCIATIVE_ROUTES | {"item.dense"},
}
PREVIOUS = {"routes": "all routes (no anchor rule)", "k0": 1, "neighbours": True, "titles": True}
CURRENT = {"routes": "dense + Scene/Horizon/Bridge + scene.dense", "k0": 3, "neighbours": False, "titles": False}


@dataclass
class Probe:
    space: str
    key: str
    kind: str
    query: str
    gold: set[str]
    results: dict[tuple[bool, int], SearchResult] = field(default_factory=dict)  # (neighbours, budget)
    flat: dict[tuple[str, int], set[str]] = field(default_factory=dict)  # (baseline, budget) -> turn ids
    dense_rank: int = 0
    family_ranks: dict[str, int | None] = field(default_factory=dict)


def _score(probe: Probe, ids: set[str]) -> float:
    inside = len(probe.gold & ids)
    return float(inside > 0) if probe.kind == "cue" else inside / len(probe.gold)


def _recipe(choice: dict[str, Any]) -> ContextLayout:
    """The associative layout with the choice's anchorless routes (none: no anchor rule, every route counts)."""
    routes = ROUTE_SETS[choice["routes"]]
    return ContextLayout.of_recipe("associative").replace(
        lexical_floor=None if routes is None else 0.25, anchorless_routes=routes or frozenset()
    )


def _pack(probe: Probe, budget: int, choice: dict[str, Any], counter: TokenCounter) -> Context:
    result = probe.results[(choice["neighbours"], budget)]
    return pack_context(
        result,
        budget,
        include_persona=False,
        k0=choice["k0"],
        counts=route_filter(result, _recipe(choice)),
        counter=counter,
        neighbours=choice["neighbours"],
        titles=choice["titles"],
    )


def collect(data: Path, work: Path) -> list[Probe]:
    queries = json.loads((data / "queries.json").read_text(encoding="utf-8"))
    settings = Settings()
    memo = MemoEmbedder(make_embedder(settings))
    counter = token_counter(settings.tokenizer)
    probes: list[Probe] = []
    for space, rows in queries.items():
        folder = work / space
        folder.mkdir(parents=True, exist_ok=True)
        if not (folder / "tmem.db").exists():
            shutil.copy(data / f"{space}.db", folder / "tmem.db")
        store = open_store(sqlite_url(folder / "tmem.db"))
        try:
            memo.prime([r["query"] for r in rows])
            retriever = Retriever(store, memo)
            index = retriever.index(Scope.local(space))
            baselines = SpaceBaselines(
                store, Scope.local(space), cached_vectorizer(store, Scope.local(space), memo), counter
            )
            for row in rows:
                p = Probe(space, row["key"], row["kind"], row["query"], set(row["gold_turn_ids"]))
                for neighbours, budget in itertools.product((True, False), BUDGETS):
                    layout = ContextLayout(lexical_floor=0.25, excerpt_neighbours=neighbours)
                    request = Asked(RetrievalConfig.preset("associative"), layout, context_depth(budget))
                    p.results[(neighbours, budget)] = retriever.search(Scope.local(space), p.query, request)
                flat = baselines.packed_many(p.query, p.key, list(BUDGETS))
                for budget in BUDGETS:
                    for name in ("dense", "hybrid"):
                        p.flat[(name, budget)] = set(flat[budget][name].turn_ids)
                dense = baselines.rankings(p.query)["dense"]
                p.dense_rank = min(dense.index(g) + 1 for g in p.gold if g in dense)
                if p.kind == "cue":
                    p.family_ranks = _family_ranks(retriever, index, p)
                probes.append(p)
        finally:
            store.close()
    return probes


def _family_ranks(retriever: Retriever, index: Any, p: Probe) -> dict[str, int | None]:
    qvec = retriever.embed_query(p.query)
    cue_scenes = {s.id for s in index.scenes if p.gold & set(s.turn_ids)}
    cue_items = {i.id for i in index.items if p.gold & set(i.turn_ids)}
    out: dict[str, int | None] = {}
    for fam in TriggerFamily:
        hosts = index.vectors.top_hosts([view_part(fam.value)], qvec, 100_000)
        want = cue_items if fam in (TriggerFamily.ENTITY, TriggerFamily.BRIDGE) else cue_scenes
        out[fam.value] = next((n for n, h in enumerate(hosts, 1) if h.host in want), None)
    for part, want in (("scene", cue_scenes), ("item", cue_items)):
        ranked = [h.id for h in index.vectors.top_k(part, qvec, 100_000, None)]
        out[f"{part}.dense"] = next((n for n, h in enumerate(ranked, 1) if h in want), None)
    out["turn.dense"] = p.dense_rank
    return out


# ------------------------------------------------------------------------------------------------ 1. attribution


def _why(probe: Probe, budget: int, choice: dict[str, Any], ctx: Context) -> tuple[str, str]:
    result = probe.results[(choice["neighbours"], budget)]
    units: list[_Unit] = [
        *_item_units(result.items),
        *_turn_units(result.turns, {}),
        *_scene_units(result, choice["neighbours"]),
    ]
    order = unit_order(units, choice["k0"], route_filter(result, _recipe(choice)))
    packed = {h.id for h in ctx.hits}
    last = max((n for n, u in enumerate(order) if u.id in packed), default=-1)
    holders = []
    reason = "not reached"
    for n, u in enumerate(order):
        whole = set(u.scene.turn_ids) if u.kind == "scene" and u.scene is not None else set()
        has = probe.gold & (set(u.fact_turns) | {t.id for t in u.turns})
        if not has and not probe.gold & whole:
            continue
        ranks = ", ".join(f"{r.name}#{r.rank}" for r in u.routes)
        holders.append(f"{u.kind} at {n + 1} ({ranks})")
        if reason != "not reached":
            continue
        if not has:
            reason = "excerpt without the cue"
        elif n < last:
            reason = "did not fit"
        else:
            reason = "ranked below the cut"
    anchor = f"anchor {result.lexical_anchor:.2f}" if result.lexical_anchor is not None else "no anchor"
    anchor += " (anchorless)" if ctx.anchorless else ""
    return reason, f"{anchor}; {len(order)} units, last packed at {last + 1}; " + ("; ".join(holders[:4]) or "-")


def attribution(probes: Sequence[Probe], choice: dict[str, Any], counter: TokenCounter) -> list[str]:
    lines = [
        "| memory | cue | budget | flat dense rank | why | the units that hold the cue |",
        "|---|---|---:|---:|---|---|",
    ]
    tally: dict[str, int] = {}
    for p in probes:
        if p.kind != "cue":
            continue
        for budget in BUDGETS:
            ctx = _pack(p, budget, choice, counter)
            if not p.gold & p.flat[("dense", budget)] or p.gold & set(ctx.turn_ids):
                continue
            reason, detail = _why(p, budget, choice, ctx)
            tally[reason] = tally.get(reason, 0) + 1
            lines.append(f"| {p.space} | {p.key} | {budget} | {p.dense_rank} | {reason} | {detail} |")
    summary = ", ".join(f"{k}: {v}" for k, v in sorted(tally.items())) or "none"
    return [f"Misses: {summary}.", "", *lines, ""]


# ------------------------------------------------------------------------------------------------ 2. family ranks


def family_ranks(probes: Sequence[Probe]) -> list[str]:
    names = [f.value for f in TriggerFamily] + ["turn.dense", "scene.dense", "item.dense"]
    lines = [
        "Rank of the best host holding a cue turn (median; cues at rank 1 / within 3 / within 10, of 15):",
        "",
        "| memory | prompts | " + " | ".join(names) + " |",
        "|---|---|" + "---|" * len(names),
    ]
    for space in dict.fromkeys(p.space for p in probes):
        cues = [p for p in probes if p.space == space and p.kind == "cue"]
        cells = []
        for name in names:
            ranks = [r for p in cues if (r := p.family_ranks.get(name)) is not None]
            med = statistics.median(ranks) if ranks else float("nan")
            cells.append(
                f"{med:g} ({sum(r == 1 for r in ranks)} / {sum(r <= 3 for r in ranks)} / {sum(r <= 10 for r in ranks)})"
            )
        lines.append(f"| {space} | {PROMPTS.get(space, '?')} | " + " | ".join(cells) + " |")
    return [*lines, ""]


# ------------------------------------------------------------------------------------------------ 3. leave one out


def table(probes: Sequence[Probe], choice: dict[str, Any], counter: TokenCounter) -> dict[str, dict[str, float]]:
    """Per memory: tmem / flat dense / flat hybrid share per (kind, budget), e.g. ``out[space]["cue|500|tmem"]``."""
    sums: dict[str, dict[str, list[float]]] = {}
    for p in probes:
        cell = sums.setdefault(p.space, {})
        for budget in BUDGETS:
            ctx = _pack(p, budget, choice, counter)
            for system, ids in (
                ("tmem", set(ctx.turn_ids)),
                ("dense", p.flat[("dense", budget)]),
                ("hybrid", p.flat[("hybrid", budget)]),
            ):
                cell.setdefault(f"{p.kind}|{budget}|{system}", []).append(_score(p, ids))
    return {s: {k: 100 * sum(v) / len(v) for k, v in c.items()} for s, c in sums.items()}


def objective(scores: dict[str, dict[str, float]], train: Sequence[str]) -> float:
    value = 0.0
    for space in train:
        for budget in BUDGETS:
            gap = scores[space][f"cue|{budget}|tmem"] - scores[space][f"cue|{budget}|dense"]
            value += gap + 3 * min(gap, 0.0)
    loc = statistics.mean(scores[s]["locomo|500|tmem"] for s in train)
    hybrid = statistics.mean(scores[s]["locomo|500|hybrid"] for s in train)
    return value if loc >= hybrid + 10 else float("-inf")


def _label(choice: dict[str, Any]) -> str:
    return (
        f"{choice['routes']}; k0 {choice['k0']}; {'excerpt with neighbours' if choice['neighbours'] else 'matched turn'}"
        f"; {'titles' if choice['titles'] else 'session dates'}"
    )


def leave_one_out(probes: Sequence[Probe], counter: TokenCounter) -> list[str]:
    grid = [
        {"routes": r, "k0": k0, "neighbours": nb, "titles": ti}
        for r, k0, nb, ti in itertools.product(ROUTE_SETS, (1, 3), (True, False), (True, False))
    ]
    scored = [(c, table(probes, c, counter)) for c in grid]
    spaces = list(dict.fromkeys(p.space for p in probes))
    lines = [
        f"{len(grid)} recipes. Held-out memory: the recipe chosen on the other three, and its figures on the held-out "
        "one (tmem / flat dense; LoCoMo: tmem / flat hybrid).",
        "",
        "| held out | recipe chosen on the other three | cue 500 | cue 1000 | LoCoMo 500 |",
        "|---|---|---:|---:|---:|",
    ]
    for held in spaces:
        train = [s for s in spaces if s != held]
        choice, scores = max(scored, key=lambda cs: objective(cs[1], train))
        s = scores[held]
        lines.append(
            f"| {held} | {_label(choice)} | {s['cue|500|tmem']:.1f} / {s['cue|500|dense']:.1f} | "
            f"{s['cue|1000|tmem']:.1f} / {s['cue|1000|dense']:.1f} | "
            f"{s['locomo|500|tmem']:.1f} / {s['locomo|500|hybrid']:.1f} |"
        )
    lines += ["", "The ten best recipes on all four memories (cue hit per memory at 500 / 1000):", ""]
    lines += ["| recipe | objective | " + " | ".join(spaces) + " |", "|---|---:|" + "---|" * len(spaces)]
    for choice, scores in sorted(scored, key=lambda cs: -objective(cs[1], spaces))[:10]:
        cells = [f"{scores[s]['cue|500|tmem']:.1f} / {scores[s]['cue|1000|tmem']:.1f}" for s in spaces]
        lines.append(f"| {_label(choice)} | {objective(scores, spaces):.1f} | " + " | ".join(cells) + " |")
    return [*lines, ""]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DATA, help="The llm-built folder (its .db files are copied).")
    ap.add_argument("--work", type=Path, default=Path("/tmp/tmem-associative"), help="Scratch folder for the copies.")
    ap.add_argument("--out", type=Path, default=None, help="Also write the report here (markdown).")
    args = ap.parse_args(argv)
    started = time.perf_counter()
    counter = token_counter(Settings().tokenizer)
    probes = collect(args.data, args.work)
    parts = [
        f"Tokens counted by the {counter.name} tokenizer; budgets {', '.join(map(str, BUDGETS))}.",
        "",
        "## 1. Why flat dense reached a cue that tmem's context did not",
        "",
        f"### Previous recipe ({_label(PREVIOUS)})",
        "",
        *attribution(probes, PREVIOUS, counter),
        f"### Current recipe ({_label(CURRENT)})",
        "",
        *attribution(probes, CURRENT, counter),
        "## 2. Trigger ranks per family",
        "",
        *family_ranks(probes),
        "## 3. The recipe chosen with one memory left out",
        "",
        *leave_one_out(probes, counter),
    ]
    text = "\n".join(parts)
    command = "python bench/associative.py " + " ".join(sys.argv[1:] if argv is None else argv)
    print(text)
    print(f"{time.perf_counter() - started:.1f} s")
    if args.out is not None:
        args.out.write_text(f"Command: `{command}`\n\n{text}\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
