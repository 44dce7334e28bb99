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
from tmem.eval.position import summary
from tmem.eval.records import BudgetCell
from tmem.eval.retrieval_only import Query, budget_cells
from tmem.index.space import cached_vectorizer
from tmem.retrieve.cascade import Retriever
from tmem.retrieve.config import RetrievalConfig
from tmem.retrieve.layout import LAYOUT_FIELDS, ContextLayout, placement
from tmem.retrieve.recipe import Asked
from tmem.retrieve.types import SearchResult
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


PLACEMENT = ("order", "lead")


class MemoSearcher:
    """A retriever whose results are kept per (space, query, request but for where the parts land): layouts that
    differ only in ``order`` and ``lead`` pack one search (the result then carries the asked placement)."""

    def __init__(self, retriever: Retriever) -> None:
        self._retriever = retriever
        self._seen: dict[tuple[str, str, str], SearchResult] = {}

    def search(self, space: Scope, query: str, config: RetrievalConfig | Asked | None = None) -> SearchResult:
        if not isinstance(config, Asked):
            return self._retriever.search(space, query, config)
        base = config.layout.replace(order="date", lead=0)
        key = (space.key, query, f"{config.config.model_dump_json()}|{base.model_dump_json()}|{config.depth}")
        if key not in self._seen:
            self._seen[key] = self._retriever.search(space, query, Asked(config.config, base, config.depth))
        found = self._seen[key]
        asked = {f: getattr(config.layout, f) for f in PLACEMENT if f in config.layout.explicit}
        return found.model_copy(update={"layout": found.layout.replace(**asked)}) if asked else found


def layout_named(base: ContextLayout, name: str) -> ContextLayout:
    """``base`` with the placement ``name`` (date, rank, leadN); SystemExit naming the choices for another."""
    try:
        return base.replace(**placement(name))
    except ValueError as exc:
        raise SystemExit(str(exc)) from None


def evaluate(
    data: Path,
    work: Path,
    budgets: list[int],
    config: RetrievalConfig,
    layouts: list[str] | None = None,
    base: ContextLayout | None = None,
) -> tuple[dict[str, Rows], float]:
    """Per layout, per kind ('cue', 'locomo'): (space, budget cells) per probe."""
    names = layouts or ["date"]
    queries = json.loads((data / "queries.json").read_text(encoding="utf-8"))
    settings = Settings()
    memo = MemoEmbedder(make_embedder(settings))
    counter = token_counter(settings.tokenizer)
    out: dict[str, Rows] = {name: {"cue": [], "locomo": []} for name in names}
    started = time.perf_counter()
    for space, probes in queries.items():
        folder = work / space
        folder.mkdir(parents=True, exist_ok=True)
        if not (folder / "tmem.db").exists():
            shutil.copy(data / f"{space}.db", folder / "tmem.db")
        store = open_store(sqlite_url(folder / "tmem.db"))
        try:
            memo.prime([p["query"] for p in probes])
            retriever = MemoSearcher(Retriever(store, memo))
            baselines = SpaceBaselines(
                store, Scope.local(space), cached_vectorizer(store, Scope.local(space), memo), counter
            )
            for p in probes:
                q = Query(p["key"], space, p["kind"], p["query"], None, list(p["gold_turn_ids"]), None)
                for name in names:
                    cells = budget_cells(
                        retriever,
                        baselines,
                        q,
                        list(p["gold_turn_ids"]),
                        budgets,
                        config,
                        any_hit=p["kind"] == "cue",
                        layout=layout_named(base or ContextLayout(), name),
                    )
                    out[name][p["kind"]].append((space, cells))
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


def _pos(rows: list[list[BudgetCell]], n: int, system: str, attr: str = "position") -> str:
    med, first, _ = summary(getattr(r[n].systems[system], attr) for r in rows)
    if med is None or first is None:
        return "-"
    return f"{med:.2f} / {100 * first:.0f}"


