"""Search latency of the retrieval cascade against its floor, measured in the same run.

Floor = one query embedding + one flat matrix product over the same vectors the cascade searches (every node and
trigger-view vector of the space stacked into one matrix). The cascade does strictly more (BM25, fusion, per-host
max, typed results), so the ratio p50(search) / p50(floor) says what the structure costs.

Spaces:
  * a LoCoMo dev conversation imported and built in extractive mode with the real MiniLM embedder (via the store);
  * synthetic spaces of N indexed trigger views (random unit vectors, synthetic texts): items carry 3 views
    (concept, bridge, joint) and scenes 8 (4 Scene + 4 Horizon), half the views each; topics = scenes / 10.

The floor always encodes the query on one torch thread; the search runs with the library's default settings
(``Settings.embed_threads``, TMEM_EMBED_THREADS) unless --embed-threads is given. --busy N adds N busy-loop
processes for the duration of the timing (a loaded machine).

Run (from the repository root):
    python bench/latency.py --sizes 10000,100000,1000000 --queries 50 --out bench/results/latency.md
    python bench/latency.py --sizes "" --busy 1 --db-dir /tmp/lat --out bench/results/latency.md   # under load
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import torch

from tmem.construct.extractive import build_extractive
from tmem.embed.base import Embedder
from tmem.embed.sentence import SentenceTransformerEmbedder
from tmem.index.backend import MemoryVectorIndex, view_part
from tmem.index.space import SpaceIndex, SpaceRecords
from tmem.ingest.importer import import_spaces
from tmem.ingest.reader import read_file
from tmem.models import (
    Item,
    ItemKind,
    Scene,
    Topic,
    TopicSceneLink,
    Trigger,
    TriggerFamily,
    TriggerView,
)
from tmem.retrieve.cascade import Retriever, run_cascade
from tmem.retrieve.config import RetrievalConfig
from tmem.scope import Scope
from tmem.settings import Settings
from tmem.store.sqlite import SQLiteStore

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo10.dev.json"
DAY0 = datetime(2023, 1, 1)


def pct(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q)) * 1000.0


def rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 / 1024


def measure(
    queries: Sequence[str], search: Callable[[str], object], floor: Callable[[str], object]
) -> tuple[list[float], list[float]]:
    """Alternate search and floor per query so that both see the same machine load."""
    for q in queries[:3]:  # warm-up (first calls pay allocator and thread-pool start-up)
        search(q)
        floor(q)
    s_times, f_times = [], []
    for q in queries:
        t0 = time.perf_counter()
        search(q)
        t1 = time.perf_counter()
        floor(q)
        t2 = time.perf_counter()
        s_times.append(t1 - t0)
        f_times.append(t2 - t1)
    return s_times, f_times


def row(name: str, n_views: int, n_vectors: int, build_s: float, s: list[float], f: list[float]) -> dict[str, object]:
    return {
        "space": name,
        "views": n_views,
        "vectors": n_vectors,
        "index_build_s": round(build_s, 2),
        "search_p50_ms": round(pct(s, 50), 2),
        "search_p95_ms": round(pct(s, 95), 2),
        "floor_p50_ms": round(pct(f, 50), 2),
        "floor_p95_ms": round(pct(f, 95), 2),
        "ratio_p50": round(statistics.median(s) / statistics.median(f), 2),
        "peak_rss_gib": round(rss_gib(), 2),
    }


# ------------------------------------------------------------------ LoCoMo-size space


def bench_locomo(
    conv: str, embedder: Embedder, n_queries: int, db_dir: Path, floor_embedder: Embedder
) -> dict[str, object]:
    store = SQLiteStore.open(db_dir / "tmem.db")
    try:
        if not store.has_space(Scope.local(conv)):
            space = next(s for s in read_file(DATA) if s.name == conv)
            import_spaces(store, [space], source=str(DATA))
            t = time.perf_counter()
            asyncio.run(build_extractive(store, Scope.local(conv), embedder=embedder))
            print(f"extractive build of {conv}: {time.perf_counter() - t:.1f}s", file=sys.stderr)
        retriever = Retriever(store, embedder)
        t = time.perf_counter()
        index = retriever.index(Scope.local(conv))
        build_s = time.perf_counter() - t
        matrix = in_process(index)  # every node and view vector, the very array the cascade multiplies
        questions = [q["question"] for c in json.loads(DATA.read_text()) if c["sample_id"] == conv for q in c["qa"]]
        queries = questions[:n_queries]
        cfg = RetrievalConfig.preset("auto")  # the default: resolves to `extractive` on this space

        def floor(q: str) -> object:
            return matrix @ floor_embedder.embed([q]).vectors[0]

        s, f = measure(queries, lambda q: retriever.search(Scope.local(conv), q, cfg), floor)
        n_views = n_view_vectors(index)
        out = row(f"{conv} (extractive, MiniLM, preset auto)", n_views, matrix.shape[0], build_s, s, f)
        out["nodes"] = index.counts()
        return out
    finally:
        store.close()


def bench_packing(conv: str, embedder: Embedder, n_queries: int, db_dir: Path, budgets: list[int]) -> str:
    """Time :func:`pack_context` alone on search results of conv-26 (searched once, untimed): per tokenizer, a first
    pass over the queries with an empty count cache, then a second pass (every line counted before). On code whose
    pack_context takes no counter (before the real tokenizer) the one row is its word count."""
    import inspect

    from tmem.answer.budget import pack_context
    from tmem.retrieve.recipe import asked

    takes_counter = "counter" in inspect.signature(pack_context).parameters
    store = SQLiteStore.open(db_dir / "tmem.db")
    try:
        if not store.has_space(Scope.local(conv)):
            space = next(s for s in read_file(DATA) if s.name == conv)
            import_spaces(store, [space], source=str(DATA))
            asyncio.run(build_extractive(store, Scope.local(conv), embedder=embedder))
        retriever = Retriever(store, embedder)
        questions = [q["question"] for c in json.loads(DATA.read_text()) if c["sample_id"] == conv for q in c["qa"]]
        cfg = RetrievalConfig.preset("auto")
        lines = [
            "| budget | counter | pass | pack p50 CPU ms | pack p95 CPU ms | mean tokens |",
            "|---:|---|---|---:|---:|---:|",
        ]
        for budget in budgets:
            results = [retriever.search(Scope.local(conv), q, asked(cfg, None, budget)) for q in questions[:n_queries]]
            k0 = results[0].layout.context_k0
            names = ["words", "cl100k"] if takes_counter else ["words (count_tokens, before)"]
            for name in names:
                kwargs: dict[str, object] = {}
                if takes_counter:
                    from tmem.util.tokens import token_counter

                    counter = token_counter(name)
                    counter.count.cache_clear()  # type: ignore[attr-defined]
                    kwargs["counter"] = counter
                for label in ("first", "second"):
                    times, tokens = [], []
                    for result in results:
                        t = time.process_time()  # CPU time: packing is single-threaded, and this box is shared
                        ctx = pack_context(result, budget, k0=k0, **kwargs)  # type: ignore[arg-type]
                        times.append(time.process_time() - t)
                        tokens.append(ctx.tokens)
                    lines.append(
                        f"| {budget} | {name} | {label} | {pct(times, 50):.2f} | {pct(times, 95):.2f} | "
                        f"{statistics.mean(tokens):.0f} |"
                    )
        return "\n".join(lines)
    finally:
        store.close()


def in_process(index: SpaceIndex) -> np.ndarray:
    """The in-process vector stack of an index (these benches run on SQLite). The floor is one product over every
    vector, so a space with parts held approximately (200k entries or more: docs/scaling.md) has no such floor."""
    assert isinstance(index.vectors, MemoryVectorIndex)
    if index.vectors.approximate_parts:
        raise SystemExit(
            f"Parts {index.vectors.approximate_parts} are searched through an IVF, not the stacked matrix the floor "
            "multiplies; measure spaces under 200k entries a part here and larger ones with bench/scale_vectors.py."
        )
    return index.vectors.matrix


def n_view_vectors(index: SpaceIndex) -> int:
    return sum(n for part, n in index.counts().items() if part.startswith("views."))


# ------------------------------------------------------------------ synthetic spaces


def synthetic_records(n_views: int, rng: np.random.Generator, vocab: list[str]) -> SpaceRecords:
    n_items = n_views // 6  # 3 views each: half of the views
    n_scenes = max(1, n_views // 16)  # 8 views each: the other half
    n_topics = max(1, n_scenes // 10)

    def text(n: int) -> str:
        return " ".join(vocab[i] for i in rng.integers(0, len(vocab), n))

    topics = [Topic(id=f"t{i}", seq=i, label=text(3)) for i in range(n_topics)]
    scenes = [
        Scene(
            id=f"s{i}",
            seq=i,
            title=text(4),
            summary=text(12),
            narrative="",
            turn_ids=[f"D{i}:1"],
            start=DAY0 + timedelta(hours=i),
            end=DAY0 + timedelta(hours=i, minutes=5),
        )
        for i in range(n_scenes)
    ]
    links = [TopicSceneLink(topic_id=f"t{i % n_topics}", scene_id=s.id) for i, s in enumerate(scenes)]
    items = [
        Item(id=f"i{i}", text=text(14), kind=ItemKind.ATOMIC, scene_ids=[f"s{i % n_scenes}"], seq=i)
        for i in range(n_items)
    ]
    triggers: list[Trigger] = []
    for i in range(n_items):
        triggers.append(
            Trigger(
                id=f"e{i}",
                family=TriggerFamily.ENTITY,
                host_kind="item",
                host_id=f"i{i}",
                views=[TriggerView(name="concept", text=text(2))],
            )
        )
        triggers.append(
            Trigger(
                id=f"b{i}",
                family=TriggerFamily.BRIDGE,
                host_kind="item",
                host_id=f"i{i}",
                views=[TriggerView(name="bridge", text=text(8)), TriggerView(name="joint", text=text(16))],
            )
        )
    for i in range(n_scenes):
        triggers.append(
            Trigger(
                id=f"sc{i}",
                family=TriggerFamily.SCENE,
                host_kind="scene",
                host_id=f"s{i}",
                views=[TriggerView(name=v, text=text(8)) for v in ("situation", "object", "event", "emotion")],
            )
        )
        triggers.append(
            Trigger(
                id=f"h{i}",
                family=TriggerFamily.HORIZON,
                host_kind="scene",
                host_id=f"s{i}",
                views=[TriggerView(name=f"horizon:{k}", text=text(8)) for k in range(4)],
            )
        )
    return SpaceRecords(
        space=Scope.local(f"synthetic-{n_views}"),
        topics=topics,
        scenes=scenes,
        items=items,
        links=links,
        triggers=triggers,
        mode="llm",
    )


def bench_synthetic(
    n_views: int, embedder: Embedder, queries: Sequence[str], seed: int, floor_embedder: Embedder
) -> dict[str, object]:
    rng = np.random.default_rng(seed)
    vocab = [f"w{i}" for i in range(5000)] + ["dinner", "restaurant", "career", "dance", "store", "allergy"]
    t = time.perf_counter()
    records = synthetic_records(n_views, rng, vocab)
    dim = embedder.dim

    def vectorize(texts: Sequence[str]) -> np.ndarray:
        m = rng.standard_normal((len(texts), dim), dtype=np.float32)
        m /= np.linalg.norm(m, axis=1, keepdims=True)
        return m

    index = SpaceIndex.build(records, vectorize, dim)
    del records
    gc.collect()
    build_s = time.perf_counter() - t
    matrix = in_process(index)  # every node and view vector, the very array the cascade multiplies
    cfg = RetrievalConfig.preset("paper").replace(gate=None)  # random vectors never reach 0.85

    def floor(q: str) -> object:
        return matrix @ floor_embedder.embed([q]).vectors[0]

    def search(q: str) -> object:
        return run_cascade(index, q, embedder.embed([q]).vectors[0], cfg)

    s, f = measure(queries, search, floor)
    n = n_view_vectors(index)
    out = row(f"synthetic {n_views:,} views", n, matrix.shape[0], build_s, s, f)
    out["nodes"] = index.counts()
    return out


def gate_calibration(conv: str, embedder: Embedder, n_questions: int, db_dir: Path) -> str:
    """Where a cosine gate falls for this embedder: max cosine of a question with the Entity views of the items that
    hold its gold evidence, against all other items (LoCoMo categories 1-4). Needs the space built by the latency run.
    """
    store = SQLiteStore.open(db_dir / "tmem.db")
    try:
        index = Retriever(store, embedder).index(Scope.local(conv))
        qa = [q for c in json.loads(DATA.read_text()) if c["sample_id"] == conv for q in c["qa"] if q["category"] != 5][
            :n_questions
        ]
        gold: list[float] = []
        other: list[float] = []
        for q in qa:
            vec = embedder.embed([q["question"]]).vectors[0]
            parts = [view_part(TriggerFamily.ENTITY.value)]
            hosts = {h.host: h.score for h in index.vectors.top_hosts(parts, vec, len(index.items))}
            evidence = set(q.get("evidence", []))
            for item in index.items:
                if item.id in hosts:
                    (gold if evidence & set(item.turn_ids) else other).append(hosts[item.id])
        lines = [
            "| items | n | p50 | p90 | p99 | >= 0.5 | >= 0.6 | >= 0.7 | >= 0.85 |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for name, values in (("gold evidence", gold), ("all others", other)):
            a = np.asarray(values)
            shares = " | ".join(f"{np.mean(a >= g):.2%}" for g in (0.5, 0.6, 0.7, 0.85))
            lines.append(
                f"| {name} | {a.size:,} | {np.percentile(a, 50):.3f} | {np.percentile(a, 90):.3f} "
                f"| {np.percentile(a, 99):.3f} | {shares} |"
            )
        return f"Entity-view max cosine, {len(qa)} questions of {conv}, {embedder.model_id}:\n\n" + "\n".join(lines)
    finally:
        store.close()


def markdown(rows: list[dict[str, object]], command: str, env: dict[str, str]) -> str:
    head = (
        "| space | views | vectors | index build s | search p50 ms | search p95 ms | floor p50 ms | floor p95 ms "
        "| p50 ratio | peak RSS GiB |\n|---|---|---|---|---|---|---|---|---|---|\n"
    )
    body = "".join(
        f"| {r['space']} | {r['views']:,} | {r['vectors']:,} | {r['index_build_s']} | {r['search_p50_ms']} "
        f"| {r['search_p95_ms']} | {r['floor_p50_ms']} | {r['floor_p95_ms']} | {r['ratio_p50']} "
        f"| {r['peak_rss_gib']} |\n"
        for r in rows
    )
    envs = "; ".join(f"{k}: {v}" for k, v in env.items())
    return f"Command: `{command}`\n\nMachine: {envs}\n\n{head}{body}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10000,100000,1000000", help="Synthetic view counts, comma separated.")
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--conv", default="conv-26", help="LoCoMo dev conversation ('' to skip).")
    ap.add_argument("--db-dir", type=Path, default=None, help="Keep the built conversation here between runs.")
    ap.add_argument("--out", type=Path, default=None, help="Append the Markdown table here.")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument(
        "--embed-threads",
        type=int,
        default=None,
        help="Query-encoder threads (default: the library's setting, TMEM_EMBED_THREADS / Settings.embed_threads; "
        "0: torch's default, every core).",
    )
    ap.add_argument(
        "--busy", type=int, default=0, metavar="N", help="Run N busy-loop processes during the timing (load)."
    )
    ap.add_argument(
        "--gate-calibration",
        type=int,
        default=0,
        metavar="N",
        help="Instead of timing, print where the item-trigger gate falls on N questions (needs --db-dir of a run).",
    )
    ap.add_argument(
        "--pack",
        default="",
        metavar="B,B",
        help="Instead of timing search, time context packing at these budgets per tokenizer (needs --db-dir).",
    )
    args = ap.parse_args()
    threads = Settings().embed_threads if args.embed_threads is None else args.embed_threads
    if args.pack:
        budgets = [int(b) for b in args.pack.split(",")]
        embedder = SentenceTransformerEmbedder(query_threads=threads)
        text = bench_packing(args.conv, embedder, args.queries, args.db_dir, budgets)
        print(text)
        if args.out:
            with args.out.open("a") as fh:
                fh.write(f"\n## Context packing\n\nCommand: `python {' '.join(sys.argv)}`\n\n{text}\n")
        return
    if args.gate_calibration:
        text = gate_calibration(args.conv, SentenceTransformerEmbedder(), args.gate_calibration, args.db_dir)
        print(text)
        if args.out:
            with args.out.open("a") as fh:
                fh.write(f"\n## Gate calibration\n\nCommand: `python {' '.join(sys.argv)}`\n\n{text}\n")
        return

    embedder = SentenceTransformerEmbedder(query_threads=threads)
    embedder.embed(["load the model before any timing"])
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
    try:
        rows = _timed_rows(args, embedder)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    env = {
        "python": platform.python_version(),
        "cpus": str(os.cpu_count()),
        "query-encoder threads": f"{threads or 'torch default'} ({'--embed-threads' if args.embed_threads is not None else 'library default'})",
        "torch default threads": str(torch.get_num_threads()),
        "busy-loop processes": str(args.busy),
        "load average at end": " ".join(f"{x:.1f}" for x in os.getloadavg()),
        "embedder": embedder.model_id,
        "queries": str(args.queries),
    }
    text = markdown(rows, "python " + " ".join(sys.argv), env)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with args.out.open("a") as fh:
            fh.write(f"\n## Run of {datetime.now():%Y-%m-%d %H:%M} (bookkeeping date, not a memory date)\n\n{text}")


def _timed_rows(args: argparse.Namespace, embedder: SentenceTransformerEmbedder) -> list[dict[str, object]]:
    # The floor always encodes on one thread: the fastest query encoding measured on this box, whatever the setting
    # under test (so that a slow setting shows as a high ratio, not as a slow floor).
    floor_embedder = SentenceTransformerEmbedder(query_threads=1)
    rows: list[dict[str, object]] = []
    if args.conv:
        if args.db_dir is None:
            with tempfile.TemporaryDirectory() as tmp:
                rows.append(bench_locomo(args.conv, embedder, args.queries, Path(tmp), floor_embedder))
        else:
            args.db_dir.mkdir(parents=True, exist_ok=True)
            rows.append(bench_locomo(args.conv, embedder, args.queries, args.db_dir, floor_embedder))
        print(json.dumps(rows[-1]), file=sys.stderr)
    conv_questions = [q["question"] for c in json.loads(DATA.read_text()) for q in c["qa"]]
    for size in [int(x) for x in args.sizes.split(",") if x]:
        rows.append(bench_synthetic(size, embedder, conv_questions[: args.queries], args.seed, floor_embedder))
        gc.collect()  # the previous space's index is garbage now: free it before building the next
        print(json.dumps(rows[-1]), file=sys.stderr)
    return rows


if __name__ == "__main__":
    main()
