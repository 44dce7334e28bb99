"""Retrieval at fixed context budgets on the shipped LLM-built memories (../shared/data/llm-built), both spaces pooled.

For every probe of queries.json (LoCoMo-Plus cues: hit when a cue turn is inside the context; LoCoMo questions:
share of gold evidence turns inside) tmem's budgeted context (``Memory.context``'s packing, ``recall_context``) is
set beside flat dense / BM25 / hybrid retrieval over raw turns and the memory's scenes in a query-agnostic order, each
walked to the same budget (:func:`tmem.eval.retrieval_only.budget_cells`, the code behind ``tmem eval --budgets``).
The per-route rows count how often a route reached a hit that put a gold turn or cue inside tmem's context.

Every size is counted by the tokenizer of ``Settings.tokenizer`` (TMEM_TOKENIZER, default cl100k), stated with
the tables. The .db files are copied into --work first (never opened in place). Run (from the repository root):

    python bench/llm_built.py --out bench/results/llm_built.md
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from tmem.embed import make_embedder
from tmem.eval.baselines import CONTROL, SpaceBaselines
from tmem.eval.harness import MemoEmbedder
from tmem.eval.records import BudgetCell
from tmem.eval.retrieval_only import Query, budget_cells
from tmem.index.space import cached_vectorizer
from tmem.retrieve.cascade import Retriever
from tmem.retrieve.config import RetrievalConfig
from tmem.retrieve.layout import LAYOUT_FIELDS, ContextLayout
from tmem.scope import Scope
from tmem.settings import Settings
from tmem.store import open_store, sqlite_url
from tmem.util.tokens import token_counter

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "llm-built"
SYSTEMS = ("tmem", "dense", "hybrid", "bm25", CONTROL)


def _parse_set(pairs: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        key, _, value = pair.partition("=")
        out[key] = None if value == "none" else json.loads(value) if value[:1] in "0123456789-[{tf" else value
    return out


Rows = dict[str, list[tuple[str, list[BudgetCell]]]]


def evaluate(
    data: Path, work: Path, budgets: list[int], config: RetrievalConfig, layout: ContextLayout | None = None
) -> tuple[Rows, float]:
    """Per kind ('cue', 'locomo'): (space, budget cells) per probe."""
    queries = json.loads((data / "queries.json").read_text(encoding="utf-8"))
    settings = Settings()
    memo = MemoEmbedder(make_embedder(settings))
    counter = token_counter(settings.tokenizer)
    out: Rows = {"cue": [], "locomo": []}
    started = time.perf_counter()
    for space, probes in queries.items():
        folder = work / space
        folder.mkdir(parents=True, exist_ok=True)
        if not (folder / "tmem.db").exists():
            shutil.copy(data / f"{space}.db", folder / "tmem.db")
        store = open_store(sqlite_url(folder / "tmem.db"))
        try:
            memo.prime([p["query"] for p in probes])
            retriever = Retriever(store, memo)
            baselines = SpaceBaselines(
                store, Scope.local(space), cached_vectorizer(store, Scope.local(space), memo), counter
            )
            for p in probes:
                q = Query(p["key"], space, p["kind"], p["query"], None, list(p["gold_turn_ids"]), None)
                gold, cue = list(p["gold_turn_ids"]), p["kind"] == "cue"
                cells = budget_cells(retriever, baselines, q, gold, budgets, config, any_hit=cue, layout=layout)
                out[p["kind"]].append((space, cells))
        finally:
            store.close()
    return out, time.perf_counter() - started


def _value(cell: BudgetCell, system: str, kind: str) -> float:
    s = cell.systems[system]
    return float(s.hit) if kind == "cue" else float(s.coverage or 0.0)


def _share(rows: list[list[BudgetCell]], n: int, system: str, kind: str) -> str:
    vals = [_value(r[n], system, kind) for r in rows]
    return f"{100 * sum(vals) / len(vals):.1f}"


def per_memory(results: Rows, budgets: list[int]) -> list[str]:
    """One row per memory and kind: tmem / flat dense / flat hybrid at each budget."""
    lines = [
        "Per memory (tmem / flat dense / flat hybrid):",
        "",
        "| memory | probes | n | " + " | ".join(str(b) for b in budgets) + " |",
        "|---|---|---:|" + "---:|" * len(budgets),
    ]
    for kind, title in (("cue", "cue hit"), ("locomo", "LoCoMo coverage")):
        for space in dict.fromkeys(s for s, _ in results[kind]):
            rows = [cells for s, cells in results[kind] if s == space]
            cells = [
                " / ".join(_share(rows, n, sys_, kind) for sys_ in ("tmem", "dense", "hybrid"))
                for n in range(len(budgets))
            ]
            lines.append(f"| {space} | {title} | {len(rows)} | " + " | ".join(cells) + " |")
    return [*lines, ""]


def render(results: Rows, budgets: list[int], config: RetrievalConfig) -> str:
    lines = [
        f"Preset `{config.name}`; n = {len(results['cue'])} cues, {len(results['locomo'])} LoCoMo questions; every "
        f"system's tokens counted by the {Settings().tokenizer} tokenizer.",
        "",
    ]
    for kind, title in (("cue", "cue hit %"), ("locomo", "LoCoMo evidence coverage %")):
        rows = [cells for _, cells in results[kind]]
        if not rows:
            continue
        lines += [f"| {title} | " + " | ".join(str(b) for b in budgets) + " |", "|---|" + "---:|" * len(budgets)]
        for system in SYSTEMS:
            cells = [_share(rows, n, system, kind) for n in range(len(budgets))]
            name = "tmem (Memory.context)" if system == "tmem" else f"flat {system} over turns"
            if system == CONTROL:
                name = "memory's scenes, query-agnostic order"
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        lines.append("")
        routes = sorted({r for row in rows for cell in row for r in cell.routes})
        lines += [
            f"Routes that put a gold turn inside tmem's context ({kind}, share of probes):",
            "",
            "| route | " + " | ".join(str(b) for b in budgets) + " |",
            "|---|" + "---:|" * len(budgets),
        ]
        for route in routes:
            counts = [Counter(r for row in rows for r in row[n].routes)[route] for n in range(len(budgets))]
            lines.append(f"| {route} | " + " | ".join(f"{100 * c / len(rows):.1f}" for c in counts) + " |")
        lines.append("")
    return "\n".join([*lines, *per_memory(results, budgets)])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=DATA, help="The llm-built folder (its .db files are copied).")
    ap.add_argument("--work", type=Path, default=Path("/tmp/tmem-llm-built"), help="Scratch folder for the copies.")
    ap.add_argument("--budgets", default="500,1000,2000,4000")
    ap.add_argument("--preset", default="auto")
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        help="Override a RetrievalConfig or ContextLayout field, e.g. gate=none or context_k0=1.",
    )
    ap.add_argument("--out", type=Path, default=None, help="Also write the tables here (markdown).")
    args = ap.parse_args(argv)
    budgets = [int(b) for b in args.budgets.split(",")]
    config = RetrievalConfig.preset(args.preset)
    fields = _parse_set(args.set)
    config = config.replace(**{k: v for k, v in fields.items() if k not in LAYOUT_FIELDS})
    layout = ContextLayout(**{k: v for k, v in fields.items() if k in LAYOUT_FIELDS})
    results, seconds = evaluate(args.data, args.work, budgets, config, layout)
    text = render(results, budgets, config)
    command = "python bench/llm_built.py " + " ".join(sys.argv[1:] if argv is None else argv)
    print(text)
    print(f"{seconds:.1f} s")
    if args.out is not None:
        args.out.write_text(f"Command: `{command}`\n\n{text}\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
