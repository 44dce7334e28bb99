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
import tempfile
import time
from pathlib import Path

from tmem import Memory, Settings
from tmem.embed import make_embedder
from tmem.eval.baselines import SpaceBaselines
from tmem.eval.harness import MemoEmbedder
from tmem.eval.locomo_data import load_questions
from tmem.eval.plus_data import load_probes, stitch
from tmem.eval.retrieval_only import Query, _gold, budget_cells, locomo_queries, plus_queries
from tmem.index.space import cached_vectorizer
from tmem.ingest import read_file
from tmem.ingest.types import SpaceInput
from tmem.retrieve.config import RetrievalConfig
from tmem.retrieve.layout import ContextLayout
from tmem.scope import Scope
from tmem.store import open_store

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
BUDGETS = (500, 1000, 2000, 4000)
SYSTEMS = ("tmem", "bm25", "dense", "hybrid")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--conversations", type=int, default=3)
    parser.add_argument("--out", type=Path)
    parser.add_argument(
        "--variants",
        action="store_true",
        help="also the recipe's context with its RRF constant at 60 and/or without the lexical floor (500/1000 tokens)",
    )
    args = parser.parse_args()
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
    t0 = time.perf_counter()
    conv_of = {s.name: s.conversation for s in stitched}  # a stitched space -> its LoCoMo conversation
    by_space: dict[str, list[Query]] = {}
    for q in queries:
        by_space.setdefault(q.space, []).append(q)
    for space, group in by_space.items():
        assert mem.staleness(space).stale_turns > 0 and mem.staleness(space).built is False
        embedder.prime([q.text for q in group])
        baselines = SpaceBaselines(store, Scope.local(space), cached_vectorizer(store, Scope.local(space), embedder))
        known = {t.id for t in baselines.turns}
        for q in group:
            gold, _, any_hit = _gold(q, known)
            if not gold:
                continue
            for label, (cfg, layout) in variants.items():
                cells = budget_cells(
                    mem.retriever, baselines, q, gold, BUDGETS[:2], cfg, any_hit=any_hit, layout=layout
                )
                for cell in cells:
                    got = cell.systems["tmem"]
                    value = got.coverage if q.benchmark == "locomo" and got.coverage is not None else float(got.hit)
                    sums.setdefault((q.benchmark, cell.budget, label), []).append(value)
            for cell in budget_cells(mem.retriever, baselines, q, gold, BUDGETS, config, any_hit=any_hit):
                for name in SYSTEMS:
                    got = cell.systems[name]
                    value = got.coverage if q.benchmark == "locomo" and got.coverage is not None else float(got.hit)
                    sums.setdefault((q.benchmark, cell.budget, name), []).append(value)
                    sums.setdefault((q.benchmark, cell.budget, f"{name}@{conv_of.get(space, space)}"), []).append(value)
    elapsed = time.perf_counter() - t0
    lines = [
        "# A space never built: its context against flat retrieval over the same turns",
        "",
        f"Command: `python bench/unbuilt_vs_flat.py --conversations {args.conversations}"
        + (" --variants`" if args.variants else "`"),
        "",
        f"Machine: {platform.platform()}, Python {platform.python_version()}, {os.cpu_count()} CPUs (shared); "
        f"embedder {embedder.model_id}; tokens counted by cl100k for every system; conversations {', '.join(names)} "
        f"imported and never built (LoCoMo-Plus probes stitched into them); {elapsed:.0f} s.",
        "",
    ]
    for bench, metric in (("locomo", "LoCoMo evidence coverage %"), ("locomo-plus", "LoCoMo-Plus cue hit %")):
        n = len(sums.get((bench, BUDGETS[0], "tmem"), []))
        lines += [f"| {metric} ({n} queries) | " + " | ".join(str(b) for b in BUDGETS) + " |",
                  "|---|" + "---:|" * len(BUDGETS)]  # fmt: skip
        for name in SYSTEMS:
            label = "tmem (`Memory.context`, never built)" if name == "tmem" else f"flat {name} over turns"
            cells = [100 * statistics.fmean(sums[(bench, b, name)]) if n else float("nan") for b in BUDGETS]
            lines.append(f"| {label} | " + " | ".join(f"{c:.1f}" for c in cells) + " |")
        lines.append("")
        rival = "hybrid" if bench == "locomo" else "dense"
        lines += [f"| {metric}, per conversation: tmem / flat {rival} | " + " | ".join(str(b) for b in BUDGETS) + " |",
                  "|---|" + "---:|" * len(BUDGETS)]  # fmt: skip
        for conv in names:
            if (bench, BUDGETS[0], f"tmem@{conv}") not in sums:
                continue
            cells = [
                "{:.1f} / {:.1f}".format(
                    *(100 * statistics.fmean(sums[(bench, b, f"{x}@{conv}")]) for x in ("tmem", rival))
                )
                for b in BUDGETS
            ]
            n_conv = len(sums[(bench, BUDGETS[0], f"tmem@{conv}")])
            lines.append(f"| {conv} ({n_conv}) | " + " | ".join(cells) + " |")
        lines.append("")
        if variants:
            lines += [f"| {metric}, variants of the recipe | {BUDGETS[0]} | {BUDGETS[1]} |", "|---|---:|---:|"]
            for label in variants:
                cells = [100 * statistics.fmean(sums[(bench, b, label)]) for b in BUDGETS[:2]]
                lines.append(f"| {label} | " + " | ".join(f"{c:.1f}" for c in cells) + " |")
            lines.append("")
    text = "\n".join(lines)
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    print(text)
    mem.close()


if __name__ == "__main__":
    main()
