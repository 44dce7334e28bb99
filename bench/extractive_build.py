"""Extractive (no-LLM) build of the dev LoCoMo conversations: nodes per type and build time per conversation.

Each conversation is imported into a fresh SQLite file and built from scratch with the given embedder (default: the
shipped all-MiniLM-L6-v2, offline), so every figure includes embedding every turn once; `tmem check` runs after each
build and must report no violation. Model loading is timed once, separately.

Run (from the repository root):
    python bench/extractive_build.py --data /work/shared/data/locomo10.dev.json --out bench/results/extractive_build.md
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

from tmem.construct.check import check_space
from tmem.construct.extractive import build_extractive
from tmem.construct.pipeline import reset_space
from tmem.embed.base import Embedder
from tmem.embed.hashing import HashEmbedder
from tmem.embed.sentence import SentenceTransformerEmbedder
from tmem.ingest import import_file, read_file
from tmem.models import TriggerFamily
from tmem.scope import Scope
from tmem.store.sqlite import SQLiteStore


def _embedder(name: str) -> Embedder:
    if name == "hash":
        return HashEmbedder()
    return SentenceTransformerEmbedder(name)


async def _run(data: Path, embedder: Embedder, only: list[str]) -> list[dict[str, object]]:
    names = [s.name for s in read_file(data)]
    rows: list[dict[str, object]] = []
    for name in names:
        if only and name not in only:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            store = SQLiteStore.open(Path(tmp) / "tmem.db")
            import_file(store, data, space=name)
            started = time.perf_counter()
            report = await build_extractive(store, Scope.local(name), embedder=embedder)
            seconds = time.perf_counter() - started
            check = check_space(store, Scope.local(name))
            if not check.ok:
                raise SystemExit(f"{name}: tmem check failed: {[v.code for v in check.violations]}")
            # the same build again from the embedding cache: what the algorithm costs without the model
            before = (store.scenes(Scope.local(name)), store.topics(Scope.local(name)), store.items(Scope.local(name)))
            reset_space(store, Scope.local(name))
            started = time.perf_counter()
            await build_extractive(store, Scope.local(name), embedder=embedder)
            cached_seconds = time.perf_counter() - started
            if (
                store.scenes(Scope.local(name)),
                store.topics(Scope.local(name)),
                store.items(Scope.local(name)),
            ) != before:
                raise SystemExit(f"{name}: a rebuild from cached embeddings differs from the first build")
            links = store.topic_links(Scope.local(name))
            rows.append(
                {
                    "space": name,
                    "sessions": len(store.sessions(Scope.local(name))),
                    "turns": len(store.turns(Scope.local(name))),
                    "scenes": report.counts["scenes"],
                    "topics": report.counts["topics"],
                    "links": len(links),
                    "items": report.counts["items"],
                    "entity": len(store.triggers(Scope.local(name), family=TriggerFamily.ENTITY)),
                    "seconds": seconds,
                    "cached_seconds": cached_seconds,
                    "stage_seconds": {st.stage: st.seconds for st in report.stages},
                }
            )
            store.close()
        print(f"{name}: {rows[-1]}", file=sys.stderr)
    return rows


def _table(rows: list[dict[str, object]]) -> str:
    head = (
        "| conversation | sessions | turns | scenes | topics | topic links | items | Entity triggers | build s "
        "| rebuild s, cached embeddings |"
    )
    lines = [head, "|" + "---|" * 10]
    for r in rows:
        lines.append(
            f"| {r['space']} | {r['sessions']} | {r['turns']} | {r['scenes']} | {r['topics']} | {r['links']} | "
            f"{r['items']} | {r['entity']} | {float(str(r['seconds'])):.1f} | {float(str(r['cached_seconds'])):.1f} |"
        )
    keys = ["sessions", "turns", "scenes", "topics", "links", "items", "entity"]
    totals = {k: sum(int(str(r[k])) for r in rows) for k in keys}
    seconds = sum(float(str(r["seconds"])) for r in rows)
    cached = sum(float(str(r["cached_seconds"])) for r in rows)
    lines.append("| **total** | " + " | ".join(str(totals[k]) for k in keys) + f" | {seconds:.1f} | {cached:.1f} |")
    stages: dict[str, float] = {}
    for r in rows:
        for stage, s in dict(r["stage_seconds"]).items():  # type: ignore[call-overload]
            stages[stage] = stages.get(stage, 0.0) + float(s)
    lines.append("")
    lines.append(
        "Seconds per stage, all conversations: "
        + ", ".join(f"{k} {v:.1f}" for k, v in stages.items())
        + " (segment includes embedding every turn and writing the session's records)."
    )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo10.dev.json"
    )
    parser.add_argument("--embedder", default="all-MiniLM-L6-v2", help="model name/path, or 'hash'")
    parser.add_argument("--spaces", default="", help="comma-separated sample ids (default: all)")
    parser.add_argument("--out", type=Path, default=None, help="write the Markdown table here")
    args = parser.parse_args()
    t0 = time.perf_counter()
    embedder = _embedder(args.embedder)
    embedder.embed(["warm-up"])
    load = time.perf_counter() - t0
    rows = asyncio.run(_run(args.data, embedder, [s for s in args.spaces.split(",") if s]))
    text = (
        f"Extractive build, embedder {embedder.model_id}, data {args.data.name}; model load {load:.1f} s (once).\n"
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, load average at the end "
        f"{os.getloadavg()[0]:.1f} (shared with other work), Python {platform.python_version()}.\n\n"
        + _table(rows)
        + "\n"
    )
    print(text)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