def positions(results: dict[str, Rows], budgets: list[int]) -> list[str]:
    """Where the evidence first appears, per memory and kind: each layout's tmem context, then flat dense in rank
    order and in time order (median position / % of hits in the first third)."""
    names = list(results)
    lines = [
        "Where the evidence first appears, over the probes whose context holds it (median relative position / % in "
        "the first third):",
        "",
        "| memory | probes | budget | " + " | ".join(f"tmem {n}" for n in names) + " | flat dense, rank order | "
        "flat dense, time order |",
        "|---|---|---:|" + "---:|" * (len(names) + 2),
    ]
    first = results[names[0]]
    for kind, title in (("cue", "cue"), ("locomo", "LoCoMo")):
        spaces = [*dict.fromkeys(s for s, _ in first[kind]), "all"]
        for space in spaces:
            for n, budget in enumerate(budgets):
                cells = [_pos([c for s, c in results[name][kind] if space in (s, "all")], n, "tmem") for name in names]
                flat = [c for s, c in first[kind] if space in (s, "all")]
                cells += [_pos(flat, n, "dense"), _pos(flat, n, "dense", "position_by_time")]
                lines.append(f"| {space} | {title} | {budget} | " + " | ".join(cells) + " |")
    return [*lines, ""]


def _score(rows: Rows, spaces: set[str], budgets: list[int]) -> tuple[float, float, float]:
    """A layout's figures on ``spaces`` over the budgets up to 1000 tokens: share of cue hits in the first third,
    cue hit and LoCoMo coverage (means)."""
    ns = [n for n, b in enumerate(budgets) if b <= 1000] or [0]
    cue = [c for s, c in rows["cue"] if s in spaces]
    loc = [c for s, c in rows["locomo"] if s in spaces]
    thirds = [summary(r[n].systems["tmem"].position for r in cue)[1] or 0.0 for n in ns]
    hits = [sum(r[n].systems["tmem"].hit for r in cue) / max(len(cue), 1) for n in ns]
    cover = [sum(r[n].systems["tmem"].coverage or 0.0 for r in loc) / max(len(loc), 1) for n in ns]
    return sum(thirds) / len(ns), sum(hits) / len(ns), sum(cover) / len(ns)


def leave_one_out(results: dict[str, Rows], budgets: list[int]) -> list[str]:
    """For each memory left out: the layout that, on the other three, puts the most cue hits in the first third among
    those whose cue hit and LoCoMo coverage are at least the date layout's (the first layout named); then its figures
    on the memory left out."""
    names = list(results)
    spaces = list(dict.fromkeys(s for s, _ in results[names[0]]["cue"]))
    lines = [
        f"Chosen with one memory left out (among {', '.join(names)}; the baseline is `{names[0]}`): on the other "
        "memories, the most cue hits in the first third (mean over budgets <= 1000) with cue hit and LoCoMo coverage "
        "no lower than the baseline's.",
        "",
        "| left out | chosen | its share of cue hits in the first third there | baseline's there |",
        "|---|---|---:|---:|",
    ]
    for out in spaces:
        rest = set(spaces) - {out}
        base = _score(results[names[0]], rest, budgets)
        fit = [n for n in names if (sc := _score(results[n], rest, budgets))[1] >= base[1] and sc[2] >= base[2]]
        chosen = max(fit, key=lambda n: _score(results[n], rest, budgets)[0])
        held, held_base = _score(results[chosen], {out}, budgets), _score(results[names[0]], {out}, budgets)
        lines.append(f"| {out} | {chosen} | {100 * held[0]:.1f} | {100 * held_base[0]:.1f} |")
    return [*lines, ""]


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
    ap.add_argument(
        "--layouts",
        default="date",
        help="Context layouts to measure, comma-separated: date, rank, leadN (the first is the baseline).",
    )
    args = ap.parse_args(argv)
    budgets = [int(b) for b in args.budgets.split(",")]
    config = RetrievalConfig.preset(args.preset)
    fields = _parse_set(args.set)
    config = config.replace(**{k: v for k, v in fields.items() if k not in LAYOUT_FIELDS})
    base = ContextLayout(**{k: v for k, v in fields.items() if k in LAYOUT_FIELDS})
    layouts = args.layouts.split(",")
    for name in layouts:
        layout_named(base, name)
    results, seconds = evaluate(args.data, args.work, budgets, config, layouts, base)
    text = render(results[layouts[0]], budgets, config)
    for name in layouts[1:]:
        text += f"\nLayout `{name}`:\n\n" + "\n".join(per_memory(results[name], budgets))
    text += "\n" + "\n".join(positions(results, budgets))
    if len(layouts) > 1:
        text += "\n" + "\n".join(leave_one_out(results, budgets))
    command = "python bench/llm_built.py " + " ".join(sys.argv[1:] if argv is None else argv)
    print(text)
    print(f"{seconds:.1f} s")
    if args.out is not None:
        args.out.write_text(f"Command: `{command}`\n\n{text}\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
