"""A space never built answers from its raw turns: its budgeted context against flat retrieval over the same turns.

Dev LoCoMo conversations are imported and never built; LoCoMo-Plus probes are stitched into them the same way (one
space per conversation holding its probes' cue sessions). For every scored LoCoMo question (evidence coverage: share
of its evidence turns in the context) and every LoCoMo-Plus probe (cue hit: a cue turn in the context),
``Memory.context``'s recall (the default preset, `auto`) is compared with flat BM25, dense and hybrid (RRF) over the
turns packed to the same budget (tmem.eval.baselines), all counted by one tokenizer (cl100k). The embedder is the
shipped MiniLM (every turn embedded once into the store's cache).

Run (from the repository root; bounded, low priority):
    nice python bench/unbuilt_vs_flat.py --conversations 3 --out bench/results/unbuilt_vs_flat.md
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from tmem import Memory, Settings
from tmem.embed import make_embedder
from tmem.eval.baselines import SpaceBaselines
from tmem.eval.harness import MemoEmbedder
from tmem.eval.locomo_data import load_questions
from tmem.eval.plus_data import load_probes, stitch
from tmem.eval.position import summary
from tmem.eval.retrieval_only import Query, _gold, budget_cells, locomo_queries, plus_queries
from tmem.index.space import cached_vectorizer
from tmem.ingest import read_file
from tmem.ingest.types import SpaceInput
from tmem.retrieve.config import RetrievalConfig
from tmem.retrieve.layout import ContextLayout, placement
from tmem.scope import Scope
from tmem.store import open_store

DATA = Path(os.environ.get("TMEM_DEV_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
BUDGETS = (500, 1000, 2000, 4000)
SYSTEMS = ("tmem", "bm25", "dense", "hybrid")
POSITIONED = ("tmem", "dense", "dense, time order", "hybrid", "hybrid, time order")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--conversations", type=int, default=3)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--budgets", default=",".join(map(str, BUDGETS)), help="Context budgets (cl100k tokens).")
    parser.add_argument(
        "--layout", default=None, help="tmem's context layout: date, rank or leadN (default: the recipe's own)."
    )
    parser.add_argument(
        "--build",
        action="store_true",
        help="build every space offline (extractive) first instead of leaving it unbuilt",
    )
    parser.add_argument(
        "--variants",
        action="store_true",
        help="also the recipe's context with its RRF constant at 60 and/or without the lexical floor (500/1000 tokens)",
    )
    args = parser.parse_args()
    budgets = tuple(int(b) for b in args.budgets.split(","))
    layout = ContextLayout(**placement(args.layout)) if args.layout else ContextLayout()
    convs = read_file(DATA / "locomo10.dev.json")[: args.conversations]
    names = [c.name for c in convs]
    questions = locomo_queries(load_questions(DATA / "locomo10.dev.json", conversations=names))
    all_convs = read_file(DATA / "locomo10.dev.json")
    stitched = [s for s in stitch(all_convs, load_probes(DATA / "locomo_plus.dev.json")) if s.conversation in names]
    folder = Path(tempfile.mkdtemp(prefix="tmem-unbuilt-"))
    store = open_store(f"sqlite:///{folder / 'tmem.db'}")
    settings = Settings(home=folder, llm="none")
    embedder = MemoEmbedder(make_embedder(settings))
    mem = Memory(store, settings, embedder=embedder)
    spaces: list[SpaceInput] = [
        *convs,
        *(SpaceInput(name=s.name, speakers=s.speakers, sessions=s.sessions) for s in stitched),
    ]
    for space in spaces:
        mem.add_sessions(space.name, space.sessions)
        if args.build:
            mem.build(space.name)
    queries: list[Query] = [*questions, *plus_queries([p for s in stitched for p in s.probes])]
    config = RetrievalConfig.preset("auto")
    assoc = RetrievalConfig.preset("associative")
    laid = ContextLayout.of_recipe("associative")  # a renamed recipe keeps the associative layout only when given it
    variants: dict[str, tuple[RetrievalConfig, ContextLayout | None]] = {
        "context_k0 = 60": (assoc.replace(name="k0-60"), laid.replace(context_k0=60)),
        "no lexical floor": (assoc.replace(name="no-floor"), laid.replace(lexical_floor=None)),
        "context_k0 = 60, no lexical floor": (
            assoc.replace(name="k0-60-no-floor"),
            laid.replace(context_k0=60, lexical_floor=None),
        ),
        "the extractive recipe": (RetrievalConfig.preset("extractive"), None),
    }
    if not args.variants:
        variants = {}
    sums: dict[tuple[str, int, str], list[float]] = {}
    where: dict[tuple[str, int, str], list[float | None]] = defaultdict(list)  # evidence positions
    t0 = time.perf_counter()
    conv_of = {s.name: s.conversation for s in stitched}  # a stitched space -> its LoCoMo conversation
    by_space: dict[str, list[Query]] = {}
    for q in queries:
        by_space.setdefault(q.space, []).append(q)
    for space, group in by_space.items():
        assert args.build or (mem.staleness(space).stale_turns > 0 and mem.staleness(space).built is False)
        embedder.prime([q.text for q in group])
        baselines = SpaceBaselines(store, Scope.local(space), cached_vectorizer(store, Scope.local(space), embedder))
        known = {t.id for t in baselines.turns}
        for q in group:
            gold, _, any_hit = _gold(q, known)
            if not gold:
                continue
            for label, (cfg, laid_out) in variants.items():
                cells = budget_cells(
                    mem.retriever, baselines, q, gold, budgets[:2], cfg, any_hit=any_hit, layout=laid_out
                )
                for cell in cells:
                    got = cell.systems["tmem"]
                    value = got.coverage if q.benchmark == "locomo" and got.coverage is not None else float(got.hit)
                    sums.setdefault((q.benchmark, cell.budget, label), []).append(value)
            for cell in budget_cells(
                mem.retriever, baselines, q, gold, budgets, config, any_hit=any_hit, layout=layout
            ):
                for name in SYSTEMS:
                    where[q.benchmark, cell.budget, name].append(cell.systems[name].position)
                    where[q.benchmark, cell.budget, f"{name}, time order"].append(cell.systems[name].position_by_time)
                    got = cell.systems[name]
                    value = got.coverage if q.benchmark == "locomo" and got.coverage is not None else float(got.hit)
                    sums.setdefault((q.benchmark, cell.budget, name), []).append(value)
                    sums.setdefault((q.benchmark, cell.budget, f"{name}@{conv_of.get(space, space)}"), []).append(value)
    elapsed = time.perf_counter() - t0
    lines = [
        "# A space never built: its context against flat retrieval over the same turns",
        "",
        f"Command: `python bench/unbuilt_vs_flat.py {' '.join(sys.argv[1:])}`",
        "",
        f"Machine: {platform.platform()}, Python {platform.python_version()}, {os.cpu_count()} CPUs (shared); "
        f"embedder {embedder.model_id}; tokens counted by cl100k for every system; conversations {', '.join(names)} "
        f"imported and {'built offline (extractive)' if args.build else 'never built'} (LoCoMo-Plus probes stitched into "
        f"them); tmem's layout `{args.layout or 'auto'}`; {elapsed:.0f} s.",
        "",
    ]
    for bench, metric in (("locomo", "LoCoMo evidence coverage %"), ("locomo-plus", "LoCoMo-Plus cue hit %")):
        n = len(sums.get((bench, budgets[0], "tmem"), []))
        lines += [f"| {metric} ({n} queries) | " + " | ".join(str(b) for b in budgets) + " |",
                  "|---|" + "---:|" * len(budgets)]  # fmt: skip
        for name in SYSTEMS:
            kind = "built offline" if args.build else "never built"
            label = f"tmem (`Memory.context`, {kind})" if name == "tmem" else f"flat {name} over turns"
            cells = [100 * statistics.fmean(sums[(bench, b, name)]) if n else float("nan") for b in budgets]
            lines.append(f"| {label} | " + " | ".join(f"{c:.1f}" for c in cells) + " |")
        lines.append("")
        rival = "hybrid" if bench == "locomo" else "dense"
        lines += [f"| {metric}, per conversation: tmem / flat {rival} | " + " | ".join(str(b) for b in budgets) + " |",
                  "|---|" + "---:|" * len(budgets)]  # fmt: skip
        for conv in names:
            if (bench, budgets[0], f"tmem@{conv}") not in sums:
                continue
            cells = [
                "{:.1f} / {:.1f}".format(
                    *(100 * statistics.fmean(sums[(bench, b, f"{x}@{conv}")]) for x in ("tmem", rival))
                )
                for b in budgets
            ]
            n_conv = len(sums[(bench, budgets[0], f"tmem@{conv}")])
            lines.append(f"| {conv} ({n_conv}) | " + " | ".join(cells) + " |")
        lines.append("")
        if variants:
            lines += [f"| {metric}, variants of the recipe | {budgets[0]} | {budgets[1]} |", "|---|---:|---:|"]
            for label in variants:
                cells = [100 * statistics.fmean(sums[(bench, b, label)]) for b in budgets[:2]]
                lines.append(f"| {label} | " + " | ".join(f"{c:.1f}" for c in cells) + " |")
            lines.append("")
    lines += [
        "Where the evidence first appears, over the queries whose context holds it (median relative position / % in "
        "the first third; flat baselines as packed, in rank order, and in time order):",
        "",
        "| benchmark | budget | " + " | ".join(POSITIONED) + " |",
        "|---|---:|" + "---:|" * len(POSITIONED),
    ]
    for bench in ("locomo", "locomo-plus"):
        for b in budgets:
            cells = []
            for name in POSITIONED:
                med, first, _ = summary(where[bench, b, name])
                cells.append("-" if med is None or first is None else f"{med:.2f} / {100 * first:.0f}")
            lines.append(f"| {bench} | {b} | " + " | ".join(cells) + " |")
    lines.append("")
    text = "\n".join(lines)
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    print(text)
    mem.close()


if __name__ == "__main__":
    main()
